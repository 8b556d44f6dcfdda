"""The pure roofline arithmetic, the gate, and its wording."""
import math
import subprocess
import sys

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.hardware import Hardware, ModelSpec
from pytest_llm_latency.core.roofline.modelbytes import ModelBytes
from pytest_llm_latency.core.roofline.ceiling import decode_ceiling, mean_context, prefill_ceiling_tok_s
from tests.helpers.roofline import evaluate_roofline
from pytest_llm_latency.core.roofline.roofline_text import format_arithmetic

H100 = Hardware(key="h100-sxm", name="H100-SXM", mem_bandwidth_gb_s=3350, peak_bf16_tflops=989,
                source="NVIDIA H100 datasheet")
KV_8B = 2 * 32 * 8 * 128 * 2  # Llama-3-8B fp16 KV bytes per token, written out
LLAMA = ModelBytes(weight_bytes=8.03e9 * 2, kv_bytes_per_token=KV_8B, name="Llama-3.1-8B", params=8.03e9,
                   bytes_per_param=2.0, source="8.03e9 params x 2 B")


def test_single_stream_ceiling_is_bandwidth_over_weights_plus_kv():
    c = decode_ceiling(H100, LLAMA, context=4000)
    expected_step = 16.06e9 + 131072 * 4000
    assert c.step_bytes == pytest.approx(expected_step)
    assert c.per_stream_tok_s == pytest.approx(3350e9 / expected_step)
    assert c.aggregate_tok_s == pytest.approx(c.per_stream_tok_s)


def test_context_zero_is_weights_only_and_more_context_is_slower():
    c0 = decode_ceiling(H100, LLAMA, context=0)
    assert c0.per_stream_tok_s == pytest.approx(3350e9 / 16.06e9)
    assert decode_ceiling(H100, LLAMA, context=32000).per_stream_tok_s < c0.per_stream_tok_s


def test_batch_reads_weights_once_and_kv_once_per_sequence():
    b = 8
    c = decode_ceiling(H100, LLAMA, context=4000, batch=b)
    step = 16.06e9 + b * 131072 * 4000
    assert c.step_bytes == pytest.approx(step)
    assert c.per_stream_tok_s == pytest.approx(3350e9 / step)
    assert c.aggregate_tok_s == pytest.approx(b * 3350e9 / step)
    # batching raises throughput and lowers each stream's ceiling
    single = decode_ceiling(H100, LLAMA, context=4000)
    assert c.aggregate_tok_s > single.aggregate_tok_s and c.per_stream_tok_s < single.per_stream_tok_s


def test_moe_batch_touches_more_experts_but_never_more_than_all():
    # 8 experts of 1 GB each, 2 per token, 2 GB shared: active = 4 GB, total = 10 GB
    moe = ModelBytes(weight_bytes=4e9, kv_bytes_per_token=0.0, routed_weight_bytes=8e9, experts=8,
                     experts_per_token=2)
    assert moe.weight_bytes_at_batch(1) == pytest.approx(4e9)
    assert moe.weight_bytes_at_batch(2) == pytest.approx(2e9 + 8e9 * (1 - 0.75 ** 2))
    assert 4e9 < moe.weight_bytes_at_batch(4) < moe.weight_bytes_at_batch(64) <= 10e9 + 1
    assert decode_ceiling(H100, moe, batch=4).weight_bytes == pytest.approx(moe.weight_bytes_at_batch(4))


def test_tensor_parallel_multiplies_bandwidth():
    tp2 = H100.tensor_parallel(2)
    assert tp2.mem_bandwidth_gb_s == 6700 and tp2.devices == 2 and tp2.peak_bf16_tflops == 1978
    assert decode_ceiling(tp2, LLAMA).per_stream_tok_s == pytest.approx(
        2 * decode_ceiling(H100, LLAMA).per_stream_tok_s)
    assert H100.tensor_parallel(1) is H100
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="tensor-parallel"):
            H100.tensor_parallel(bad)


def test_mean_context_is_prompt_plus_half_output():
    assert mean_context(3000, 2000) == 4000
    with pytest.raises(ConfigError, match="output_tokens"):
        mean_context(100, -1)


def test_model_spec_is_accepted_like_model_bytes():
    spec = ModelSpec(name="m", params=8.03e9, weight_bytes_per_param=2.0, layers=32, kv_heads=8, head_dim=128)
    assert decode_ceiling(H100, spec, 4000).step_bytes == pytest.approx(decode_ceiling(H100, LLAMA, 4000).step_bytes)


@pytest.mark.parametrize("kwargs, match", [
    ({"context": -1}, "context"),
    ({"context": float("nan")}, "context"),
    ({"context": 10, "batch": 0}, "batch"),
    ({"context": 10, "batch": 2.0}, "batch"),
])
def test_bad_workload_is_a_config_error(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        decode_ceiling(H100, LLAMA, **kwargs)


def test_unknown_kv_with_context_is_a_config_error_naming_the_fix():
    no_kv = ModelBytes(weight_bytes=16e9, kv_bytes_per_token=None, name="x")
    assert decode_ceiling(H100, no_kv, 0).per_stream_tok_s == pytest.approx(3350 / 16)
    with pytest.raises(ConfigError, match="kv_heads"):
        decode_ceiling(H100, no_kv, 100)


def test_prefill_ceiling_is_flops_over_two_per_param():
    assert prefill_ceiling_tok_s(H100, 8e9) == pytest.approx(989e12 / 16e9)
    assert prefill_ceiling_tok_s(Hardware(key="t4", name="T4", mem_bandwidth_gb_s=320), 8e9) is None


# ---------------------------------------------------------------------------- the gate

def _ceiling_4000():
    return decode_ceiling(H100, LLAMA, 4000).per_stream_tok_s


def test_efficiency_is_measured_over_ceiling_at_p50_and_p95():
    r = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=10.0, tpot_p95_ms=20.0, min_efficiency=0.3)
    assert r.measured_tok_s == pytest.approx(100.0)
    assert r.decode_efficiency == pytest.approx(100.0 / _ceiling_4000())
    assert r.decode_efficiency_p95 == pytest.approx(50.0 / _ceiling_4000())
    assert r.status == "pass"


