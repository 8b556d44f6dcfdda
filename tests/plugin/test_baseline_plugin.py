"""Deploy gate through pytest: save a baseline of raw samples, then judge candidates against it
(reference target with jitter on: a 15% slower decode fails with the house message, the same
target with another jitter seed passes), "new" tests, bad files, json-samples as a baseline."""
import json
from importlib import resources

import pytest

# time_scale 0.5: ~3.4 ms decode steps, so a 15% slower decode is ~0.5 ms per token, well
# above the loaded machine's per-step scheduling noise once a request's steps are averaged.
REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.5&jitter=0.05"
SLOW_DECODE = REF + "&decode_efficiency=0.6087"   # 0.7 / 1.15: every decode step 15% slower

TEST = """
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=16, samples=40, warmup=1,
                     ttft_p95=None, tpot_p95=None, url={url!r}{extra})
def test_gate():
    pass
"""


def write(pytester, url, extra=""):
    pytester.makepyfile(test_gate=TEST.format(url=url, extra=extra))


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


@pytest.fixture
def saved(pytester):
    write(pytester, REF + "&jitter_seed=1")
    r = run(pytester, "--llm-latency-save-baseline=base.json")
    r.assert_outcomes(passed=1)
    assert "baseline of 1 test(s) saved to base.json" in r.stdout.str()
    return json.loads((pytester.path / "base.json").read_text())


def test_saved_baseline_has_raw_samples_fingerprint_and_validates(saved):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/baseline.schema.json").read_text())
    jsonschema.validate(saved, schema)
    (key, entry), = saved["tests"].items()
    assert key == "test_gate.py::test_gate::chat"
    s = entry["samples"]
    assert len(s["ttft_ms"]) == len(s["tpot_ms"]) == len(s["e2e_ms"]) == len(s["output_tokens"]) == 40
    assert len(s["itl_ms"]) == 40 * 15 and set(s["output_tokens"]) == {16}
    assert len(set(s["tpot_ms"])) > 30                      # raw per-request values, not a summary
    fp = entry["fingerprint"]
    assert fp["model"] == "llama-3.1-8b" and fp["workload"]["output_tokens"] == 16
    assert fp["server"]["models"] == ["llama-3.1-8b"] and fp["plugin_version"] and fp["time"]
    assert saved["fingerprint"]["model"] == "llama-3.1-8b"


def test_slower_decode_fails_with_the_house_message_and_json_overlay(pytester, saved):
    write(pytester, SLOW_DECODE + "&jitter_seed=2")
    r = run(pytester, "--llm-latency-baseline=base.json", "--llm-latency-json=r.json", "--llm-latency-html=r.html")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    import re
    m = re.search(r"TPOT p50 \+(\d+\.\d)% vs baseline \((\S+) → (\S+) ms; 95% CI \+(\d+\.\d)%\.\.\+(\d+\.\d)%\) "
                  r"> tolerance 5%", out)
    assert m, out
    assert 8 < float(m.group(1)) < 25 and float(m.group(4)) > 0
    assert "fingerprint differs from the baseline: target:" in out     # the URL changed: a LatencyWarning
    doc = json.loads((pytester.path / "r.json").read_text())
    res, = doc["results"]
    assert res["verdict"] == "fail" and res["baseline"]["status"] == "regression"
    base = res["baseline"]
    assert base["label"] == "baseline" and base["cdf"]["tpot_ms"]["n"] == 40
    tpot = next(c for c in base["comparisons"] if c["key"] == "tpot_p50")
    assert tpot["status"] == "regression" and tpot["lower"] > 1 and tpot["ratio"] > 1.05
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    jsonschema.validate(doc, schema)
    html = (pytester.path / "r.html").read_text()       # the HTML report overlays the baseline's CDF
    assert html.count('data-label="baseline"') == 3 and html.count('data-label="this run"') == 3  # TTFT/TPOT/ITL
    assert "baseline (n=40)" in html and "baseline (n=600)" in html   # ITL: 40 x 15 gaps


def test_same_target_other_seed_passes_and_a_marker_tolerance_applies(pytester, saved):
    write(pytester, REF + "&jitter_seed=3")
    r = run(pytester, "--llm-latency-baseline=base.json", "--llm-latency-json=r.json")
    r.assert_outcomes(passed=1)
    res, = json.loads((pytester.path / "r.json").read_text())["results"]
    assert res["baseline"]["status"] in ("ok", "improvement")
    assert {c["key"] for c in res["baseline"]["comparisons"]} == {"ttft_p50", "ttft_p95", "tpot_p50", "e2e_p50"}
    # a 15% slower decode passes when the marker's tolerances allow 40% (TTFT too: a 64-token
    # prefill is memory-bound, so decode_efficiency slows it as well)
    write(pytester, SLOW_DECODE, extra=", regression={'tpot_p50': '40%', 'e2e_p50': '40%', 'ttft_p50': '40%', "
                                       "'ttft_p95': '40%'}")
    r = run(pytester, "--llm-latency-baseline=base.json")
    r.assert_outcomes(passed=1)


def test_a_test_without_an_entry_is_new_and_bad_files_are_usage_errors(pytester, saved):
    pytester.makepyfile(test_other=TEST.format(url=REF, extra="").replace("test_gate", "test_other"))
    r = run(pytester, "test_other.py", "--llm-latency-baseline=base.json")
    r.assert_outcomes(passed=1)
    assert "new: no baseline entry for this test, nothing to compare" in r.stdout.str()
    (pytester.path / "bad.json").write_text('{"format": "pytest-llm-latency-baseline", "version": 99}')
    r = run(pytester, "--llm-latency-baseline=bad.json")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "--llm-latency-baseline: bad.json: baseline format version 99 is not supported" in r.stderr.str()
    r = run(pytester, "--llm-latency-baseline=missing.json")
    assert "missing.json: no such file (save one first with --llm-latency-save-baseline PATH)" in r.stderr.str()
    r = run(pytester, "--llm-latency-baseline=base.json", "--llm-latency-regression=tfft_p95=10%")
    assert "--llm-latency-regression: unknown regression key 'tfft_p95'" in r.stderr.str()


def test_json_samples_file_serves_as_a_baseline(pytester):
    write(pytester, REF + "&jitter_seed=4")
    r = run(pytester, "--llm-latency-json=r.json", "--llm-latency-json-samples")
    r.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "r.json").read_text())
    res, = doc["results"]
    assert len(res["samples"]["ttft_ms"]) == 40 and res["fingerprint"]["model"] == "llama-3.1-8b"
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    jsonschema.validate(doc, schema)
    write(pytester, SLOW_DECODE + "&jitter_seed=5")
    r = run(pytester, "--llm-latency-baseline=r.json")
    r.assert_outcomes(failed=1)
    assert "TPOT p50 +" in r.stdout.str()
