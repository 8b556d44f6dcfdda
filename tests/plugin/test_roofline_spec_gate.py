"""The decode roofline judged per engine step, end to end on the scripted fake server (virtual
time): it streams a token every 10 ms (100 tok/s) and its /metrics counts vLLM's spec-decode
counters for 3 tokens per engine step (2 accepted of 3 drafted), so the steps run at 33.3 steps/s.
The roofline puts one step's read (2 GB of weights, a few bytes of KV) at 41.7 steps/s: the steps
at 0.8 of their ceiling, the tokens at 2.4x the single-token one."""
import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script

DECODE_STEPS = 21  # per request: 63 decode tokens, 42 accepted, 3 tokens per step
STEP_BYTES = 2e9 + 2 * 1 * 1 * 1 * 2 * 96  # fp16 weights + K/V of 1 layer x 1 head x 1 dim at 96 ctx
BANDWIDTH_GB_S = 0.8 ** -1 * (100.0 / 3.0) * STEP_BYTES / 1e9  # steps at exactly 0.8 of the ceiling

SLO = f"""
target: {{url: http://fake:8000}}
roofline: {{mem_bandwidth_gb_s: {BANDWIDTH_GB_S!r}, params: 1.0e+9, dtype: fp16, layers: 1, kv_heads: 1,
           head_dim: 1, min_decode_efficiency: 0.6{{draft}}}}
workloads:
  decode: {{class: custom, prompt_tokens: 64, output_tokens: 64, samples: 5, warmup: 1}}
"""


def vllm_spec_counters(script: Script) -> str:
    served = len(script.requests)
    return "\n".join([
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {served * DECODE_STEPS}.0',
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {served * DECODE_STEPS * 3}.0',
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {served * DECODE_STEPS * 2}.0',
        ""])


def run(pytester, metrics, draft=""):
    pytester.makefile(".slo.yaml", spec=SLO.replace("{draft}", draft))
    script = Script(ttft_ms=50, tpot_ms=10, metrics=metrics)
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-confidence=null", "--junitxml=j.xml",
                              "--llm-latency-json=r.json", plugins=[FakeServerPlugin(script)])


def props(pytester):
    root = ET.parse(pytester.path / "j.xml").getroot()
    return {p.get("name"): p.get("value") for p in root.iter("property")}


def test_three_tokens_per_step_at_0_8_of_the_ceiling_pass_a_0_6_floor(pytester):
    """Issue 26, first acceptance point (vLLM counters present, no drafter bytes)."""
    r = run(pytester, vllm_spec_counters)
    r.assert_outcomes(passed=1)
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]
    roof, sd = res["roofline"], res["spec_decode"]
    assert sd["tokens_per_step"] == pytest.approx(3.0, abs=0.1) and sd["source"] == "vLLM /metrics counters"
    assert roof["step_efficiency"] == pytest.approx(0.8, abs=0.05) and roof["tokens_per_step"] == sd["tokens_per_step"]
    assert roof["decode_efficiency"] == pytest.approx(2.4, rel=1e-3)  # per token: over the single-token ceiling
    assert roof["steps_per_s"] == pytest.approx(100.0 / 3.0, rel=1e-3) and roof["status"] == "pass"
    assert roof["draft"].startswith("not counted") and roof.get("draft_bytes") is None
    assert any(n.startswith("roofline: drafter bytes not counted: the ceiling is too high") for n in res["notes"])
    p = props(pytester)
    assert float(p["llm.roofline.step_efficiency"]) == pytest.approx(roof["step_efficiency"])
    assert float(p["llm.spec_decode.tokens_per_step"]) == pytest.approx(3.0, abs=0.1)
    r.stdout.fnmatch_lines(["*decode roofline per engine step*",
                            "*spec.slo.yaml::decode: 100.0 tok/s = 3.00 tokens per step × 33.3 steps/s; "
                            "steps at 0.80 of the ceiling, draft acceptance 67% (run totals; vLLM /metrics counters)"])


