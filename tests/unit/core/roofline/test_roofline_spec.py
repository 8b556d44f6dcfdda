"""The decode roofline judged per engine step (issue 26): speculative decoding / MTP emit several
tokens per read of the weights, so the gate judges the steps, with the drafter's bytes counted.

Every run here is the same shape: 5 requests of 64 tokens on an H100 serving Llama-3.1-8B at a
mean context of 96 (ceiling 208.4 tok/s), their acceptance from vLLM's counters through
``core.measure.spec_decode`` (the one definition), so the figures are the pipeline's, not hand-written."""
import pytest

from pytest_llm_latency.core.measure import spec_decode
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.hardware import Hardware
from pytest_llm_latency.core.roofline.modelbytes import ModelBytes
from pytest_llm_latency.core.result.result_parts import SpecDecodeInfo
from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
from tests.helpers.roofline import evaluate_roofline
from pytest_llm_latency.core.roofline.roofline_spec import NGRAM, Drafter, speculates, step_figures
from pytest_llm_latency.roofline import catalog

H100 = Hardware(key="h100-sxm", name="H100-SXM", mem_bandwidth_gb_s=3350, source="NVIDIA H100 datasheet")
LLAMA = ModelBytes(weight_bytes=16.06e9, kv_bytes_per_token=131072, name="Llama-3.1-8B", params=8.03e9,
                   bytes_per_param=2.0)
CTX = 96.0
DECODED = 5 * 63  # 5 requests x (64 - 1): the first token of each comes from prefill
CEILING = decode_ceiling(H100, LLAMA, CTX).per_stream_tok_s  # 208.4 tok/s = 208.4 steps/s (dense, no drafter)
V = spec_decode.VLLM_COUNTERS


def spec(tokens_per_step: float, step_efficiency: float, drafted_per_step: float | None = 3.0) -> SpecDecodeInfo:
    """The run's spec_decode part as the pipeline fills it: counter deltas around the samples and a
    decode time that puts the engine steps at ``step_efficiency`` of the (drafter-free) ceiling."""
    steps = DECODED / tokens_per_step
    after = {V["accepted_tokens"]: 100 + DECODED - steps, V["drafts"]: 40 + steps}
    if drafted_per_step is not None:
        after[V["draft_tokens"]] = 300 + drafted_per_step * steps
    before = {V["accepted_tokens"]: 100.0, V["drafts"]: 40.0, V["draft_tokens"]: 300.0}
    acc = spec_decode.from_counters(before, after, DECODED)
    assert acc is not None and acc.tokens_per_step == pytest.approx(tokens_per_step)
    decode_ms = steps / (step_efficiency * CEILING) * 1000.0
    return SpecDecodeInfo(**spec_decode.as_part(acc, decode_ms))


def tpot_ms(s: SpecDecodeInfo) -> float:
    return s.decode_ms / s.decode_tokens  # constant per-token gaps: TPOT p50 = run totals


def judge(s: SpecDecodeInfo, drafter=None, model=LLAMA, min_efficiency=0.6, hints=()):
    return evaluate_roofline(H100, model, context=CTX, tpot_p50_ms=tpot_ms(s), min_efficiency=min_efficiency,
                             spec=s, drafter=drafter, hints=hints)


def test_three_tokens_per_step_at_0_8_of_the_ceiling_passes_a_0_6_floor():
    """Issue 26, first acceptance point: vLLM counters, no drafter bytes."""
    s = spec(3.0, 0.8)
    r = judge(s)
    assert r.decode_efficiency == pytest.approx(2.4, rel=1e-6)  # per token: 2.4x the single-token ceiling
    assert r.status == "pass" and r.steps is not None
    assert r.steps.tokens_per_step == pytest.approx(3.0, abs=0.1)
    assert r.steps.step_efficiency == pytest.approx(0.8, abs=0.05)
    assert r.steps.steps_per_s == pytest.approx(0.8 * CEILING)
    assert r.steps.draft_bytes is None and r.steps.draft.startswith("not counted: no roofline.draft")
    props = r.as_properties()
    assert props["step_efficiency"] == pytest.approx(0.8) and props["tokens_per_step"] == pytest.approx(3.0)
    assert props["decode_efficiency"] == pytest.approx(2.4) and props["draft_bytes"] is None
    lines = r.message.splitlines()
    assert lines[0] == (f"decode {2.4 * CEILING:.1f} tok/s = 3.00 tokens per step × {0.8 * CEILING:.1f} steps/s; "
                        f"steps at 0.80 of the ceiling {CEILING:.1f} steps/s "
                        "(run totals; tokens per step from vLLM /metrics counters)")
    assert lines[1].endswith(", drafter not counted)); budget ≥ 0.60")
    assert "  drafted tokens per step: 3.00 (vLLM /metrics counters: drafted ÷ decode steps)" in lines
    assert any(x.startswith("  per token: TPOT p50 → ") and "2.40 of the single-token ceiling" in x for x in lines)


