"""Worker processes (``client/placement/processes/workers.py``): the shards of an open-loop schedule (disjoint, every
arrival once, due offsets unchanged), the merge (schedule order, each worker's lag, a failed
worker an error of the judge), the credentials kept out of reprs, and a shard run on a virtual
clock (the load engine's due times from the common start)."""
from __future__ import annotations

import pickle

import pytest

from pytest_llm_latency.client.transport.http import Timeouts
from pytest_llm_latency.client.load.engine import open_loop_schedule
from pytest_llm_latency.client.placement.plan import planned_requests
from pytest_llm_latency.client.placement import deal
from pytest_llm_latency.client.placement.shares import worker_count
from pytest_llm_latency.client.placement.processes.shard import (Credentials, PreparedShard, ShardRun, WorkerTarget,
    make_shards, run_shard)
from pytest_llm_latency.client.placement.processes.workers import merge
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.measure.record import RequestRecord
from pytest_llm_latency.core.result.result import Failure, measured
from pytest_llm_latency.core.spec.workload import make_workload

TARGET = WorkerTarget("http://127.0.0.1:9", "openai-completions", "m", Timeouts())


def prompts(n: int, tag: str = "p") -> list[Prompt]:
    return [Prompt(system="", user=f"{tag}{i}", expected_tokens=8, counted_tokens=8) for i in range(n)]


@pytest.mark.parametrize("n_due,workers", [(200, 2), (200, 3), (7, 4), (3, 8), (1, 1), (0, 2)])
def test_shards_are_disjoint_and_together_the_whole_schedule(n_due, workers):
    shards = deal(range(n_due), workers)
    flat = [p for s in shards for p in s]
    assert sorted(flat) == list(range(n_due)) and len(flat) == len(set(flat))
    assert all(s == list(range(k, n_due, workers)) for k, s in enumerate(shards))  # k, k+N, k+2N...


def test_make_shards_keeps_every_due_offset_and_prompt_with_its_position():
    w = make_workload("w", {"class": "chat", "rate": 40, "requests": 200, "workers": 2})
    due = open_loop_schedule(w, seed=3)
    ps, spares = prompts(200), prompts(4, "spare")
    shards = make_shards(due, ps, spares, 2, TARGET, warmup=2, output_tokens=16, extra=None, in_flight=200)
    merged = sorted((pos, d, p.user) for s in shards for pos, d, p in zip(s.positions, s.due, s.prompts))
    assert [d for _, d, _ in merged] == due                       # the merged arrivals are the schedule
    assert [u for _, _, u in merged] == [p.user for p in ps]      # each prompt at its own arrival
    assert {p.user for p in shards[0].prompts}.isdisjoint({p.user for p in shards[1].prompts})
    assert [[p.user for p in s.warm] for s in shards] == [["spare0", "spare1"], ["spare2", "spare3"]]
    assert all(s.streams == 100 for s in shards)
    assert pickle.loads(pickle.dumps(shards[1])) == shards[1]     # pure data: crosses a process boundary


def test_the_schedule_does_not_depend_on_the_workers():
    one = make_workload("w", {"class": "chat", "rate": 40, "requests": 200, "workers": 1})
    two = make_workload("w", {"class": "chat", "rate": 40, "requests": 200, "workers": 2})
    assert open_loop_schedule(one, seed=5) == open_loop_schedule(two, seed=5)
    assert worker_count(one) == 1 and worker_count(two) == 2
    assert planned_requests(two) == planned_requests(one) + 2 * two.warmup  # each worker's warm-up prompts


def test_credentials_never_show_in_a_repr():
    c = Credentials("Bearer sk-secret-123", ("sk-secret-123",))
    assert "sk-secret" not in repr(c) and "sk-secret" not in repr(TARGET)


def test_credentials_come_from_the_client_and_the_target_holds_none():
    from pytest_llm_latency.client.transport.http import Redactor, make_http_client
    from pytest_llm_latency.client.runner import Target, make_client

    with make_http_client(api_key="sk-secret-123") as http:
        client = make_client(Target("http://127.0.0.1:9", "openai-chat", "m"), http, redact=Redactor(["sk-secret-123"]))
        creds, target = Credentials.of(client), WorkerTarget.of(client)
    assert creds.authorization == "Bearer sk-secret-123" and creds.secrets == ("sk-secret-123",)
    assert target == WorkerTarget("http://127.0.0.1:9", "openai-chat", "m", client.timeouts)
    assert "sk-secret" not in repr(pickle.loads(pickle.dumps(target)))
    with make_http_client(auth=("user", "pw")) as http:
        basic = Credentials.of(make_client(Target("http://127.0.0.1:9"), http))
    assert basic.authorization is not None and basic.authorization.startswith("Basic ")


def rec(t_sched: int, worker: str) -> RequestRecord:
    r = RequestRecord(t_send_ns=t_sched + 1_000_000, t_end_ns=t_sched + 50_000_000, t_scheduled_ns=t_sched)
    r.worker = worker
    return r


