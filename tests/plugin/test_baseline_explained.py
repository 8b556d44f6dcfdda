"""Deploy gate through pytest: a TPOT regression explained by engine step time and tokens per
step, from the reference target's vLLM spec-decode counters (its steps emit 1 + accepted
tokens).  The saved baseline's ``decode_totals`` and an old baseline without them; the
explanation with the real counters is in ``test_spec_decode_deploy_gate.py``."""
import json

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.5&jitter=0.05&spec_tokens=2&spec_acceptance="

TEST = """
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=16, samples=40, warmup=1,
                     ttft_p95=None, tpot_p95=None, url={url!r})
def test_gate():
    pass
"""


def run(pytester, url, *args):
    pytester.makepyfile(test_gate=TEST.format(url=url))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_the_baseline_stores_decode_totals_and_an_old_one_without_them_says_there_is_no_split(pytester):
    r = run(pytester, REF + "1.0&jitter_seed=1", "--llm-latency-save-baseline=base.json")
    r.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "base.json").read_text())
    (entry,) = doc["tests"].values()
    totals = entry["decode_totals"]
    assert totals["source"] == "vLLM /metrics counters"
    assert totals["decode_tokens"] == 40 * 15 and totals["tokens_per_step"] == 3.0 and totals["step_ms"] > 0
    for entry in doc["tests"].values():
        del entry["decode_totals"]          # as saved before decode totals existed
    (pytester.path / "base.json").write_text(json.dumps(doc))
    r = run(pytester, REF + "0.2,0&jitter_seed=2", "--llm-latency-baseline=base.json")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "TPOT p50 +" in out and "the baseline stores no decode totals" in out
    assert "engine steps unchanged" not in out     # no split claimed without the baseline's totals
