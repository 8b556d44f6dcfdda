"""Deploy gate through pytest: a TPOT regression explained by engine step time and tokens per
step.  The reference target in this branch has no speculative decoding, so a conftest stands in
for the server's vLLM spec-decode counters: it sets ``res.spec_decode`` the way the pipeline
does (``core.spec_decode.from_counters`` on the run's own records), with the tokens per step
given by the test.  Everything after it is the plugin's own path: the saved baseline's
``decode_totals``, loading them back, the comparison and the explanation."""
import json

# time_scale 0.5: ~3.4 ms decode steps (tests/plugin/test_baseline_plugin.py)
REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.5&jitter=0.05"
# the candidate's steps as fast as the baseline's, but 1.2 instead of 3 tokens per step: each
# token takes 3 / 1.2 = 2.5 times as long, i.e. a per-token decode efficiency of 0.7 / 2.5
FEWER_TOKENS_PER_STEP = REF + "&decode_efficiency=0.28"

TEST = """
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=16, samples=40, warmup=1,
                     ttft_p95=None, tpot_p95=None, url={url!r})
def test_gate():
    pass
"""

CONFTEST = """
import os

import pytest_llm_latency.client.drivers.pipeline as pipeline
from pytest_llm_latency.core import spec_decode as sd

TPS = float(os.environ["SPEC_TOKENS_PER_STEP"])


def counters_say(res, records, before, after, timeline):
    decoded = sd.decode_tokens(records)
    accepted = round(decoded - decoded / TPS)
    acc = sd.from_counters({}, {sd.VLLM_COUNTERS["accepted_tokens"]: accepted,
                                sd.VLLM_COUNTERS["draft_tokens"]: 3 * (decoded - accepted),
                                sd.VLLM_COUNTERS["drafts"]: decoded - accepted}, decoded)
    res.spec_decode.set(**sd.as_part(acc, sd.decode_time_ms(records)))


pipeline.record_spec_decode = counters_say
"""


def run(pytester, monkeypatch, url, tps, *args):
    pytester.makepyfile(test_gate=TEST.format(url=url))
    pytester.makeconftest(CONFTEST)
    monkeypatch.setenv("SPEC_TOKENS_PER_STEP", str(tps))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_baseline_gate_says_steps_unchanged_and_tokens_per_step_fell(pytester, monkeypatch):
    r = run(pytester, monkeypatch, REF + "&jitter_seed=1", 3.0, "--llm-latency-save-baseline=base.json")
    r.assert_outcomes(passed=1)
    saved = json.loads((pytester.path / "base.json").read_text())
    (entry,) = saved["tests"].values()
    totals = entry["decode_totals"]
    assert totals["tokens_per_step"] == 3.0 and totals["source"] == "vLLM /metrics counters"
    assert totals["decode_tokens"] == 40 * 15 and totals["step_ms"] > 0

    r = run(pytester, monkeypatch, FEWER_TOKENS_PER_STEP + "&jitter_seed=2", 1.2, "--llm-latency-baseline=base.json",
            "--llm-latency-json=r.json")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "TPOT p50 +" in out and "vs baseline" in out
    assert "cause: decode vs baseline — TPOT +" in out and "on run totals" in out and "not a percentile" in out
    assert "engine steps unchanged" in out, out
    assert "tokens per step 3.0 → 1.2: draft acceptance fell" in out
    (res,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert "engine steps unchanged" in res["baseline"]["explanation"]


def test_an_old_baseline_without_decode_totals_still_gates_and_says_there_is_no_split(pytester, monkeypatch):
    r = run(pytester, monkeypatch, REF + "&jitter_seed=1", 3.0, "--llm-latency-save-baseline=base.json")
    r.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "base.json").read_text())
    for entry in doc["tests"].values():
        del entry["decode_totals"]          # as saved before decode totals existed
    (pytester.path / "base.json").write_text(json.dumps(doc))
    r = run(pytester, monkeypatch, FEWER_TOKENS_PER_STEP + "&jitter_seed=2", 1.2, "--llm-latency-baseline=base.json")
    r.assert_outcomes(failed=1)
    assert "the baseline stores no decode totals" in r.stdout.str()