def test_the_same_steps_below_the_floor_fail_with_the_step_figures():
    r = judge(spec(3.0, 0.5))
    assert r.status == "fail" and r.steps.step_efficiency == pytest.approx(0.5)
    assert r.message.startswith("decode ") and "steps at 0.50 of the ceiling" in r.message and "check:" in r.message


def test_without_an_acceptance_source_2_4x_over_the_ceiling_cannot_be_judged():
    """Issue 26, third acceptance point: never a pass; speculative decoding and the counters named."""
    s = spec(3.0, 0.8)
    r = evaluate_roofline(H100, LLAMA, context=CTX, tpot_p50_ms=tpot_ms(s), min_efficiency=0.6)
    assert r.decode_efficiency == pytest.approx(2.4) and r.status == "config_error"
    head = r.message.splitlines()[0]
    assert head.startswith("roofline configuration error: measured decode is 2.40× the bandwidth ceiling (> 1.05), "
                           "so it cannot be judged")
    assert "speculative decoding / multi-token prediction" in head
    assert spec_decode.SOURCES_HINT in r.message
    assert "vllm:spec_decode_num_accepted_tokens_total" in r.message and "timings.draft_n" in r.message
    assert "min_decode_efficiency to null" not in r.message  # a config error never reads the floor
    assert "tokens_per_step" not in r.as_properties()


def test_a_configuration_error_says_multi_token_chunks_are_no_evidence():
    s = spec(3.0, 0.8)
    hint = "21 of 105 stream chunks carried more than one token: not evidence"
    r = evaluate_roofline(H100, LLAMA, context=CTX, tpot_p50_ms=tpot_ms(s), hints=(hint,))
    assert r.status == "config_error" and f"  - {hint}" in r.message.splitlines()


def test_steps_above_the_ceiling_are_a_configuration_error_pointing_at_an_under_count():
    r = judge(spec(3.0, 1.2))
    assert r.status == "config_error" and r.steps.step_efficiency == pytest.approx(1.2)
    assert r.message.startswith("roofline configuration error: engine steps run at 1.20× the bandwidth ceiling")
    # counting the drafter could only raise the figure: the check names an under-counted tokens per step
    assert "tokens per step 3.00 from vLLM /metrics counters: an under-count" in r.message
    assert "drafter: not counted" in r.message


def test_a_draft_models_weights_and_kv_are_read_per_drafted_token():
    s = spec(3.0, 0.5)  # 3 drafted tokens per step from the counters
    draft = catalog.model("llama-3.2-1b").model_bytes()
    r = judge(s, Drafter("model", model=draft, spec_tokens=5, source="Llama-3.2-1B"))
    per_token = draft.weight_bytes + draft.kv_bytes_per_token * CTX
    expect = 16.06e9 + 131072 * CTX + 3 * per_token  # the counters' k (3), not spec_tokens (5)
    assert r.steps.drafted_per_step == pytest.approx(3.0) and r.steps.draft_bytes == pytest.approx(3 * per_token)
    assert r.steps.step_bytes == pytest.approx(expect)
    assert r.steps.step_efficiency == pytest.approx(r.steps.steps_per_s * expect / 3350e9)
    assert r.steps.step_efficiency == pytest.approx(0.5 * expect / (16.06e9 + 131072 * CTX))  # > 0.5: more bytes
    assert "3 drafted tokens per step × draft model 2.48 GB weights + 3.1 MB KV @ 96 ctx" in r.steps.draft


def test_spec_tokens_give_k_when_the_counters_do_not_count_drafted_tokens():
    s = spec(2.0, 0.7, drafted_per_step=None)
    heads = Drafter("heads", head_bytes=1.3e9, spec_tokens=2, source="roofline.draft.head_bytes")
    r = judge(s, heads)
    assert r.steps.drafted_per_step == 2.0 and r.steps.k_source == "roofline.draft.spec_tokens"
    assert r.steps.draft_bytes == pytest.approx(2 * 1.3e9)
    assert "(roofline.draft.spec_tokens)" in r.message
    unknown = judge(s, Drafter("heads", head_bytes=1.3e9))  # neither: the drafter cannot be counted
    assert unknown.steps.draft_bytes is None and "set roofline.draft.spec_tokens" in unknown.steps.draft
    assert unknown.steps.step_efficiency == pytest.approx(0.7)


def test_ngram_reads_nothing_and_is_counted_as_such():
    r = judge(spec(1.5, 0.9), NGRAM)
    assert r.steps.draft_bytes == 0.0 and r.steps.draft_counted and r.steps.step_efficiency == pytest.approx(0.9)
    assert "+ drafter 0 B (n-gram)" in r.message and r.status == "pass"


