"""The decode roofline with varied lengths (per-request ceilings) and open loops (the batch the
server reported running, else the client's mean in flight): exact arithmetic on injected numbers."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.roofline.hardware import Hardware
from pytest_llm_latency.core.roofline.modelbytes import ModelBytes
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.roofline.ceiling import measure_roofline
from tests.helpers.roofline import evaluate_roofline
from pytest_llm_latency.core.roofline.roofline_requests import (client_in_flight, open_loop_batch, request_decodes,
    server_running, varied_lengths)
from pytest_llm_latency.core.spec.workload import make_workload

MS = 1_000_000
# 1000 GB/s; 1 GB of weights; 1 MB of KV per token: a step at context c reads 1e9 + 1e6 c bytes
HW = Hardware(key="test", name="Test", mem_bandwidth_gb_s=1000)
MODEL = ModelBytes(weight_bytes=1e9, kv_bytes_per_token=1e6, name="m")


def rec(prompt: int, output: int, send_ms: float, decode_ms: float, *, ttft_ms: float = 10.0,
        planned: int | None = None) -> RequestRecord:
    t0 = round(send_ms * MS)
    first = t0 + round(ttft_ms * MS)
    last = first + round(decode_ms * MS)
    chunks = [TokenChunk(first, 1), TokenChunk(last, output - 1)]
    return RequestRecord(t_send_ns=t0, t_first_byte_ns=first, chunks=chunks, t_end_ns=last, prompt_tokens=prompt,
                         completion_tokens=output, finish_reason="length", expected_prompt_tokens=planned)


# A: prompt 500 + 1000/2 = context 1000: step 2e9 B, ceiling 500 tok/s, 999 decode tokens ideally 1998 ms
# B: prompt 2500 + 1000/2 = context 3000: step 4e9 B, ceiling 250 tok/s, ideally 3996 ms
A = rec(500, 1000, 0, 3996.0)    # measured twice the ideal: 0.5
B = rec(2500, 1000, 0, 4995.0)   # 0.8


def test_each_request_gets_its_own_context():
    decodes = request_decodes([A, B], default_prompt=0)
    assert [(d.context, d.tokens, d.measured_ms) for d in decodes] == [(1000.0, 999, 3996.0), (3000.0, 999, 4995.0)]


def test_efficiency_is_total_ideal_over_total_measured_decode_time():
    r = evaluate_roofline(HW, MODEL, context=2000, tpot_p50_ms=4.5, min_efficiency=0.6,
                          decodes=request_decodes([A, B], 0))
    per = r.per_request
    assert per is not None
    assert per.ideal_ms == pytest.approx(1998.0 + 3996.0)
    assert per.measured_ms == pytest.approx(3996.0 + 4995.0)
    assert r.decode_efficiency == pytest.approx(5994.0 / 8991.0)  # 2/3, not the mean context's figure
    assert r.decode_efficiency_p95 == pytest.approx(0.5 + 0.05 * (0.8 - 0.5))  # 5th percentile of 0.5, 0.8
    assert r.ceiling_tok_s == pytest.approx(1998 / 5.994)     # Σ tokens ÷ Σ ideal
    assert r.measured_tok_s == pytest.approx(1998 / 8.991)    # Σ tokens ÷ Σ measured
    assert r.status == "pass"
    assert ("per-request ceilings over 2 requests (contexts 1000..3000 tokens, mean 2000): efficiency = Σ ideal "
            "decode time 5994.0 ms ÷ Σ measured 8991.0 ms; the arithmetic above is at the mean context") in r.message
    props = r.as_properties()
    assert props["decode_efficiency"] == pytest.approx(2 / 3) and props["combination"].startswith("per-request")
    assert "batch_source" not in props
    assert evaluate_roofline(HW, MODEL, context=2000, tpot_p50_ms=4.5, min_efficiency=0.7,
                             decodes=request_decodes([A, B], 0)).status == "fail"


def test_the_batch_multiplies_each_requests_kv_reads():
    r = measure_roofline(HW, MODEL, context=2000, tpot_p50_ms=4.5, batch=2, decodes=request_decodes([A, B], 0))
    # batch 2: A reads 1e9 + 2 x 1e6 x 1000 = 3e9 B per step (333.3 tok/s), B 1e9 + 2 x 3e9 = 7e9 (142.9 tok/s)
    ideal = 999 / (1e12 / 3e9) * 1000 + 999 / (1e12 / 7e9) * 1000
    assert r.per_request.ideal_ms == pytest.approx(ideal)
    assert r.decode_efficiency == pytest.approx(ideal / 8991.0)


def test_the_planned_length_stands_in_for_a_missing_server_count_and_short_ones_are_left_out():
    no_count = rec(500, 1000, 0, 3996.0)
    no_count.prompt_tokens, no_count.expected_prompt_tokens = None, 700
    short = rec(100, 3, 0, 10.0)
    short.expected_output_tokens = 50
    assert [d.context for d in request_decodes([no_count, short, rec(9, 1, 0, 0.0)], 0)] == [1200.0]


def test_fixed_lengths_keep_the_one_context_arithmetic():
    fixed = make_workload("w", {"prompt_tokens": 500, "output_tokens": 1000})
    drawn = make_workload("w", {"prompt_tokens": {"distribution": "uniform", "min": 64, "max": 2048},
                                "output_tokens": 8})
    assert not varied_lengths(fixed) and varied_lengths(drawn)
    plain = measure_roofline(HW, MODEL, context=1000, tpot_p50_ms=4.0)
    assert plain.per_request is None and plain.decode_efficiency == pytest.approx((1000 / 4.0) / 500.0)
    assert "per-request" not in plain.message and "combination" not in plain.as_properties()


def test_an_open_loop_takes_the_batch_the_server_reported_running_during_the_run():
    timeline = {"vllm:num_requests_running": [[-5.0, 9.0], [10.0, 2.0], [20.0, 3.0], [30.0, 3.0], [99999.0, 7.0]],
                "vllm:num_requests_waiting": [[10.0, 40.0]]}
    assert server_running(timeline, 5000.0) == (pytest.approx(8 / 3), "vllm:num_requests_running", 3)
    batch, source = open_loop_batch([A, B], timeline)  # the run: 0 .. 5005 ms
    assert batch == 3
    assert source == "batch 3 = the server's running requests (vllm:num_requests_running, mean 2.67 over 3 samples)"


def test_without_a_running_gauge_the_client_mean_in_flight_is_used_and_named():
    spans = [rec(1, 2, 0, 3990.0), rec(1, 2, 0, 5990.0), rec(1, 2, 2000, 3990.0)]  # 4 s, 6 s, 4 s over 6 s
    assert client_in_flight(spans) == pytest.approx(14000 / 6000)
    batch, source = open_loop_batch(spans, {"vllm:num_requests_waiting": [[1.0, 2.0]]})
    assert batch == 2
    assert source == ("batch 2 = the mean requests in flight measured by the client (2.33): the server reports no "
                      "running-requests gauge (vllm:num_requests_running), so the open loop's batch is the client's "
                      "count")
    r = measure_roofline(HW, MODEL, context=1000, tpot_p50_ms=4.0, batch=batch, batch_source=source)
    assert r.message.endswith("\n  " + source) and r.as_properties()["batch"] == 2


def test_the_gate_wires_per_request_contexts_and_the_open_loop_batch():
    from pytest_llm_latency.plugin.roofline_gate import _per_request

    open_loop = make_workload("w", {"prompt_tokens": {"distribution": "uniform", "min": 64, "max": 4096},
                                    "output_tokens": 1000, "rate": 2, "requests": 2, "concurrency": 8})
    res = measured(open_loop, [A, B], [])
    res.server.metrics_timeline = {"vllm:num_requests_running": [[100.0, 4.0], [200.0, 5.0]]}
    decodes, batch, source = _per_request(open_loop, res, {})
    assert [d.context for d in decodes] == [1000.0, 3000.0]
    assert batch == 5 and source.startswith("batch 5 = the server's running requests")  # 4.5 rounds half up
    assert _per_request(open_loop, res, {"batch": 6})[1:] == (6, "")  # roofline.batch wins
    closed = make_workload("w", {"prompt_tokens": 500, "output_tokens": 1000, "concurrency": 8})
    assert _per_request(closed, measured(closed, [A, B], []), {}) == (None, 8, "")


def test_idle_gaps_of_a_bursty_open_loop_do_not_dilute_the_batch():
    """8 requests decode together for 1 s, the server idles 0.9 s, then one short request runs: the
    batch the requests decoded at is 8 (mostly), not the 4 a mean over the whole window gives."""
    burst = [rec(100, 10, 0.0, 990.0) for _ in range(8)]
    late = [rec(100, 10, 1900.0, 90.0)]
    flight = client_in_flight(burst + late)
    assert flight == pytest.approx((8 * 1000.0 + 100.0) / (1000.0 + 100.0))  # 7.36: idle time left out
    gauge = {"vllm:num_requests_running": [[t, 8.0] for t in range(0, 1000, 100)]
             + [[t, 0.0] for t in range(1000, 1900, 100)] + [[1900.0, 1.0], [1950.0, 1.0]]}
    batch, source = open_loop_batch(burst + late, gauge)
    assert batch == 7 and "mean 6.83 over 12 samples" in source  # (10 x 8 + 2 x 1) / 12; the 9 idle zeros left out