def test_below_budget_fails_with_arithmetic_and_checks():
    tpot = 1000.0 / 61.0
    r = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=tpot, min_efficiency=0.5)
    assert r.status == "fail"
    eff = 61.0 / _ceiling_4000()
    lines = r.message.splitlines()
    assert lines[0] == f"decode 61.0 tok/s = {eff:.2f} of ceiling {_ceiling_4000():.1f} tok/s"
    assert lines[1] == "  (H100-SXM 3350 GB/s ÷ (16.06 GB weights + 524.3 MB KV @ 4000 ctx)); budget ≥ 0.50"
    text = r.message.lower()
    for topic in ("quantization", "kv cache", "batching", "interleaved prefill", "max-num-batched-tokens",
                  "fixed cost per step", "bandwidth below the datasheet", "hardware: local-gpu", "3350 gb/s"):
        assert topic in text, topic


def test_exactly_at_budget_passes_just_below_fails():
    ceiling = _ceiling_4000()
    at = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=1000 / (0.5 * ceiling), min_efficiency=0.5)
    below = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=1000 / (0.499 * ceiling), min_efficiency=0.5)
    assert at.status == "pass" and below.status == "fail"


def test_above_105_percent_of_ceiling_is_config_error_never_pass():
    ceiling = _ceiling_4000()
    ok = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=1000 / (1.04 * ceiling), min_efficiency=0.5)
    assert ok.status == "pass"
    for budget in (0.5, None):
        r = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=1000 / (1.2 * ceiling), min_efficiency=budget)
        assert r.status == "config_error"
        assert "configuration error" in r.message and "hardware" in r.message and "model bytes" in r.message
        assert "speculative" in r.message


def test_no_budget_reports_only():
    r = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=100.0, min_efficiency=None)
    assert r.status == "report"
    assert "report only" in r.message and "check:" not in r.message


def test_batch_gate_compares_per_stream_tpot_with_per_stream_ceiling():
    r = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=20.0, min_efficiency=0.1, batch=8)
    per_stream = 3350e9 / (16.06e9 + 8 * 131072 * 4000)
    assert r.ceiling_tok_s == pytest.approx(per_stream)
    assert r.decode_efficiency == pytest.approx(50.0 / per_stream)
    assert "8 × 524.3 MB KV @ 4000 ctx" in r.message


@pytest.mark.parametrize("kwargs, match", [
    ({"tpot_p50_ms": 0.0}, "TPOT p50"),
    ({"tpot_p50_ms": float("nan")}, "TPOT p50"),
    ({"tpot_p50_ms": 10.0, "tpot_p95_ms": -1.0}, "TPOT p95"),
    ({"tpot_p50_ms": 10.0, "min_efficiency": 0.0}, "min_decode_efficiency"),
    ({"tpot_p50_ms": 10.0, "min_efficiency": 1.5}, "min_decode_efficiency"),
])
def test_bad_gate_inputs_raise_config_error(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        evaluate_roofline(H100, LLAMA, context=4000, **kwargs)


def test_as_properties_is_flat_with_the_documented_keys():
    r = evaluate_roofline(H100, LLAMA, context=4000, tpot_p50_ms=10.0, tpot_p95_ms=12.5, min_efficiency=0.3)
    props = r.as_properties()
    assert set(props) == {"ceiling_tok_s", "decode_efficiency", "decode_efficiency_p95", "hardware", "model_bytes",
                          "kv_cache"}
    assert props["kv_cache"] == "counted"
    assert props["hardware"] == "H100-SXM"
    assert props["model_bytes"] == pytest.approx(16.06e9 + 131072 * 4000)
    assert props["ceiling_tok_s"] == pytest.approx(_ceiling_4000())
    assert props["decode_efficiency_p95"] == pytest.approx(80.0 / _ceiling_4000())
    assert all(isinstance(v, (str, float)) for v in props.values())
    assert evaluate_roofline(H100, LLAMA, context=0, tpot_p50_ms=10.0).as_properties()["decode_efficiency_p95"] is None


def test_arithmetic_line_without_kv_says_so():
    no_kv = ModelBytes(weight_bytes=16e9, kv_bytes_per_token=None)
    assert format_arithmetic(decode_ceiling(H100, no_kv)) == "H100-SXM 3350 GB/s ÷ (16.00 GB weights, KV not counted)"


def test_message_numbers_are_consistent_with_result():
    r = evaluate_roofline(H100, LLAMA, context=1234, tpot_p50_ms=17.0, min_efficiency=0.9)
    first = r.message.splitlines()[0]
    assert f"{1000 / 17.0:.1f} tok/s" in first and f"{r.ceiling_tok_s:.1f} tok/s" in first
    assert math.isclose(float(first.split(" = ")[1].split()[0]), r.decode_efficiency, abs_tol=0.005)


def test_core_import_pulls_no_pytest_httpx_yaml_or_numpy():
    code = ("import sys; import pytest_llm_latency.core.roofline.ceiling, pytest_llm_latency.core.roofline.modelbytes, "
            "pytest_llm_latency.core.roofline.hardware; "
            "bad = [m for m in ('pytest', 'httpx', 'yaml', 'numpy') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
