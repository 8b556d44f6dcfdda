"""What a baseline stores for the explained regression (``decode_totals``): written from a
result, validated on load, read back from a results JSON's version-2 parts, absent in an old
baseline (which still loads); and the A/B path (``plugin.baseline.entry_of`` / ``compare_with``)."""
import json

import pytest

from pytest_llm_latency.core.measure import spec_decode
from pytest_llm_latency.core.checks import judge as judge_all
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.files import baseline as bfile
from pytest_llm_latency.plugin import baseline as pbase
from tests.helpers.records import record

SAMPLES = {"ttft_ms": [10.0], "tpot_ms": [2.0], "output_tokens": [9]}


def doc(**entry):
    return {"format": bfile.FORMAT, "version": 1, "fingerprint": {},
            "tests": {"t.py::t::chat": {"samples": SAMPLES, **entry}}}


def wl(n=20):
    return make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 9, "samples": n,
                               "warmup": 0, "slo": {"ttft_p50": 500}})


def llama_run(gap_ms, accepted, n=20):
    """``n`` requests of 8 decode tokens, ``accepted`` of them accepted drafts (per-response timings)."""
    recs = [record(50, gap_ms=gap_ms, tokens=9, server_timings={"draft_n": 8, "draft_n_accepted": accepted})
            for _ in range(n)]
    res = measured(wl(n), recs, [])
    acc = spec_decode.acceptance(recs)   # as the pipeline fills the part
    assert acc is not None
    res.spec_decode.set(**spec_decode.as_part(acc, spec_decode.decode_time_ms(recs)))
    return res


def test_an_old_baseline_without_totals_loads(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps(doc()))
    loaded = bfile.load(p)
    assert bfile.decode_totals_of(loaded["tests"]["t.py::t::chat"]) is None


def test_totals_are_validated_naming_the_key(tmp_path):
    ok = doc(decode_totals={"decode_tokens": 600, "decode_ms": 2000.0, "tokens_per_step": 3.0, "source": "x"})
    assert bfile.validate(ok, "b.json")
    with pytest.raises(bfile.BaselineError, match=r"decode_totals: unknown key 'tokens_per_stp'"):
        bfile.validate(doc(decode_totals={"tokens_per_stp": 3.0}), "b.json")
    with pytest.raises(bfile.BaselineError, match=r"decode_totals.decode_ms: expected a number >= 0"):
        bfile.validate(doc(decode_totals={"decode_ms": "2s"}), "b.json")


def test_results_v2_parts_are_read_back_as_totals():
    result = {"nodeid": "t.py::t", "workload": "chat", "samples": SAMPLES,
              "spec_decode": {"source": "vLLM /metrics counters", "scope": "run", "decode_tokens": 600,
                              "decode_ms": 2000.0, "tokens_per_step": 3.0, "acceptance_rate": 0.5, "step_ms": 10.0},
              "roofline": {"status": "pass", "step_efficiency": 0.8, "decode_efficiency": 2.4}}
    got = bfile.from_results({"version": 2, "results": [result]}, "r.json")
    assert got["tests"]["t.py::t::chat"]["decode_totals"] == {
        "decode_tokens": 600, "decode_ms": 2000.0, "tokens_per_step": 3.0, "acceptance_rate": 0.5, "step_ms": 10.0,
        "source": "vLLM /metrics counters", "step_efficiency": 0.8, "decode_efficiency": 2.4}
    result["roofline"]["status"] = "config_error"       # no ceiling fraction from a gate that did not judge
    got = bfile.from_results({"version": 2, "results": [result]}, "r.json")
    assert "step_efficiency" not in got["tests"]["t.py::t::chat"]["decode_totals"]
    del result["spec_decode"], result["roofline"]       # a non-speculating v2 result without decode_totals
    assert "decode_totals" not in bfile.from_results({"version": 2, "results": [result]}, "r.json")["tests"][
        "t.py::t::chat"]


def test_saved_from_results_keeps_the_totals(tmp_path):
    res = llama_run(5.0, 4)
    r = {"nodeid": "t.py::t", "workload": "w", **pbase.entry_of(res)}   # samples and decode_totals
    pbase.save_from_results(str(tmp_path / "b.json"), [r])
    entry = bfile.load(tmp_path / "b.json")["tests"]["t.py::t::w"]
    assert entry["decode_totals"]["tokens_per_step"] == pytest.approx(2.0)
    assert entry["decode_totals"]["decode_tokens"] == 20 * 8


def test_ab_arm_entry_explains_the_candidate():
    base = llama_run(3.0, 6)      # 8 decode tokens in 2 steps: 4 per step, 12 ms steps
    cand = llama_run(7.5, 3)      # 8 in 5 steps: 1.6 per step, the same 12 ms steps
    pbase.compare_with(cand, pbase.entry_of(base), {"tpot_p50": 0.05}, label="baseline target B", paired=True)
    judge_all(cand)
    assert cand.verdict == "fail"
    [cause] = [c for c in cand.causes if c.startswith("cause: decode vs baseline target B")]
    assert "engine steps unchanged" in cause and "tokens per step 4.0 → 1.6: draft acceptance fell" in cause
    assert "fingerprint" not in cause     # an A/B arm has no fingerprint to compare
