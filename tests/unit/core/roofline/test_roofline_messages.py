"""The roofline message says what it counted: readable sizes, the KV cache left out, and when the
engine's per-step overhead, not bandwidth, sets the pace (tiny models)."""
import pytest

from pytest_llm_latency.core.roofline.hardware import Hardware
from pytest_llm_latency.core.roofline.modelbytes import ModelBytes, format_bytes
from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
from tests.helpers.roofline import evaluate_roofline
from pytest_llm_latency.core.roofline.roofline_text import format_ceiling

CPU = Hardware(key="local-cpu", name="local CPU (ci)", mem_bandwidth_gb_s=30.0, source="numpy read probe")
H100 = Hardware(key="h100-sxm", name="H100-SXM", mem_bandwidth_gb_s=3350, source="NVIDIA H100 datasheet")
# the real-server tier's tiny GGUF: 2.4 MB of weights, 2 x 2 layers x 2 KV heads x 64 x f16 per token
TINY = ModelBytes(weight_bytes=2.4e6, kv_bytes_per_token=2 * 2 * 2 * 64 * 2, name="tiny", params=0.6e6,
                  bytes_per_param=4.0, source="tiny.gguf")
LLAMA = ModelBytes(weight_bytes=16.06e9, kv_bytes_per_token=131072, name="Llama-3.1-8B", params=8.03e9,
                   bytes_per_param=2.0)
KV_REASON = ("llama.cpp /v1/models meta gives weights only; set roofline.layers/kv_heads/head_dim "
             "or roofline.gguf to include it")


@pytest.mark.parametrize("nbytes, text", [
    (16.06e9, "16.06 GB"), (1e9, "1.00 GB"), (999.9e6, "999.9 MB"), (96 * 131072, "12.6 MB"),
    (2.4e6, "2.4 MB"), (98_304, "98.3 KB"), (1536, "1.5 KB"), (512, "512 B"), (0, "0 B"),
])
def test_sizes_print_in_readable_units(nbytes, text):
    assert format_bytes(nbytes) == text


def test_a_tiny_model_shows_its_sizes_not_zeros():
    r = evaluate_roofline(CPU, TINY, context=96, tpot_p50_ms=7.0)
    assert "(local CPU (ci) 30.0 GB/s ÷ (2.4 MB weights + 98.3 KB KV @ 96 ctx)); report only" in r.message
    assert "0.00 GB" not in r.message


def test_per_step_overhead_is_named_when_it_bounds_a_tiny_model():
    # 2.5 MB read in 0.08 ms against a 7 ms TPOT (vLLM CPU's per-step cost): efficiency ~0.01
    r = evaluate_roofline(CPU, TINY, context=96, tpot_p50_ms=7.0, min_efficiency=0.5)
    assert r.status == "fail" and r.overhead_bound and r.decode_efficiency < 0.02
    checks = r.message.split("check:\n", 1)[1].splitlines()
    assert checks[0].startswith("  - per-step overhead: reading 2.5 MB per step takes 0.0833 ms at 30.0 GB/s, "
                                "1% of the measured TPOT p50 7 ms")
    assert "(scheduling, kernel launches, sampling) bounds this model, not memory bandwidth" in checks[0]
    assert "the roofline gate is not meaningful for models this small" in checks[0]
    report = evaluate_roofline(CPU, TINY, context=96, tpot_p50_ms=7.0)  # no budget: said as a note
    assert report.status == "report" and "\n  note: per-step overhead: " in report.message


@pytest.mark.parametrize("hw, model, tpot_ms", [
    (H100, LLAMA, 48.0),   # a big model at efficiency 0.1: slow, but reading it takes 4.8 ms, not overhead
    (CPU, TINY, 0.2),      # a tiny model near its ceiling: bandwidth time is 40% of TPOT
])
def test_no_overhead_line_when_bandwidth_time_matters(hw, model, tpot_ms):
    r = evaluate_roofline(hw, model, context=96, tpot_p50_ms=tpot_ms, min_efficiency=0.9)
    assert r.status == "fail" and not r.overhead_bound and "per-step overhead" not in r.message


def test_kv_cache_not_counted_is_said_in_the_message_the_checks_and_the_properties():
    weights_only = ModelBytes(weight_bytes=406e6, kv_bytes_per_token=0.0, name="membound",
                              source="http://x /v1/models meta: size 406.0 MB", kv_not_counted=KV_REASON)
    r = evaluate_roofline(CPU, weights_only, context=96, tpot_p50_ms=100.0, min_efficiency=0.5)
    lines = r.message.splitlines()
    assert lines[1] == "  (local CPU (ci) 30.0 GB/s ÷ (406.0 MB weights, KV cache not counted)); budget ≥ 0.50"
    assert f"  KV cache not counted: {KV_REASON}" in lines
    assert "the KV cache is not counted in this ceiling, so it is higher than the real one" in r.message
    assert r.as_properties()["kv_cache"] == f"not counted: {KV_REASON}"
    assert evaluate_roofline(CPU, TINY, context=96, tpot_p50_ms=7.0).as_properties()["kv_cache"] == "counted"
    assert f"KV cache not counted: {KV_REASON}" in format_ceiling(decode_ceiling(CPU, weights_only, 96))
