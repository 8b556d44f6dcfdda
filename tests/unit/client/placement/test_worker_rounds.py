"""``samples: auto`` over worker processes (``client/placement/processes/pool.py``,
``client/drivers/worker_rounds.py``):
a round's prompts dealt ``k, k+N, ...`` to worker ``k`` and merged back in prompt order, and the
``samples: auto`` decision taken on every worker's records.  No process and no server here: the
pool runs its real controller (pipes, bounded waits, merge) against worker bodies on threads (an
injected multiprocessing context), which answer each round with records of chosen latencies."""
from __future__ import annotations

import itertools
import multiprocessing
import os
import socket
import threading
from multiprocessing.connection import Connection
from types import SimpleNamespace

import pytest

from pytest_llm_latency.client.drivers.base import Run
from pytest_llm_latency.client.drivers.worker_rounds import WorkerRounds, round_shards
from pytest_llm_latency.client.transport.http import Timeouts
from pytest_llm_latency.client.transport.http import request_bound_s
from pytest_llm_latency.client.placement.processes.pool import WorkerPool, deal_round, merge_round
from pytest_llm_latency.client.placement.processes.shard import Credentials, ShardRun
from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record


def prompts(n: int) -> list[Prompt]:
    return [Prompt("", f"p{i}", 10, 10) for i in range(n)]


# ---------------------------------------------------------------------- dealing and merging
@pytest.mark.parametrize("size,workers", [(4, 2), (5, 2), (7, 3), (2, 4), (1, 2), (6, 1)])
def test_a_round_is_dealt_k_k_plus_n_and_every_prompt_exactly_once(size, workers):
    batch = prompts(size)
    parts = deal_round(100, batch, workers)
    assert len(parts) == workers
    for k, part in enumerate(parts):
        assert [pos for pos, _ in part] == list(range(100 + k, 100 + size, workers))
        assert all(p is batch[pos - 100] for pos, p in part)
    sent = [pos for part in parts for pos, _ in part]
    assert sorted(sent) == list(range(100, 100 + size))  # disjoint, and together the whole round
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_the_answers_are_merged_back_in_prompt_order_whichever_worker_answered_first():
    parts = deal_round(8, list("abcdefg"), 3)
    answers = [[(pos, f"{p}@{k}") for pos, p in part] for k, part in enumerate(parts)]
    assert merge_round(answers[::-1]) == ["a@0", "b@1", "c@2", "d@0", "e@1", "f@2", "g@0"]


def test_round_shards_carry_their_own_warm_up_prompts_and_a_connection_per_request_of_a_round():
    spares = prompts(6)
    shards = round_shards(3, "target", spares, 2, 5, output_tokens=4, extra=None)
    assert [s.warm for s in shards] == [tuple(spares[0:2]), tuple(spares[2:4]), tuple(spares[4:6])]
    assert [s.streams for s in shards] == [2, 2, 2] and all(s.prompts == () for s in shards)


def test_one_requests_bound_counts_every_try_and_the_waits_between():
    t = Timeouts(connect_s=1, idle_s=2, total_s=10, max_retries=2, max_retry_wait_s=3)
    assert request_bound_s(t) == (1 + 10 + 2) * 3 + 3 * 2


# ---------------------------------------------------------------------- a pool on threads
class ThreadProc:
    """A worker "process" on a thread, with its own end of the pipe (the controller closes its copy)."""
    pids = itertools.count(4000)

    def __init__(self, target, args, name, daemon):
        child = args[0]
        self.conn = Connection(os.dup(child.fileno()))
        self.target, self.pid, self.exitcode = target, next(self.pids), None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self):
        self.exitcode = self.target(self.conn, self.pid) or 0

    def start(self):
        self.thread.start()

    def is_alive(self):
        return self.thread.is_alive()

    def join(self, timeout=None):
        self.thread.join(timeout)

    def kill(self):  # its pipe shut (a blocked read there gets EOF), as a killed process's would be
        with socket.socket(fileno=os.dup(self.conn.fileno())) as s:
            s.shutdown(socket.SHUT_RDWR)


class ThreadContext:
    Pipe = staticmethod(multiprocessing.Pipe)
    Process = ThreadProc


