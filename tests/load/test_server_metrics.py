"""/metrics from every engine onto one model (core.measure.server_model), parsed with prometheus_client
(client.server.server_view): fixtures recorded from the reference target, real vLLM and llama.cpp
(shared/recordings), plus hand-written text in the formats vLLM (current and older names),
SGLang, llama.cpp and TGI document."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llm_latency.client.server.server_view import parse_sample
from pytest_llm_latency.core.errors import MeasurementError
from pytest_llm_latency.core.measure.server_model import Histogram, Sample, bucket_quantile, timeline, view

FIX = Path(__file__).parent / "fixtures"


def load(name: str) -> Sample:
    return parse_sample((FIX / name).read_text())


def test_vllm_current_and_older_names_parse_into_the_same_model():
    new, old = view(Sample(), load("vllm-current.txt")), view(Sample(), load("vllm-older.txt"))
    assert new == old
    # by hand: queue buckets 0.3:2 0.5:6 0.8:10, count 10, sum 4.6 s
    assert new.queue_ms_p50 == pytest.approx(450.0)     # rank 5 in (0.3, 0.5]: 0.3 + 0.2 x 3/4
    assert new.queue_ms_p95 == pytest.approx(762.5)     # rank 9.5 in (0.5, 0.8]: 0.5 + 0.3 x 3.5/4
    assert new.queue_ms_mean == pytest.approx(460.0)
    assert (new.waiting_max, new.running_max, new.kv_usage_max) == (4.0, 8.0, 0.42)
    assert new.prefix_hit_rate == pytest.approx(0.25) and new.preemptions == 3.0
    assert new.itl_ms_p50 == pytest.approx(10.0)        # rank 50 = the first bucket's top


@pytest.mark.parametrize("name", ["sglang.txt", "tgi.txt", "llamacpp.txt"])
def test_other_engines_map_onto_the_same_fields(name):
    v = view(Sample(), load(name))
    ref = view(Sample(), load("vllm-current.txt"))
    assert (v.waiting_max, v.running_max) == (4.0, 8.0)
    if name == "sglang.txt":
        assert v.kv_usage_max == 0.42 and v.prefix_hit_rate == pytest.approx(0.25)
        assert v.itl_ms_p50 == ref.itl_ms_p50 and v.itl_ms_p95 == ref.itl_ms_p95
    if name == "tgi.txt":
        assert (v.queue_ms_p50, v.queue_ms_mean) == (ref.queue_ms_p50, ref.queue_ms_mean)
        assert v.itl_ms_p95 == ref.itl_ms_p95
    if name == "llamacpp.txt":  # prompt_tokens excludes the cached ones: 2500 / (7500 + 2500)
        assert v.prefix_hit_rate == pytest.approx(0.25)


def test_recorded_real_vllm_and_llamacpp_and_reference_scrapes():
    vllm = view(load("metrics-vllm-before.txt"), load("metrics-vllm-after.txt"))
    assert vllm.ttft_ms_p50 is not None and vllm.itl_ms_p50 is not None and vllm.queue_ms_mean is not None
    assert vllm.running_max is not None and vllm.kv_usage_max is not None
    llama = view(load("metrics-llamacpp-before.txt"), load("metrics-llamacpp-after.txt"))
    assert llama.prefix_hit_rate == pytest.approx(39 / (132 + 39), abs=1e-3)  # recorded counters, by hand
    assert llama.running_max is not None and llama.waiting_max is not None
    ref = view(load("metrics-reference-before.txt"), load("metrics-reference-after.txt"))
    assert ref.ttft_ms_p50 > 0 and ref.itl_ms_p50 > 0 and ref.queue_ms_mean is not None
    assert 0 < ref.prefix_hit_rate < 1   # shared_prefix_tokens with prefix caching on


def test_counter_reset_and_empty_histograms_give_no_figure():
    before, after = load("vllm-current.txt"), load("vllm-older.txt")
    v = view(after, Sample())   # everything went down or away: no deltas, no made-up zeros
    assert v.queue_ms_p50 is None and v.prefix_hit_rate is None and v.preemptions is None
    assert bucket_quantile(Histogram({1.0: 0.0}, 0.0, 0.0), 0.5) is None
    assert bucket_quantile(Histogram({0.1: 1.0, float("inf"): 10.0}, 5.0, 10.0), 0.99) == 0.1  # +Inf: top bound
    assert view(before, before).queue_ms_p50 is None


def test_timeline_uses_engine_names_on_the_requests_axis():
    s1, s2 = load("vllm-current.txt"), load("sglang.txt")
    tl = timeline([(1_500_000_000, s1), (2_000_000_000, s1)], t0_ns=1_000_000_000)
    assert tl["vllm:num_requests_waiting"] == [[500.0, 4.0], [1000.0, 4.0]]
    assert tl["vllm:kv_cache_usage_perc"][0] == [500.0, 0.42]
    assert set(timeline([(0, s2)], 0)) == {"sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage"}


def test_invalid_text_is_a_measurement_error():
    with pytest.raises(MeasurementError, match="not valid Prometheus"):
        parse_sample("vllm:x{le= 1\n")