def test_an_moe_step_reads_the_experts_of_every_verified_position():
    mixtral = catalog.model("mixtral-8x7b").model_bytes()
    r = judge(spec(3.0, 0.5), model=mixtral)
    assert r.steps.target_weight_bytes == pytest.approx(mixtral.weight_bytes_at_batch(4))  # 1 x (3 + 1)
    assert r.steps.target_weight_bytes > mixtral.weight_bytes * 1.5


@pytest.mark.parametrize("field, value, text", [
    ("decode_ms", None, "decode totals are empty"),
    ("decode_tokens", 0, "decode totals are empty"),
    ("tokens_per_step", 0.5, "tokens per step must be a number >= 1"),
])
def test_empty_or_impossible_totals_are_errors_not_a_silent_default(field, value, text):
    from dataclasses import replace

    s = replace(spec(3.0, 0.8), **{field: value})
    with pytest.raises(ConfigError, match=text):
        step_figures(bandwidth_bytes_s=3350e9, model=LLAMA, kv_bytes=131072 * CTX, batch=1, context=CTX,
                     spec=s, drafter=None)


def test_the_sglang_windowed_estimate_is_judged_and_named():
    acc = spec_decode.from_sglang([{spec_decode.SGLANG_ACCEPT_LENGTH: 2.5, spec_decode.SGLANG_ACCEPT_RATE: 0.5}],
                                  DECODED)
    steps = DECODED / 2.5
    s = SpecDecodeInfo(**spec_decode.as_part(acc, steps / (0.75 * CEILING) * 1000.0))
    r = judge(s)
    assert r.steps.step_efficiency == pytest.approx(0.75) and r.status == "pass"
    head = r.message.splitlines()[0]
    assert head.endswith("(run totals; tokens per step from SGLang /metrics gauges (the server's windowed estimate))")


def test_counters_that_drafted_nothing_leave_decode_judged_per_token():
    """llama.cpp exports its spec-decode counters as zeros without a draft model: not speculation."""
    names = spec_decode.LLAMACPP_COUNTERS
    zeros = {n: 0.0 for n in names.values()}
    acc = spec_decode.from_counters(zeros, zeros, DECODED, names, spec_decode.SOURCE_LLAMACPP_COUNTERS)
    idle = SpecDecodeInfo(**spec_decode.as_part(acc, 1000.0))
    assert idle.tokens_per_step == 1.0 and not speculates(idle)
    ngram = spec(1.0, 0.8, drafted_per_step=0.5)  # drafted, nothing accepted (the vLLM n-gram recording)
    assert ngram.tokens_per_step == 1.0 and speculates(ngram) and speculates(spec(3.0, 0.8))
    assert not speculates(SpecDecodeInfo())


def test_the_recorded_vllm_draft_model_run_judged_per_step():
    """vLLM 0.32 CPU, its target as its own draft model (tests/unit/recordings): 47 decode tokens,
    20 accepted, 84 drafted; k = 84 ÷ 27 steps from the counters, the draft model's bytes per token."""
    from tests.unit.core.measure.test_spec_decode import counters, replay_stream

    rec = replay_stream("vllm-specdec-draft-model-completions-stream-continuous-usage.jsonl")
    before, after = counters("vllm-specdec-draft-model")
    acc = spec_decode.acceptance([rec], before, after)
    s = SpecDecodeInfo(**spec_decode.as_part(acc, spec_decode.decode_time_ms([rec])))
    cpu = Hardware(key="local-cpu", name="local CPU", mem_bandwidth_gb_s=20.0, source="probe")
    tiny = ModelBytes(weight_bytes=4.2e6, kv_bytes_per_token=2 * 2 * 4 * 16 * 4, name="tiny", source="config.json")
    ctx = 61 + 48 / 2
    r = evaluate_roofline(cpu, tiny, context=ctx, tpot_p50_ms=s.decode_ms / 47, min_efficiency=0.001, spec=s,
                          drafter=Drafter("model", model=tiny, source="the target itself"))
    per_token = tiny.weight_bytes + tiny.kv_bytes_per_token * ctx
    assert r.steps.tokens_per_step == pytest.approx(47 / 27) and r.steps.drafted_per_step == pytest.approx(84 / 27)
    assert r.steps.step_bytes == pytest.approx(per_token * (1 + 84 / 27))
    steps_s = 27 / (s.decode_ms / 1000.0)
    assert r.steps.steps_per_s == pytest.approx(steps_s)
    assert r.steps.step_efficiency == pytest.approx(steps_s * per_token * (1 + 84 / 27) / 20e9)
    assert r.status == "pass" and "(vLLM /metrics counters: drafted ÷ decode steps)" in r.message