def fake_worker(e2e_ms, die=None):
    """A worker body answering rounds with records of ``e2e_ms(k, position)``; ``die=(k, round)``:
    worker ``k`` closes its pipe instead of answering that round (exit code 86)."""
    def body(conn, pid):
        shard, credentials = conn.recv()
        assert credentials.authorization == "Bearer s3cret"  # through the pipe, with the shard
        conn.send(("ready", 0))
        for n in itertools.count(1):
            msg = conn.recv()
            if msg[0] != "round":
                return 0
            if die == (shard.index, n):
                conn.close()
                return 86
            name = f"{pid}@host"
            out = ShardRun(shard.index, pid, name.split("@")[1], lag_ns=[1000 * n] * 3)
            for pos, _ in msg[1]:
                rec = record(e2e_ms(shard.index, pos) - 30, gap_ms=10, tokens=4)
                rec.worker = name
                out.outcomes.append((pos, rec))
            conn.send(("round", out))
    return body


CLIENT = SimpleNamespace(base_url="http://127.0.0.1:9", model="m", timeouts=Timeouts(total_s=5), api="completions",
                         http=SimpleNamespace(headers={"Authorization": "Bearer s3cret"}))


def driver(e2e_ms, die=None, seen=None):
    def make(shards, credentials, **kw):
        pool = WorkerPool(shards, credentials, ctx=ThreadContext, target=fake_worker(e2e_ms, die), **kw)
        if seen is not None:
            seen.append(pool)
        return pool
    return WorkerRounds(CLIENT, pool=make)


def workload(**kw):
    spec = {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": "auto", "min_samples": 8,
            "max_samples": 40, "confidence": 0.9, "concurrency": 4, "workers": 2, "warmup": 1,
            "slo": {"e2e_p90": "1s"}}
    return make_workload("w", {**spec, **kw})


