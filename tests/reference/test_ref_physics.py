"""The pure timing model: formulas checked against hand-computed catalog numbers (no sockets, no sleeps)."""
from __future__ import annotations

import math

import pytest

from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.targets.reference import physics as ph

H100 = catalog.hardware("h100-sxm")
L8B = catalog.model("llama-3.1-8b")
BW = 3350e9
PEAK = 989e12
WB = 8.03e9 * 2
KV = 2 * 32 * 8 * 128 * 2      # 131072 B/token


def phys(dec=1.0, pre=1.0, **kw) -> ph.Physics:
    return ph.Physics.from_specs(H100, L8B, decode_efficiency=dec, prefill_efficiency=pre, **kw)


def test_catalog_constants_are_what_the_tests_assume():
    p = phys()
    assert p.bandwidth == pytest.approx(BW)
    assert p.peak_flops == pytest.approx(PEAK)
    assert p.weight_bytes == pytest.approx(WB)
    assert p.kv_bytes_per_token == KV


def test_single_stream_decode_is_bandwidth_over_bytes_read():
    for dec, expected in ((1.0, 208.6), (0.8, 166.9)):
        p = phys(dec=dec)
        for c in (0, 100, 8000):
            tok_s = p.single_stream_tok_s(c)
            assert tok_s == pytest.approx(BW * dec / (WB + KV * c), rel=1e-9)
        assert p.single_stream_tok_s(0) == pytest.approx(expected, abs=0.1)


def test_context_growth_slows_decode_by_the_kv_read_ratio():
    p = phys()
    ratio = p.decode_step_seconds([8000]) / p.decode_step_seconds([100])
    assert ratio == pytest.approx((WB + KV * 8000) / (WB + KV * 100), rel=1e-9)
    assert 1.06 < ratio < 1.07


def test_hidden_size_estimate_and_override():
    assert ph.hidden_size(L8B) == round(math.sqrt(8.03e9 / (12 * 32)))
    import dataclasses
    spec = dataclasses.replace(L8B, extra={"hidden_size": 4096})
    assert ph.hidden_size(spec) == 4096


def test_prefill_is_linear_plus_quadratic_attention_and_compute_bound():
    p = phys(pre=0.5)
    h = ph.hidden_size(L8B)
    for n in (1000, 2000, 8000):
        flops = 2 * 8.03e9 * n + 4 * 32 * h * n * (n + 1) / 2
        cost = p.step(prefill_chunks=[(n, 0)])
        assert cost.flops == pytest.approx(flops, rel=1e-12)
        assert cost.bound == "compute"
        assert p.prefill_seconds(n) == pytest.approx(flops / (PEAK * 0.5), rel=1e-12)
    # doubling the prompt more than doubles the prefill (the attention term)
    assert p.prefill_seconds(2000) > 2 * p.prefill_seconds(1000)
    assert p.prefill_seconds(2000) < 2.1 * p.prefill_seconds(1000)


def test_short_prefill_is_memory_bound_by_the_weight_read():
    p = phys(dec=0.7, pre=0.5)
    assert p.step(prefill_chunks=[(8, 0)]).bound == "memory"
    assert p.prefill_seconds(8) == pytest.approx(WB / (BW * 0.7), rel=1e-9)


def test_cached_prefix_is_skipped_but_attended():
    p = phys(pre=0.5)
    full = p.prefill_seconds(3016)
    cached = p.prefill_seconds(3016, cached_tokens=3000)
    assert cached < full / 10
    # the 16 new tokens attend to the 3000 cached ones: more work than 16 tokens alone
    assert p.step(prefill_chunks=[(16, 3000)]).flops > p.step(prefill_chunks=[(16, 0)]).flops
    # and read their KV
    assert p.step(prefill_chunks=[(16, 3000)]).bytes == pytest.approx(WB + KV * 3000)


