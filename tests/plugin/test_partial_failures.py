"""Failed requests are counted per test; max_error_rate (default 0) decides; the
successful samples are still reported."""
import json

from fakeserver import FakeServerPlugin, Script

SLO = "workloads:\n  w: {class: custom, prompt_tokens: 16, output_tokens: 4, samples: 20, warmup: 0, %s slo: {ttft_p90: 1s}}\n"


def run(pytester, rate=""):
    pytester.makefile(".slo.yaml", p=SLO % rate)
    # the probe is request 1, so requests 5, 10, 15, 20 of the 20 samples (+1 probe) fail: 4 of 20
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1", "--llm-latency-json=r.json",
                              plugins=[FakeServerPlugin(Script(ttft_ms=100, tpot_ms=10, fail_every=5))])


def test_default_zero_error_rate_fails_and_still_reports_the_samples(pytester):
    r = run(pytester)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*4 of 20 requests failed (http_500 x4)*error rate 20.0% > max_error_rate 0.0%*"])
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]
    assert res["failed_requests"] == 4 and res["n"] == 16 and res["failures"] == {"http_500": 4}
    assert res["ttft_ms"]["p90"] == 100.0 and res["verdict"] == "error"


def test_error_rate_within_budget_passes(pytester):
    r = run(pytester, "max_error_rate: 0.25,")
    r.assert_outcomes(passed=1)
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]
    assert res["failed_requests"] == 4 and res["verdict"] == "pass"