def test_rounds_stop_when_decided_and_the_records_come_back_in_prompt_order_from_both_workers():
    w = workload()
    progress: list[tuple[int, int]] = []
    sent = driver(lambda k, pos: 100 + pos).send(None, prompts(40 + 2), w, Run(progress=lambda *a: progress.append(a)),
                                                 lambda records: None)
    n = len(sent.outcomes)
    assert 8 <= n < 40 and n % 4 == 0                         # whole rounds, stopped before max_samples
    assert sent.sequential.all_decided() and sent.sequential.decided["e2e_p90"].status == "pass"
    assert sent.sequential.stop_reason(n, 40) == f"every budget decided at {n} samples"
    assert progress == [(4 * i, 40) for i in range(1, n // 4 + 1)]
    ttfts = [(r.t_first_byte_ns - r.t_send_ns) // 1_000_000 for r in sent.outcomes]
    assert ttfts == [70 + i for i in range(n)]                 # prompt order: position i has e2e 100 + i
    workers = [r.worker for r in sent.outcomes]
    assert len(set(workers)) == 2 and workers[0::2] == [workers[0]] * (n // 2) and workers[1] != workers[0]
    run = sent.load_run
    assert run.mode == "rounds" and not run.worker_failures and [wk.index for wk in run.workers] == [0, 1]
    assert [wk.requests for wk in run.workers] == [n // 2, n // 2]
    assert all(wk.client_lag_ms_p99 is not None for wk in run.workers)


def test_the_decision_is_taken_on_every_workers_records():
    """Worker 1's requests are slow: worker 0's alone would pass the p90; all of them fail it."""
    w = workload()
    sent = driver(lambda k, pos: 5000 if k == 1 else 100).send(None, prompts(42), w, Run(), lambda records: None)
    n = len(sent.outcomes)
    assert n < 40 and sent.sequential.stopped_by == "e2e_p90"
    assert sent.sequential.decided["e2e_p90"].status == "fail"
    res = evaluate(w, sent.outcomes, [], sequential=sent.sequential)
    assert res.verdict == "fail" and res.n == n


def test_a_worker_lost_in_a_round_stops_the_rounds_and_is_named():
    pools: list = []
    sent = driver(lambda k, pos: 100, die=(1, 3), seen=pools).send(None, prompts(42), workload(), Run(),
                                                                   lambda records: None)
    run = sent.load_run
    assert len(run.worker_failures) == 1
    why = run.worker_failures[0]
    assert why.startswith("worker 1 (pid ") and "died with exit code 86 after 4 of 6 requests (round 3)" in why
    assert pools[0].rounds == 3                                 # no round after the loss
    assert [wk.index for wk in run.workers] == [0] and len(sent.outcomes) == 6  # the survivor's records
    assert {r.worker for r in sent.outcomes} == {run.workers[0].name}


def test_a_worker_that_never_gets_ready_is_named_without_a_round(monkeypatch):
    from pytest_llm_latency.client.placement.processes import pool as worker_pool

    monkeypatch.setattr(worker_pool, "READY_SLACK_S", 0.3)

    def mute(conn, pid):  # reads its shard, never says ready, leaves when its pipe closes
        conn.recv()
        try:
            conn.recv()
        except (EOFError, OSError):
            return 0

    shards = round_shards(2, "t", [], 0, 4, output_tokens=4, extra=None)
    with WorkerPool(shards, Credentials(), request_timeout_s=0.1, ctx=ThreadContext, target=mute) as pool:
        assert sorted(pool.failures) == [0, 1]
        assert pool.send_round(0, prompts(4)) == [] and pool.rounds == 0
    assert all(f.endswith("did not get ready in time after 0 of 0 requests") for f in pool.failures.values())


# ---------------------------------------------------------------------- the workload key
def where(path):
    return "f.slo.yaml:3 workloads.w." + ".".join(map(str, path))


AUTO = {"class": "chat", "samples": "auto", "concurrency": 4}


def test_samples_auto_takes_workers_up_to_its_concurrency_and_auto_resolves_as_elsewhere():
    from pytest_llm_latency.client.placement.shares import worker_count
    from pytest_llm_latency.client.drivers.registry import driver_for

    w = make_workload("w", {**AUTO, "workers": 2})
    assert w.sequential and w.workers == 2 and worker_count(w) == 2
    assert make_workload("w", {**AUTO, "workers": 4}).workers == 4
    a = make_workload("w", {**AUTO, "workers": "auto"})
    assert a.workers == "auto" and worker_count(a) == 1   # 4 streams: one worker per STREAMS_PER_PROCESS
    assert driver_for(w).name == "sequential_rounds"


@pytest.mark.parametrize("spec,workers,why", [
    (AUTO, 5, "samples: auto sends rounds of 4 requests, at least one per worker: give workers <= 4 "
              r"\(or concurrency >= 5\)"),
    ({**AUTO, "concurrency": 1}, 2, r"samples: auto sends rounds of 1 request, at least one per worker: give "
                                   r"workers <= 1 \(or concurrency >= 2\)"),
    ({**AUTO, "concurrency": 1}, "auto", r"samples: auto sends rounds of 1 request, .* give workers <= 1 "
                                         r"\(or concurrency >= the workers\)"),
])
def test_rounds_smaller_than_the_workers_are_a_config_error_saying_so(spec, workers, why):
    with pytest.raises(ConfigError, match=rf"workloads\.w\.workers: {workers} worker processes -- {why}"):
        make_workload("w", {**spec, "workers": workers}, where)


def test_a_run_wide_value_spreads_samples_auto_only_where_each_worker_gets_a_request():
    from pytest_llm_latency.core.spec.workload import with_workers

    assert with_workers(make_workload("w", AUTO), 2, "--llm-latency-workers", run_wide=True).workers == 2
    assert with_workers(make_workload("w", AUTO), 8, "--llm-latency-workers", run_wide=True).workers == "auto"
    one = make_workload("w", {**AUTO, "concurrency": 1})
    assert with_workers(one, 2, "--llm-latency-workers", run_wide=True).workers == 1


def test_a_prompt_sweep_stays_refused_by_design():
    with pytest.raises(ConfigError, match=r"a prompt_sweep sends one request at a time by design \(no queue in the "
                                          r"TTFT"):
        make_workload("w", {"class": "chat", "prompt_sweep": [64, 128], "samples": 10, "workers": 2}, where)