def test_a_drafter_counted_raises_the_step_efficiency(pytester):
    r = run(pytester, vllm_spec_counters, ", draft: {head_bytes: 2.0e+8}")
    r.assert_outcomes(passed=1)
    roof = json.loads((pytester.path / "r.json").read_text())["results"][0]["roofline"]
    assert roof["draft_bytes"] == pytest.approx(3 * 2e8)  # 3 drafted tokens per step, from the counters
    assert roof["step_efficiency"] == pytest.approx(0.8 * (STEP_BYTES + 6e8) / STEP_BYTES, rel=1e-3)


def test_without_counters_2_4x_the_ceiling_cannot_be_judged_and_names_speculation(pytester):
    """Issue 26, third acceptance point, through the plugin: the same server without /metrics."""
    r = run(pytester, None)
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert "measured decode is 2.40× the bandwidth ceiling (> 1.05), so it cannot be judged" in out
    assert "speculative decoding / multi-token prediction" in out
    assert "vllm:spec_decode_num_accepted_tokens_total" in out and "min_decode_efficiency to null" not in out
    assert props(pytester)["llm.verdict"] == "error"


def test_counters_that_drafted_nothing_are_no_acceptance_source(pytester):
    """Zeros (llama.cpp exports its counters without a draft model): decode stays judged per token."""
    r = run(pytester, lambda script: vllm_spec_counters(Script()))  # every counter 0, before and after
    r.assert_outcomes(errors=1)
    assert "measured decode is 2.40× the bandwidth ceiling (> 1.05), so it cannot be judged" in r.stdout.str()


def test_a_bad_draft_is_a_collection_error_naming_the_key(pytester):
    r = run(pytester, vllm_spec_counters, ", draft: {head_bytes: 2.0e+8, spec_token: 3}")
    r.stdout.fnmatch_lines(["*spec.slo.yaml:2 roofline.draft.spec_token: unknown draft key 'spec_token'; "
                            "did you mean 'spec_tokens'?*"])
    assert r.ret == pytest.ExitCode.INTERRUPTED


MARKER = """
    import pytest

    @pytest.mark.llm_slo(workload="custom", prompt_tokens=64, output_tokens=64, samples=5, warmup=1,
                         roofline={{"mem_bandwidth_gb_s": %r, "params": 1.0e9, "dtype": "fp16",
                                   "layers": 1, "kv_heads": 1, "head_dim": 1, "draft": {draft}}},
                         min_decode_efficiency=0.6)
    def test_spec():
        pass
"""


def run_marker(pytester, draft):
    pytester.makepyfile(test_m=MARKER.replace("%r", repr(BANDWIDTH_GB_S)).format(draft=draft))
    script = Script(ttft_ms=50, tpot_ms=10, metrics=vllm_spec_counters)
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-confidence=null",
                              "--llm-latency-url=http://fake:8000", "--llm-latency-json=r.json",
                              plugins=[FakeServerPlugin(script)])


def test_a_markers_roofline_mapping_takes_the_draft(pytester):
    run_marker(pytester, '"none"').assert_outcomes(passed=1)
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]
    assert res["roofline"]["draft_bytes"] == 0.0 and res["roofline"]["step_efficiency"] == pytest.approx(0.8, abs=0.01)
    assert not any("drafter bytes not counted" in n for n in res.get("notes") or [])  # n-gram: counted, as 0


def test_a_markers_bad_draft_is_a_usage_error_before_any_request(pytester):
    r = run_marker(pytester, '{"model": "llama-3.2-1c"}')
    r.stderr.fnmatch_lines(["*test_m.py::test_spec @llm_slo roofline.draft.model: unknown model 'llama-3.2-1c'; "
                            "did you mean llama-3.2-1b*"])
    assert r.ret == pytest.ExitCode.USAGE_ERROR
