"""Failed requests are counted per test and are misses (+inf) in every percentile;
server failures beyond max_error_rate (default 0) are a fail naming the cause; the
successful samples are still reported."""
import json

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script

SLO = "workloads:\n  w: {class: custom, prompt_tokens: 16, output_tokens: 4, samples: 20, warmup: 0, %s slo: {%s}}\n"


def run(pytester, rate="", slo="ttft_p90: 1s", *args):
    pytester.makefile(".slo.yaml", p=SLO % (rate, slo))
    # the probe is request 1, so requests 5, 10, 15, 20 of the 20 samples (+1 probe) fail: 4 of 20
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1", "--llm-latency-json=r.json",
                              *args, plugins=[FakeServerPlugin(Script(ttft_ms=100, tpot_ms=10, fail_every=5))])


def result(pytester):
    return json.loads((pytester.path / "r.json").read_text())["results"][0]


def test_server_failures_over_the_default_zero_rate_fail_and_still_report_the_samples(pytester):
    r = run(pytester, "", "ttft_p90: 1s", "--llm-latency-confidence=null")  # 20 cannot pass a p90 at 95%
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*server failed: 4 of 20 requests failed (http_500 x4): HTTP 500*worker crashed*"
                            "server error rate 20.0% > max_error_rate 0.0%*"])
    r.stdout.fnmatch_lines(["*p.slo.yaml::w*16*FAIL*"])
    res = result(pytester)
    assert res["failed_requests"] == 4 and res["n"] == 16 and res["failures"] == {"http_500": 4}
    assert res["verdict"] == "fail"
    # the 4 failures are misses: p90 lands on them (the old code reported 100 ms, a faster-looking server)
    assert res["ttft_ms"]["p90"] is None and res["ttft_ms"]["censored"] == 4 and res["ttft_ms"]["p50"] == 100.0


def test_failures_within_max_error_rate_still_miss_the_percentile_they_land_on(pytester):
    r = run(pytester, "max_error_rate: 0.25,", "ttft_p90: 1s", "--llm-latency-confidence=null")  # point estimate
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*TTFT p90 inf ms > budget 1000 ms (n=20, 4 failed counted as misses*"])
    r.stdout.fnmatch_lines(["*p.slo.yaml::w*16*100.0*inf*FAIL*"])
    # at the default 95%, 20 samples could never pass a p90 (its upper bound needs 29): refused
    # before any request rather than run to an inconclusive fail
    r = run(pytester, "max_error_rate: 0.25,")
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines(["*budget ttft_p90 (*): 20 samples can never pass a p90 at 95% confidence (its upper "
                            "bound needs >= 29 samples: 0.9^29 <= 0.05)*"])


def test_failures_within_max_error_rate_pass_with_a_visible_note(pytester):
    r = run(pytester, "max_error_rate: 0.25,", "ttft_p50: 1s")
    r.assert_outcomes(passed=1, warnings=1)
    r.stdout.fnmatch_lines(["*LatencyWarning: w: 4 of 20 requests failed (http_500 x4)*allowed by max_error_rate*"])
    res = result(pytester)
    assert res["verdict"] == "pass" and any("allowed by max_error_rate" in n for n in res["notes"])


def test_strict_ci_turns_a_note_into_a_failure(pytester):
    r = run(pytester, "max_error_rate: 0.25,", "ttft_p50: 1s", "-W", "error::pytest_llm_latency.LatencyWarning")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*LatencyWarning: w: 4 of 20 requests failed*"])
    assert result(pytester)["notes"]  # the result was recorded before the warning ended the test


def test_json_with_misses_is_valid_against_the_schema(pytester):
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    run(pytester)
    doc = json.loads((pytester.path / "r.json").read_text())
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert "Infinity" not in (pytester.path / "r.json").read_text()