def test_batch_shares_one_weight_read():
    p = phys()
    one = p.decode_step_seconds([200])
    b32 = p.decode_step_seconds([200] * 32)
    assert b32 == pytest.approx((WB + 32 * KV * 200) / BW, rel=1e-9)
    # aggregate throughput of 32 sequences ~ 32 x single / (1 + 32 KV c / Wb)
    assert 32 / b32 > 25 / one


def test_large_batch_turns_compute_bound():
    p = phys(dec=1.0, pre=0.5)
    # memory time Wb/B == compute time 2 P b / (F e_c)  ->  b* = F e_c Wb / (2 P B)
    b = round(PEAK * 0.5 * WB / (2 * 8.03e9 * BW))
    small = p.step(decode_contexts=[0] * (b - 2))
    big = p.step(decode_contexts=[0] * (b + 2))  # the crossover is within 2 of b*
    assert small.bound == "memory" and big.bound == "compute"
    assert big.seconds == pytest.approx(big.flops / (PEAK * 0.5))


def test_mixed_step_is_one_roofline():
    p = phys(dec=0.7, pre=0.5)
    mixed = p.step(decode_contexts=[500] * 4, prefill_chunks=[(1000, 0)])
    assert mixed.tokens == 1004
    assert mixed.seconds == pytest.approx(max(mixed.flops / (PEAK * 0.5), mixed.bytes / (BW * 0.7)))
    assert mixed.bytes == pytest.approx(WB + KV * 2000)


def test_empty_step_costs_nothing():
    assert phys().step().seconds == 0.0


def test_kv_pool_from_memory_budget():
    tokens = ph.kv_pool_tokens(H100, L8B, 0.9)
    assert tokens == int((80e9 * 0.9 - WB) // KV)
    assert ph.kv_pool_tokens(catalog.hardware("a10g"), catalog.model("llama-3.1-8b"), 0.5) < 0
    cpu = catalog.hardware("cpu")
    assert ph.kv_pool_tokens(cpu, L8B) is None


def test_missing_peak_flops_falls_back_to_a_ridge():
    cpu = catalog.hardware("cpu")
    if cpu.peak_bf16_tflops:
        pytest.skip("catalog now has a CPU peak")
    p = ph.Physics.from_specs(cpu, L8B)
    assert p.peak_flops == pytest.approx(ph.FALLBACK_RIDGE_FLOP_PER_BYTE * cpu.mem_bandwidth_gb_s * 1e9)
    assert ph.Physics.from_specs(cpu, L8B, peak_tflops=2.0).peak_flops == 2e12


def test_kv_pool_counts_all_experts_of_a_moe_as_resident():
    import dataclasses
    moe = dataclasses.replace(L8B, total_params=4 * L8B.params)     # 64 GB resident, 16 GB read per token
    assert ph.kv_pool_tokens(H100, moe, 0.9) == int((80e9 * 0.9 - 4 * WB) // KV)
    assert phys().single_stream_tok_s(0) == ph.Physics.from_specs(H100, moe, decode_efficiency=1.0,
                                                                  prefill_efficiency=1.0).single_stream_tok_s(0)


def test_moe_step_reads_the_experts_the_batch_touches_like_the_roofline_ceiling():
    from pytest_llm_latency.roofline import catalog
    from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
    from pytest_llm_latency.targets.reference.physics import Physics

    hw, model = catalog.hardware("h200"), catalog.model("mixtral-8x7b")
    ph = Physics.from_specs(hw, model, decode_efficiency=1.0, prefill_efficiency=1.0)
    for batch in (1, 2, 8):
        per_stream = 1.0 / ph.decode_step_seconds([576] * batch)
        ceiling = decode_ceiling(hw, model.model_bytes(), 576, batch).per_stream_tok_s
        assert per_stream == pytest.approx(ceiling, rel=0.02), batch
    assert ph.weights_read(8) > ph.weights_read(1)  # more tokens touch more experts
