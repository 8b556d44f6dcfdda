"""``workers: auto`` sizing (issue 39): the load's token events over what one process carries,
at most one per stream, capped by the CPUs (one left for a server on this host).  Hand-computed."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.placement.shares import is_local_target, sizing_for
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.spec.worker_sizing import (EVENTS_PER_S_PER_PROCESS, STREAMS_PER_PROCESS, StreamRate,
    size_workers, stream_rate)
from pytest_llm_latency.core.spec.workload import make_workload

RATE_50 = StreamRate(events_per_s=50.0, events_per_request=64.0, requests=8)


def test_streams_times_the_warm_up_rate_over_one_process_rounded_up():
    # 256 x 50 = 12,800 events/s; / 6,400 = 2 (a remote target on 16 CPUs: no cap)
    s = size_workers("auto", streams=256, cpus=16, local=False, rate=RATE_50)
    assert s.count == -(-256 * 50 // EVENTS_PER_S_PER_PROCESS)
    assert s.reason.startswith("auto: 256 streams x 50 tok/s = 12,800 events/s (warm-up)")
    assert f"{EVENTS_PER_S_PER_PROCESS:,} events/s per process -> {s.count}" in s.reason


def test_a_light_load_is_one_process():
    assert size_workers("auto", streams=8, cpus=16, local=False, rate=RATE_50).count == 1   # 400 events/s


def test_capped_by_the_cpus_one_left_for_a_local_server():
    local = size_workers("auto", streams=1024, cpus=4, local=True, rate=RATE_50)
    remote = size_workers("auto", streams=1024, cpus=4, local=False, rate=RATE_50)
    assert (local.count, remote.count) == (3, 4)
    assert local.reason.endswith("; capped at 3 (4 CPUs, one left for the local server)")
    assert remote.reason.endswith("; capped at 4 (4 CPUs)")
    assert size_workers("auto", streams=1024, cpus=2, local=True, rate=RATE_50).count == 1   # this VM
    assert size_workers("auto", streams=1024, cpus=1, local=True, rate=RATE_50).count == 1   # never below one


def test_at_most_one_per_stream():
    fast = StreamRate(events_per_s=8000.0, events_per_request=64.0, requests=2)  # 3 x 8,000 = 24,000: 4 wanted
    s = size_workers("auto", streams=3, cpus=16, local=False, rate=fast)
    assert s.count == 3 and s.reason.endswith("; at most one per stream: 3")
    assert size_workers("auto", streams=1, cpus=16, local=False, rate=fast).count == 1  # one stream: one process


def test_an_open_loop_is_requests_per_s_times_events_per_request():
    # 150 requests/s x 64 events = 9,600 events/s -> ceil(9,600 / 6,400) = 2, whatever its thread cap
    s = size_workers("auto", streams=256, cpus=16, local=False, rate=RATE_50, open_rps=150.0)
    assert s.count == -(-9600 // EVENTS_PER_S_PER_PROCESS) == 2
    assert "150 requests/s x 64 token events = 9,600 events/s" in s.reason


def test_without_a_warm_up_rate_streams_per_process():
    s = size_workers("auto", streams=STREAMS_PER_PROCESS * 2 + 1, cpus=16, local=False, rate=None)
    assert s.count == 3 and "no token rate from a warm-up" in s.reason


def test_an_explicit_count_is_taken_as_given():
    assert size_workers(1, streams=512, cpus=16, local=True, rate=RATE_50).count == 1
    assert size_workers(4, streams=2, cpus=1, local=True).count == 4
    assert size_workers(4, streams=2, cpus=1, local=True).reason == "workers: 4 (given)"


def test_the_warm_ups_rate_is_the_median_over_its_requests_of_events_over_their_span():
    ms = 1_000_000
    a = [0, 20 * ms, 40 * ms, 60 * ms]          # 3 gaps in 60 ms: 50 events/s, 4 events
    b = [0, 10 * ms, 20 * ms]                   # 2 gaps in 20 ms: 100 events/s, 3 events
    c = [0, 25 * ms, 50 * ms, 75 * ms, 100 * ms]  # 40 events/s, 5 events
    r = stream_rate([a, b, c, [5], []])         # one chunk or none: no rate of its own
    assert r == StreamRate(events_per_s=50.0, events_per_request=4, requests=3)
    assert stream_rate([[1], [2, 2]]) is None


def _record(stamps: list[int]) -> RequestRecord:
    rec = RequestRecord(t_send_ns=0)
    rec.chunks = [TokenChunk(t, 1) for t in stamps]
    return rec


def test_sizing_for_a_closed_loop_uses_the_warm_up_records(monkeypatch):
    from pytest_llm_latency.client.placement import shares as load_plan

    monkeypatch.setattr(load_plan, "host_cpus", lambda: 16)
    w = make_workload("w", {"class": "chat", "concurrency": 192, "requests": 200})
    assert w.workers == "auto"
    gaps = [i * 20_000_000 for i in range(10)]  # 50 tok/s
    s = sizing_for(w, "http://10.1.2.3:8000", [_record(gaps)] * 4)
    assert s.count == -(-192 * 50 // EVENTS_PER_S_PER_PROCESS) == 2  # 9,600 / 6,400 -> 2
    assert s.reason.startswith("auto: 192 streams x 50 tok/s = 9,600 events/s (warm-up)")
    local = sizing_for(w, "http://127.0.0.1:8000", [])                # no warm-up: 192 / 128 -> 2, cap 15
    assert local.count == -(-192 // STREAMS_PER_PROCESS) == 2 and "no token rate" in local.reason
    assert sizing_for(make_workload("w", {"class": "chat", "concurrency": 192, "requests": 200, "workers": 1}),
                      "http://10.1.2.3:8000", [_record(gaps)]).count == 1


def test_the_tests_see_two_cpus_so_a_local_default_is_one_process():
    w = make_workload("w", {"class": "chat", "concurrency": 128, "requests": 200})
    gaps = [i * 1_000_000 for i in range(10)]  # 1,000 tok/s per stream: many processes wanted
    s = sizing_for(w, "http://localhost:8000", [_record(gaps)])
    assert s.count == 1 and s.reason.endswith("capped at 1 (2 CPUs, one left for the local server)")


@pytest.mark.parametrize("url,local", [
    ("http://127.0.0.1:8000", True), ("http://localhost:8000/v1", True), ("http://[::1]:8000", True),
    ("http://0.0.0.0:8000", True), ("reference://tiny", True), ("http://api.example.com", False),
    ("https://10.255.255.1:443", False),
])
def test_a_local_target(url, local):
    assert is_local_target(url) is local
