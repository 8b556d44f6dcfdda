"""The load engine's bookkeeping (client.load.engine) with a fake ``send`` and a virtual clock: which
requests count, which are excluded, the schedule each request is stamped with, the early stop."""
from __future__ import annotations

import threading

from pytest_llm_latency.client.load.engine import run_load
from pytest_llm_latency.client.placement.plan import planned_requests, uses_load_engine
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.spec.schedule import Arrival, offsets
from pytest_llm_latency.core.spec.workload import make_workload


class VirtualClock:
    """ns clock that only moves when someone sleeps (thread-safe)."""

    def __init__(self):
        self.t = 1_000_000_000
        self.lock = threading.Lock()

    def __call__(self) -> int:
        with self.lock:
            return self.t

    def sleep(self, s: float) -> None:
        with self.lock:
            self.t += max(int(s * 1e9), 1)


def prompts(n):
    return [Prompt(system="", user=f"p{i}", expected_tokens=8, counted_tokens=8) for i in range(n)]


def fake_send(clock, fail_kind=None, fail_at=None):
    sent = []
    lock = threading.Lock()

    def send(p, t_sched):
        with lock:
            sent.append((p.user, t_sched))
            k = len(sent)
        if fail_kind and k >= fail_at:
            return Failure(fail_kind, "rejected")
        t = clock()
        return RequestRecord(t_send_ns=t, chunks=[TokenChunk(t + 1, 1)], t_end_ns=t + 2, completion_tokens=1,
                             t_scheduled_ns=t_sched)
    return send, sent


def test_closed_loop_measures_samples_at_full_concurrency_and_reports_ramp_and_drain():
    clock = VirtualClock()
    w = make_workload("w", {"prompt_tokens": 8, "output_tokens": 1, "concurrency": 4, "samples": 10, "warmup": 0})
    assert uses_load_engine(w) and planned_requests(w) == 18
    send, sent = fake_send(clock)
    run = run_load(send, prompts(planned_requests(w)), w, clock=clock, sleep=clock.sleep)
    assert run.mode == "closed" and len(run.outcomes) == 10
    assert len(run.ramp) == 4                 # every worker's first request: before full concurrency
    assert 0 <= len(run.drain) <= 3           # in flight when it stopped issuing
    assert len(sent) == 10 + 4 + len(run.drain)
    assert all(t is None for _, t in sent)    # a closed loop has no schedule


def test_open_loop_stamps_each_request_with_its_scheduled_time():
    clock = VirtualClock()
    w = make_workload("w", {"prompt_tokens": 8, "output_tokens": 1, "rate": 5, "arrival": "poisson",
                            "requests": 12, "warmup": 0})
    send, sent = fake_send(clock)
    run = run_load(send, prompts(12), w, seed=7, clock=clock, sleep=clock.sleep)
    assert run.mode == "open" and len(run.outcomes) == 12
    stamped = sorted(t for _, t in sent)
    due = [int(o * 1e9) for o in offsets(Arrival(5.0), seed=7, n=12)]
    assert [t - stamped[0] for t in stamped] == due  # the seeded schedule, exactly
    assert all(r.t_scheduled_ns is not None for r in run.outcomes)
    assert len(run.send_lag_ns) == 12


def test_a_deterministic_rejection_stops_both_loops():
    for spec in ({"concurrency": 3}, {"rate": 100}):
        clock = VirtualClock()
        w = make_workload("w", {"prompt_tokens": 8, "output_tokens": 1, "samples": 20, "warmup": 0, **spec})
        send, sent = fake_send(clock, "context_length", fail_at=1)
        run = run_load(send, prompts(planned_requests(w)), w, clock=clock, sleep=clock.sleep)
        assert run.stopped == "context_length" and run.unsent > 0
        assert len(sent) <= 3 and {o.kind for o in run.outcomes} == {"context_length"}
    clock = VirtualClock()   # a 429 is load, not a rejection: the run goes on
    w = make_workload("w", {"prompt_tokens": 8, "output_tokens": 1, "samples": 6, "warmup": 0, "concurrency": 2})
    send, sent = fake_send(clock, "http_429", fail_at=1)
    run = run_load(send, prompts(planned_requests(w)), w, clock=clock, sleep=clock.sleep)
    assert run.stopped is None and len(run.outcomes) == 6


def test_duration_bounds_the_open_loop_schedule_and_ramp_up_staggers_the_closed_loop():
    clock = VirtualClock()
    w = make_workload("w", {"prompt_tokens": 8, "output_tokens": 1, "rate": 10, "duration": "3s", "warmup": 0})
    assert w.samples == 1000   # only the duration bounds it (and the cap)
    want = offsets(Arrival(10.0), seed=3, duration_s=3.0)
    send, sent = fake_send(clock)
    run = run_load(send, prompts(planned_requests(w)), w, seed=3, clock=clock, sleep=clock.sleep)
    assert len(run.outcomes) == len(want) and all(o < 3.0 for o in want)

    clock = VirtualClock()
    w = make_workload("w", {"prompt_tokens": 8, "output_tokens": 1, "concurrency": 4, "ramp_up": "1s",
                            "samples": 10, "warmup": 0})
    send, sent = fake_send(clock)
    run = run_load(send, prompts(planned_requests(w)), w, clock=clock, sleep=clock.sleep)
    assert len(run.outcomes) == 10 and len(run.ramp) >= 4 and not run.prompts_short


def test_samples_auto_keeps_its_rounds_and_refuses_load_keys():
    import pytest

    from pytest_llm_latency.core.errors import ConfigError

    from dataclasses import replace

    from pytest_llm_latency.client.placement.shares import planned_workers

    auto = make_workload("w", {"class": "chat", "samples": "auto", "concurrency": 4})
    assert auto.sequential and not uses_load_engine(auto)
    # its rounds' samples, and (workers: auto, the default: up to 2 processes on the tests' 2 CPUs) each
    # worker's own warm-up prompts
    assert auto.workers == "auto" and planned_workers(auto) == 2
    assert planned_requests(auto) == auto.samples + auto.warmup * 2
    assert planned_requests(replace(auto, workers=1)) == auto.samples
    with pytest.raises(ConfigError, match="does not combine with rate"):
        make_workload("w", {"class": "chat", "samples": "auto", "rate": 4})
    assert make_workload("w", {"class": "chat", "requests": 30}).samples == 30
