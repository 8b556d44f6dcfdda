"""Issue 37: a disaggregated target's KV transfer from its pools' histograms (vLLM seconds and bytes,
SGLang ms and MB), the floor's arithmetic, the TTFT split, and the ``kv_transfer_<stat>`` budgets'
check (pass, fail naming the link and the floor, error when nothing was reported)."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.checks import evaluate, judge
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.measure import kv_transfer as kt
from pytest_llm_latency.core.measure.server_model import Histogram, Sample, bucket_bounds
from pytest_llm_latency.core.roofline.kv_layout import KVLayout, LayerKV
from pytest_llm_latency.core.roofline.kv_transfer import custom_link, kv_cache_bytes, parse_gb_s, transfer_floor
from pytest_llm_latency.core.roofline.modelbytes import ModelBytes
from pytest_llm_latency.core.result.sample_size import check_min_samples
from pytest_llm_latency.core.spec.budgets import parse_budget
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.roofline import catalog
from tests.helpers.records import record


def hist(bounds, counts, total):
    """A cumulative histogram from per-bucket counts (the last bound may be inf)."""
    cum, run = {}, 0.0
    for le, c in zip(bounds, counts):
        run += c
        cum[float(le)] = run
    return Histogram(cum, total, run)


def pair(name, h, *, gauges=None, counters=None, extra=None):
    """(before, after) scrapes of one pool: nothing before, ``h`` after."""
    after = Sample(gauges=dict(gauges or {}), counters=dict(counters or {}), histograms={name: h, **(extra or {})})
    return Sample(), after


# -- the floor -----------------------------------------------------------------------------------

def test_llama_8b_fp16_16k_tokens_is_2_1_gb_and_84_ms_at_25_gb_s():
    model = catalog.model("llama-3.1-8b")
    assert model.kv_bytes_per_token == 131072
    f = transfer_floor(model, 16000, custom_link(25))
    assert f.bytes == 131072 * 16000 == 2_097_152_000
    assert f.floor_ms == pytest.approx(83.886, abs=1e-3)
    assert f.bytes_per_token == 131072
    assert f.fraction(180.0) == pytest.approx(83.886 / 180.0, abs=1e-4)
    assert f.arithmetic() == "131,072 B/token × 16,000 tokens = 2.10 GB ÷ 25 GB/s (25 GB/s link) = 83.9 ms"


def test_a_catalog_link_names_its_figure_and_source():
    ndr = catalog.resolve_link("ib-ndr", "kv_link")
    assert (ndr.gb_s, ndr.name) == (50, "InfiniBand NDR 400G")
    assert "400 Gb/s" in ndr.source
    assert catalog.resolve_link("NVLink 4", "x").gb_s == 450
    assert catalog.resolve_link("pcie-5-x16", "x").gb_s == 63
    assert all(link.source for link in catalog.all_links().values())


def test_sliding_window_and_state_layers_ship_what_the_cache_holds():
    layout = KVLayout((LayerKV("full", 2, 1000.0), LayerKV("sliding", 4, 500.0, window=128),
                       LayerKV("state", 3, state_bytes=1e6)))
    mb = ModelBytes(weight_bytes=1e9, kv_bytes_per_token=2000.0, kv_layout=layout)
    # full: 2 x 1000 x 10 000; sliding: 4 x 500 x 128 (the window); state: 3 x 1e6 once (not read + written)
    assert kv_cache_bytes(mb, 10_000) == 2 * 1000 * 10_000 + 4 * 500 * 128 + 3 * 1e6
    assert "windowed" in transfer_floor(mb, 10_000, custom_link(10)).layout


def test_unknown_kv_shape_is_an_error_not_a_zero_floor():
    with pytest.raises(ConfigError, match="KV shape is unknown"):
        kv_cache_bytes(ModelBytes(weight_bytes=1e9, kv_bytes_per_token=None), 100)


@pytest.mark.parametrize("bad", [-25, 0, "-3", "nan", float("inf"), True])
def test_a_link_bandwidth_must_be_positive(bad):
    with pytest.raises(ConfigError, match="kv_link"):
        parse_gb_s(bad, "kv_link")


def test_an_unknown_link_key_says_did_you_mean():
    with pytest.raises(ConfigError, match=r"kv_link: unknown link 'ib-ndx'; did you mean ib-ndr"):
        catalog.resolve_link("ib-ndx", "kv_link")
    assert catalog.resolve_link("25GB/s", "kv_link").gb_s == 25


# -- the transfer statistics ---------------------------------------------------------------------

VLLM_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0, float("inf"))


def test_vllm_seconds_histogram_percentiles_in_ms_with_their_bucket():
    # 20 transfers: 10 in (0.05, 0.075], 10 in (0.1, 0.2]; sum 2.4 s
    h = hist(VLLM_BOUNDS, [0, 0, 0, 0, 10, 0, 10, 0, 0, 0, 0, 0, 0], 2.4)
    by = hist((1e6, 1e9, float("inf")), [0, 20, 0], 20 * 4e8)
    st = kt.transfer_stats({"decode": pair("vllm:nixl_xfer_time_seconds", h,
                                           extra={"vllm:nixl_bytes_transferred": by}),
                            "prefill": (Sample(), Sample())})
    assert (st.name, st.pool, st.transfers) == ("vllm:nixl_xfer_time_seconds", "decode", 20)
    assert st.ms["mean"] == pytest.approx(120.0)
    assert st.ms["p50"] == pytest.approx(75.0)             # rank 10: the top of the 50-75 ms bucket
    assert st.ms["p95"] == pytest.approx(100 + 100 * 9 / 10)  # rank 19 in the 100-200 ms bucket
    assert st.buckets["p95"] == "interpolated in the 100-200 ms bucket"
    assert st.bytes_mean == pytest.approx(4e8)
    assert st.gb_s == pytest.approx(20 * 4e8 / 2.4 / 1e9)   # Σ bytes ÷ Σ time


def test_sglang_ms_histogram_and_mb_sizes_on_the_prefill_pool():
    h = hist((1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, float("inf")),
             [0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0], 300.0)
    size = hist((1, 5, 10, 50, 100, 500, float("inf")), [0, 0, 0, 0, 4, 0, 0], 4 * 64.0)
    st = kt.transfer_stats({"prefill": pair("sglang:kv_transfer_latency_ms", h,
                                            extra={"sglang:kv_transfer_total_mb": size}),
                            "decode": (Sample(), Sample())})
    assert (st.name, st.pool) == ("sglang:kv_transfer_latency_ms", "prefill")
    assert st.ms["mean"] == pytest.approx(75.0)   # already ms: scale 1
    assert 50 < st.ms["p50"] <= 100
    assert st.bytes_mean == pytest.approx(64 * 2 ** 20)


def test_only_this_runs_transfers_count_and_a_gauge_is_named_not_judged():
    h = hist(VLLM_BOUNDS, [0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0.2)
    same = Sample(histograms={"vllm:nixl_xfer_time_seconds": h})
    assert kt.transfer_stats({"decode": (same, same)}) is None   # no delta: nothing in this run
    old = Sample(gauges={"sglang:kv_transfer_latency_ms": 42.0})
    assert kt.transfer_stats({"prefill": (old, old)}) is None
    assert "a gauge on the prefill pool" in kt.gauge_only({"prefill": (old, old)})


def test_bucket_bounds_of_the_inf_bucket_say_lower_bound():
    h = hist((0.1, float("inf")), [1, 9], 10.0)
    assert bucket_bounds(h, 0.95) == (0.1, float("inf"))
    ms, buckets = kt.histogram_ms(h, 1000.0)
    assert ms["p95"] == pytest.approx(100.0) and "a lower bound" in buckets["p95"]


def test_the_ttft_split_names_every_part_and_the_remainder():
    def secs(name, mean_s, n=10):
        return {name: Histogram({1.0: n, float("inf"): n}, mean_s * n, n)}
    prefill = Sample(histograms={**secs("vllm:request_queue_time_seconds", 0.010),
                                 **secs("vllm:request_prefill_time_seconds", 0.200)})
    decode = Sample(histograms={**secs("vllm:request_queue_time_seconds", 0.005),
                                **secs("vllm:request_prefill_time_seconds", 0.020),
                                "vllm:nixl_xfer_time_seconds": hist(VLLM_BOUNDS, [0, 0, 0, 0, 0, 10] + [0] * 7, 0.9)})
    scrapes = {"prefill": (Sample(), prefill), "decode": (Sample(), decode)}
    st = kt.transfer_stats(scrapes)
    split = kt.ttft_split(scrapes, st, client_ttft_mean_ms=340.0)
    parts = {p.part: p for p in split.parts}
    assert parts["queue"].ms == pytest.approx(15.0)
    assert "prefill pool" in parts["queue"].source and "decode pool" in parts["queue"].source
    assert parts["prefill"].ms == pytest.approx(200.0)
    assert parts["kv_transfer"].ms == pytest.approx(90.0)
    assert parts["first_decode_step"].ms == pytest.approx(20.0)
    assert parts["remainder"].ms == pytest.approx(340 - 15 - 200 - 90 - 20)
    assert not split.missing
    fields = kt.as_part(st, split)
    assert [p["part"] for p in fields["ttft_split"]] == ["queue", "prefill", "kv_transfer", "first_decode_step",
                                                         "remainder"]


def test_a_part_no_pool_reports_is_named_in_the_remainder():
    split = kt.ttft_split({"prefill": (Sample(), Sample()), "decode": (Sample(), Sample())}, None, 100.0)
    assert split.parts == [] and set(split.missing) == {"queue", "prefill", "kv_transfer", "first_decode_step"}


# -- the budgets and the check -------------------------------------------------------------------

def test_kv_transfer_budgets_are_ms_ceilings_kept_out_of_the_samples():
    b = parse_budget("kv_transfer_p95", "150ms", "slo.kv_transfer_p95")
    assert (b.metric, b.stat, b.limit, b.unit, b.is_kv_transfer) == ("kv_transfer", "p95", 150.0, "ms", True)
    with pytest.raises(ConfigError, match="percentile p101 is not computed"):
        parse_budget("kv_transfer_p101", 1, "slo")
    with pytest.raises(ConfigError, match="positive duration"):
        parse_budget("kv_transfer_p95", -5, "slo")
    # a p99 on 5 samples is not refused: the pools' histograms, not the samples, are judged
    for conf in (0.95, None):
        w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": 5,
                                "confidence": conf, "slo": {"kv_transfer_p99": 100}})
        check_min_samples(w, "w")
        assert w.budget_map()["kv_transfer_p99"].is_kv_transfer
    with pytest.raises(ConfigError, match="ttft_p99"):  # while a sample budget is refused
        check_min_samples(make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4,
                                              "samples": 5, "confidence": None, "slo": {"ttft_p99": 100}}), "w")


def wl(slo):
    return make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": 5,
                               "confidence": None, "slo": slo})


def disagg_result(slo, **fields):
    res = evaluate(wl(slo), [record(100) for _ in range(5)], [])
    res.disagg.set(prefill_metrics_url="http://p:8100/metrics", decode_metrics_url="http://d:8200/metrics", **fields)
    return judge(res)


MEASURED = dict(transfer_source="vllm:nixl_xfer_time_seconds on the decode pool", transfers=20.0,
                kv_transfer_ms_mean=150.0, kv_transfer_ms_p95=180.0,
                kv_transfer_buckets={"p95": "interpolated in the 100-200 ms bucket"})
FLOOR = dict(kv_bytes=2_097_152_000.0, floor_ms=83.886, link_name="InfiniBand HDR 200G", link_gb_s=25.0)


def test_a_transfer_over_its_budget_fails_naming_the_link_and_the_floor():
    res = disagg_result({"kv_transfer_p95": 100}, **MEASURED, **FLOOR)
    assert res.verdict == "fail"
    text = res.failed_checks[0]
    assert text.startswith("KV transfer p95 180.0 ms for 2.10 GB = 0.47 of the 25 GB/s link "
                           "(InfiniBand HDR 200G; floor 83.9 ms) > budget 100 ms")
    assert "100-200 ms bucket" in text and "vllm:nixl_xfer_time_seconds" in text


def test_a_transfer_within_its_budget_passes():
    assert disagg_result({"kv_transfer_p95": 200, "kv_transfer_mean": 160}, **MEASURED, **FLOOR).verdict == "pass"


def test_no_transfer_reported_is_an_error_naming_the_urls_and_the_names():
    res = disagg_result({"kv_transfer_p95": 100}, transfer_note="no answer from the decode pool")
    assert res.verdict == "error"
    text = res.errors[0]
    assert "http://p:8100/metrics or http://d:8200/metrics" in text
    assert "vllm:nixl_xfer_time_seconds, sglang:kv_transfer_latency_ms" in text
    assert "no answer from the decode pool" in text


def test_a_budget_on_a_target_that_is_not_disaggregated_is_an_error():
    res = judge(evaluate(wl({"kv_transfer_p95": 100}), [record(100) for _ in range(5)], []))
    assert res.verdict == "error" and "not disaggregated" in res.errors[0]


def test_without_a_link_the_message_says_so():
    res = disagg_result({"kv_transfer_p95": 100}, **MEASURED)
    assert "(no link given: set kv_link for the floor)" in res.failed_checks[0]


def test_prompts_of_different_lengths_judge_a_percentile_against_that_percentiles_prompt():
    """A mix of 512- and 16,000-token prompts: its mean prompt (2,061 tokens, 270 MB) bounds the mean transfer;
    its p95 transfer is a 16,000-token prompt's (2.10 GB), whose floor the p95's message names."""
    mean = dict(kv_bytes=270_139_392.0, floor_ms=10.8056, link_name="InfiniBand HDR 200G", link_gb_s=25.0)
    by = {"p95": {"prompt_tokens": 16000.0, "kv_bytes": 2_097_152_000.0, "floor_ms": 83.8861},
          "p50": {"prompt_tokens": 512.0, "kv_bytes": 67_108_864.0, "floor_ms": 2.6844}}
    measured = {**MEASURED, "kv_transfer_ms_p95": 89.1, "kv_transfer_ms_mean": 19.2}
    res = disagg_result({"kv_transfer_p95": 50, "kv_transfer_mean": 15}, **measured, **mean, floor_by_stat=by)
    mean_text, p95 = sorted(res.failed_checks)
    assert p95.startswith("KV transfer p95 89.1 ms for 2.10 GB = 0.94 of the 25 GB/s link (InfiniBand HDR 200G; "
                          "floor 83.9 ms) > budget 50 ms")
    assert mean_text.startswith("KV transfer mean 19.2 ms for 270.1 MB = 0.56 of the 25 GB/s link")  # the mean's
    assert res.disagg.floor_at("max") == (mean["kv_bytes"], mean["floor_ms"])  # no such row: the mean prompt's
    res.disagg.floor_by_stat = {"p95": {"kv_bytes": "2 GB"}}  # a malformed row is not read
    assert res.disagg.floor_at("p95") == (mean["kv_bytes"], mean["floor_ms"])