def test_merge_is_in_schedule_order_with_each_workers_lag():
    shards = make_shards([0.0, 0.1, 0.2, 0.3, 0.4], prompts(5), [], 2, TARGET, warmup=0, output_tokens=4,
                         extra=None, in_flight=5)
    a = ShardRun(0, 11, "h", outcomes=[(4, rec(4, "11@h")), (0, rec(0, "11@h")), (2, rec(2, "11@h"))],
                 lag_ns=[1_000_000] * 10, send_lag_ns=[2_000_000, 3_000_000, 1_000_000], window_ns=5)
    b = ShardRun(1, 12, "h", outcomes=[(3, Failure("reset", "x", worker="12@h")), (1, rec(1, "12@h"))],
                 lag_ns=[0] * 10, send_lag_ns=[0, 0], window_ns=7)
    run = merge(shards, {0: a, 1: b}, {})
    assert [o.t_scheduled_ns if isinstance(o, RequestRecord) else "F" for o in run.outcomes] == [0, 1, 2, "F", 4]
    assert run.window_ns == 7 and len(run.send_lag_ns) == 5 and not run.worker_failures
    # p99 interpolated as the client part's (core.measure.stats.percentile): 2.98 ms of 1, 2, 3 ms
    assert [(i.name, i.requests, i.send_lag_ms_p99) for i in run.workers] == [("11@h", 3, 2.98), ("12@h", 2, 0.0)]


def test_a_failed_worker_makes_the_run_an_error_naming_it():
    from pytest_llm_latency.client.drivers.load_report import load_summary

    shards = make_shards([0.0, 0.1, 0.2, 0.3], prompts(4), [], 2, TARGET, warmup=0, output_tokens=4,
                         extra=None, in_flight=4)
    ok = ShardRun(0, 11, "h", outcomes=[(0, rec(0, "11@h")), (2, rec(2, "11@h"))], send_lag_ns=[0, 0])
    why = "worker 1 (pid 12) died with exit code -9 after 1 of 2 requests"
    run = merge(shards, {0: ok}, {1: why})
    w = make_workload("w", {"class": "custom", "prompt_tokens": 8, "output_tokens": 1, "rate": 40, "requests": 4,
                            "workers": 2, "confidence": None, "slo": {"e2e_p50": "10s"}})
    res = measured(w, list(run.outcomes), [])
    load_summary(res, run)
    res = judge(res)
    assert res.load.workers == 2 and [x["worker"] for x in res.load.worker_lag] == ["11@h"]
    assert res.verdict == "error" and any(why in e for e in res.errors), res.errors


def test_the_workers_failed_warm_ups_are_one_note_as_one_process_gives():
    from pytest_llm_latency.client.drivers.load_report import load_summary

    shards = make_shards([0.0, 0.1], prompts(2), prompts(2, "w"), 2, TARGET, warmup=1, output_tokens=4,
                         extra=None, in_flight=2)
    runs = {k: ShardRun(k, 11 + k, "h", outcomes=[(k, rec(k, f"{11 + k}@h"))], send_lag_ns=[0], warm_failures=k)
            for k in (0, 1)}
    run = merge(shards, runs, {})
    assert run.warm_failures == 1
    w = make_workload("w", {"class": "custom", "prompt_tokens": 8, "output_tokens": 1, "rate": 40, "requests": 2,
                            "workers": 2, "confidence": None, "slo": {"e2e_p50": "10s"}})
    res = measured(w, list(run.outcomes), [])
    load_summary(res, run)
    assert [n for n in res.notes if "warm-up" in n] == [
        "1 warm-up request(s) failed on the workers (unmeasured: each worker warms its own connections before the "
        "start)"]


def test_a_worker_that_fell_behind_makes_the_run_an_error_naming_it():
    from pytest_llm_latency.client.drivers.load_report import load_summary

    shards = make_shards([0.0, 0.1, 0.2, 0.3], prompts(4), [], 2, TARGET, warmup=0, output_tokens=4,
                         extra=None, in_flight=4)
    fine = ShardRun(0, 11, "h", outcomes=[(0, rec(0, "11@h")), (2, rec(2, "11@h"))], lag_ns=[100_000] * 500)
    starved = ShardRun(1, 12, "h", outcomes=[(1, rec(1, "12@h")), (3, rec(3, "12@h"))], lag_ns=[50_000_000] * 500)
    run = merge(shards, {0: fine, 1: starved}, {})
    w = make_workload("w", {"class": "custom", "prompt_tokens": 8, "output_tokens": 1, "rate": 40, "requests": 4,
                            "workers": 2, "confidence": None, "slo": {"e2e_p50": "10s"}})
    res = measured(w, list(run.outcomes), [])
    load_summary(res, run)
    res = judge(res)
    assert res.verdict == "error"
    assert [e for e in res.errors if "worker" in e] == [
        "worker 1 (12@h) fell behind (CPU-starved: lag p99 50 ms): the samples are not the workload's as "
        "scheduled, so the run is not judged"]


class FakeClient:
    """Streams on a virtual clock: each request takes 10 ms of it."""

    def __init__(self, clock):
        self.clock, self.sent = clock, []

    def stream(self, system, user, max_tokens, *, expected_prompt_tokens=None, extra=None):
        t = self.clock()
        self.sent.append((user, t))
        return RequestRecord(t_send_ns=t, t_end_ns=t + 10_000_000)


def test_a_shard_runs_on_its_due_times_from_the_common_start():
    now = [0]

    def clock():
        return now[0]

    def sleep(s):
        now[0] += max(int(s * 1e9), 1)

    shards = make_shards([0.0, 0.25, 0.5, 0.75, 1.0], prompts(5), [], 2, TARGET, warmup=0, output_tokens=4,
                         extra=None, in_flight=5)
    client = FakeClient(clock)
    t0 = 5_000_000_000
    out = run_shard(PreparedShard(shards[1], client, lambda: None), t0, clock=clock, sleep=sleep)
    assert sorted(pos for pos, _ in out.outcomes) == [1, 3]
    assert sorted(o.t_scheduled_ns for _, o in out.outcomes) == [t0 + 250_000_000, t0 + 750_000_000]
    assert all(o.worker == out.name and out.name.startswith(f"{out.pid}@") for _, o in out.outcomes)
    assert sorted(u for u, _ in client.sent) == ["p1", "p3"]
