"""A closed loop over worker processes (``client/placement/processes/closed.py``): the streams spread over the
workers, and the loop's books shared (``SharedLoopState``) so that the steady-state window is
decided across all of them -- here two "workers" run in threads of this process on the same shared
books (the spawn context's objects, as the controller makes them), on a virtual clock; and the
merge of their records (measured, ramp-up and drain summed)."""
from __future__ import annotations

import itertools
import multiprocessing
import threading

import pytest

from pytest_llm_latency.client.load.engine import ClosedPlan, LoopState, _closed_loop
from pytest_llm_latency.client.placement.processes.shard import ShardRun, WorkerTarget
from pytest_llm_latency.client.placement.processes.workers import merge
from pytest_llm_latency.client.placement import deal
from pytest_llm_latency.client.placement.processes.closed import SharedLoopState, make_closed_shards
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.measure.record import RequestRecord
from pytest_llm_latency.core.result.result import Failure

TARGET = WorkerTarget("http://127.0.0.1:9", "openai-completions", "m")


def prompts(n: int) -> list[Prompt]:
    return [Prompt(system="", user=f"p{i}", expected_tokens=8, counted_tokens=8) for i in range(n)]


@pytest.mark.parametrize("c,n,sizes", [(4, 2, [2, 2]), (5, 2, [3, 2]), (7, 3, [3, 2, 2]), (3, 3, [1, 1, 1])])
def test_the_streams_are_spread_with_the_remainder(c, n, sizes):
    shares = deal(range(c), n)
    assert [len(s) for s in shares] == sizes
    assert sorted(k for s in shares for k in s) == list(range(c))  # disjoint, together every stream


def test_each_shard_has_its_streams_all_prompts_and_its_own_warm_up():
    plan = ClosedPlan(5, 40, 0.0, None)
    shards = make_closed_shards(plan, prompts(50), prompts(4), 2, TARGET, warmup=2, output_tokens=8, extra=None)
    assert [s.plan.streams for s in shards] == [(0, 2, 4), (1, 3)]
    assert all(s.plan.concurrency == 5 and s.plan.samples == 40 and len(s.prompts) == 50 for s in shards)
    assert [s.streams for s in shards] == [3, 2] and [s.planned for s in shards] == [24, 16]
    assert [[p.user for p in s.warm] for s in shards] == [["p0", "p1"], ["p2", "p3"]]


def counting_clock():
    ticks = itertools.count(1_000)
    return lambda: next(ticks) * 1_000  # every reading 1 us later than the one before


@pytest.mark.parametrize("make_state", [lambda c: SharedLoopState(multiprocessing.get_context("spawn"), c),
                                        LoopState], ids=["shared", "local"])
def test_two_workers_on_shared_books_count_the_samples_across_both(make_state):
    c, samples, workers = 4, 40, 2
    clock = counting_clock()
    ps = prompts(samples + 2 * c)
    sent: list[str] = []
    lock = threading.Lock()

    def send(p: Prompt, t_due):
        t = clock()
        with lock:
            sent.append(p.user)
        return RequestRecord(t_send_ns=t, t_end_ns=t + 1)

    state = make_state(c)
    runs: list = [None] * workers

    def worker(k: int) -> None:
        plan = ClosedPlan(c, samples, 0.0, None, tuple(deal(range(c), workers)[k]))
        runs[k] = _closed_loop(send, ps, plan, clock, lambda s: None, None, state=state, t0=clock())

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    measured = sum(len(r.outcomes) for r in runs)
    ramp = sum(len(r.ramp) for r in runs)
    drain = sum(len(r.drain) for r in runs)
    assert measured == samples == state.counted           # counted across the workers, stopped at samples
    assert ramp == c                                      # each stream's first request: before full concurrency
    assert drain <= c - 1                                 # in flight when issuing stopped
    assert len(sent) == len(set(sent)) == measured + ramp + drain == state.next  # each prompt sent once
    assert state.started == c and state.ramp_end is not None and state.stop
    assert len({r.window_ns for r in runs}) == 1 and runs[0].window_ns == state.t_stop - state.ramp_end
    assert all(r.stopped is None and not r.prompts_short for r in runs)
    # every counted request was sent after full concurrency began and ended before issuing stopped
    assert all(state.ramp_end <= o.t_send_ns and o.t_end_ns <= state.t_stop for r in runs for o in r.outcomes)


def rec(pos: int) -> RequestRecord:
    return RequestRecord(t_send_ns=pos, t_end_ns=pos + 10)


def test_the_merge_keeps_the_draw_order_and_sums_ramp_and_drain():
    plan = ClosedPlan(4, 4, 0.0, None)
    shards = make_closed_shards(plan, prompts(12), [], 2, TARGET, warmup=0, output_tokens=8, extra=None)
    a = ShardRun(0, 11, "h", outcomes=[(5, rec(5)), (2, rec(2))], ramp=[(0, rec(0)), (3, rec(3))],
                 drain=[(8, rec(8))], window_ns=100)
    b = ShardRun(1, 12, "h", outcomes=[(4, rec(4)), (6, rec(6))], ramp=[(1, rec(1))], drain=[], window_ns=100)
    run = merge(shards, {0: a, 1: b}, {})
    assert run.mode == "closed" and run.window_ns == 100
    assert [o.t_send_ns for o in run.outcomes] == [2, 4, 5, 6]
    assert [o.t_send_ns for o in run.ramp] == [0, 1, 3] and [o.t_send_ns for o in run.drain] == [8]
    assert [w.requests for w in run.workers] == [2, 2]


def test_a_rejection_stops_every_worker_and_counts_the_unsent_against_the_samples():
    plan = ClosedPlan(4, 10, 0.0, None)
    shards = make_closed_shards(plan, prompts(20), [], 2, TARGET, warmup=0, output_tokens=8, extra=None)
    rejected = Failure("http_400", "bad request")
    a = ShardRun(0, 11, "h", outcomes=[(4, rec(4)), (6, rejected)], stopped="http_400")
    b = ShardRun(1, 12, "h", outcomes=[(5, rec(5))], drain=[(7, Failure("reset", "x"))])
    run = merge(shards, {0: a, 1: b}, {})
    assert run.stopped == "http_400" and run.unsent == 10 - 3
    assert sum(isinstance(o, Failure) for o in run.outcomes) == 2  # the other worker's excluded failure too
