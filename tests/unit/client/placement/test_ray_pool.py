"""``samples: auto`` on Ray nodes (``client/placement/ray/pool.py``) without a cluster: the pool's rounds over
scripted node actors (a fake ``ray`` with ``wait``/``get``/``kill``, an injected clock: no sleeps),
dealt ``k, k+N, ...`` and merged in prompt order by the real round loop (``drivers/worker_rounds.py``),
a node lost or silent in a round named and killed, the nodes and their clock offsets in
``load.worker_lag``; the driver picking the Ray pool when ``ray`` is set; and a node's records moved
to the driver's timeline by the actor itself (``RoundActor.round``).  The cluster: tests/load/test_ray.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_llm_latency.client.placement.ray import pool as ray_pool
from pytest_llm_latency.client.drivers.base import Run
from pytest_llm_latency.client.drivers.worker_rounds import WorkerRounds, round_shards
from pytest_llm_latency.client.transport.http import Timeouts
from pytest_llm_latency.client.placement.ray.pool import RayPool, RoundActor
from pytest_llm_latency.client.placement.processes.shard import PreparedShard, ShardRun
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record

MS = 1_000_000
NODES = ["127.0.0.1/aaaa1111", "127.0.0.1/bbbb2222", "127.0.0.1/cccc3333"]


def prompts(n: int) -> list[Prompt]:
    return [Prompt("", f"p{i}", 10, 10) for i in range(n)]


class FakeRay:
    """``ray.wait``/``get``/``kill`` over ``Ref``s; a ``wait`` that finds none ready moves the clock by its timeout."""

    class exceptions:  # as ray's module
        class RayError(Exception):
            pass

        class RayActorError(RayError):
            pass

    def __init__(self):
        self.now = 0
        self.waits: list[float] = []
        self.killed: list[int] = []

    def clock(self) -> int:
        return self.now

    def wait(self, refs, num_returns, timeout):
        self.waits.append(timeout)
        ready = [r for r in refs if r.value is not None][:num_returns]
        if not ready:
            self.now += int(timeout * 1e9)
        return ready, [r for r in refs if r not in ready]

    @staticmethod
    def get(ref, timeout=None):
        if isinstance(ref.value, BaseException):
            raise ref.value
        return ref.value

    def kill(self, actor):
        self.killed.append(actor.index)


class Ref:
    def __init__(self, value):
        self.value = value  # None: never ready


class Node:
    """A node's ``RoundActor`` handle: ``round.remote`` answers at once with records of ``e2e_ms(k, pos)``,
    or, at round ``fail[0]``, with ``fail[1]`` (an exception; None: never answers)."""

    def __init__(self, index: int, e2e_ms, fail=None):
        self.index, self.e2e_ms, self.fail, self.calls = index, e2e_ms, fail, []
        self.round = self

    def remote(self, part, name, anchor):
        self.calls.append((part, name, anchor))
        if self.fail is not None and len(self.calls) == self.fail[0]:
            return Ref(self.fail[1])
        out = ShardRun(0, 100 + self.index, name, lag_ns=[1000] * 2)
        for pos, _ in part:
            rec = record(self.e2e_ms(self.index, pos) - 30, gap_ms=10, tokens=4)
            rec.worker = f"{100 + self.index}@{name}"
            out.outcomes.append((pos, rec))
        return Ref(out)


def fake_pool(e2e_ms, fails: dict | None = None, seen: list | None = None):
    """A ``RayPool`` maker whose placement is the fake's: nodes named, offsets 2 ms and 5 ms, no Ray."""
    fake = FakeRay()

    class Pool(RayPool):
        def _place(self):
            self.ray = fake
            self.actors = [Node(k, e2e_ms, (fails or {}).get(k)) for k in range(len(self.shards))]
            self.names = {k: NODES[k] for k in range(len(self.shards))}
            self.offsets = {k: ((2 + 3 * k) * MS, 1 * MS) for k in range(len(self.shards))}

    def make(shards, credentials, **kw):
        pool = Pool("127.0.0.1:6379", shards, credentials, clock=fake.clock, **kw)
        if seen is not None:
            seen.append(pool)
        return pool
    return make, fake


CLIENT = SimpleNamespace(base_url="http://127.0.0.1:9", model="m", timeouts=Timeouts(total_s=5), api="completions",
                         http=SimpleNamespace(headers={}))


def workload(**kw):
    spec = {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": "auto", "min_samples": 8,
            "max_samples": 40, "confidence": 0.9, "concurrency": 4, "workers": 2, "warmup": 1,
            "ray": "127.0.0.1:6379", "slo": {"e2e_p90": "1s"}}
    return make_workload("w", {**spec, **kw})


def test_rounds_over_two_nodes_stop_when_decided_in_prompt_order_each_node_named_with_its_offset():
    pools: list = []
    make, fake = fake_pool(lambda k, pos: 100 + pos, seen=pools)
    sent = WorkerRounds(CLIENT, pool=make).send(None, prompts(40 + 2), workload(), Run(), lambda records: None)
    n = len(sent.outcomes)
    assert 8 <= n < 40 and n % 4 == 0 and sent.sequential.all_decided()     # whole rounds, stopped when decided
    ttfts = [(r.t_first_byte_ns - r.t_send_ns) // MS for r in sent.outcomes]
    assert ttfts == [70 + i for i in range(n)]                               # prompt order: each request once
    assert [r.worker for r in sent.outcomes[:2]] == [f"100@{NODES[0]}", f"101@{NODES[1]}"]
    pool = pools[0]
    assert [[pos for pos, _ in part] for part, _, _ in pool.actors[0].calls[:2]] == [[0, 2], [4, 6]]  # k, k+N
    anchors = {anchor for a in pool.actors for _, _, anchor in a.calls}
    assert {wall for wall, _ in anchors} == {pool.anchors[0][0], pool.anchors[1][0]}  # one anchor per node, kept
    assert pool.anchors[1][0] - pool.anchors[0][0] == 3 * MS and pool.anchors[0][1] == pool.anchors[1][1]
    run = sent.load_run
    assert run.mode == "rounds" and not run.worker_failures
    assert [(w.index, w.node, w.clock_offset_ms, w.clock_rtt_ms, w.requests) for w in run.workers] == [
        (0, NODES[0], 2.0, 1.0, n // 2), (1, NODES[1], 5.0, 1.0, n // 2)]
    assert sorted(fake.killed) == [0, 1]                                     # left: every actor killed


def test_a_node_lost_in_a_round_stops_the_rounds_and_is_named_with_its_node():
    pools: list = []
    died = FakeRay.exceptions.RayActorError("The actor died unexpectedly before finishing this task.\ntraceback")
    make, fake = fake_pool(lambda k, pos: 100, fails={1: (3, died)}, seen=pools)
    sent = WorkerRounds(CLIENT, pool=make).send(None, prompts(42), workload(), Run(), lambda records: None)
    run = sent.load_run
    assert run.worker_failures == [f"worker 1 on node {NODES[1]} lost (its node or actor died): RayActorError: The "
                                   f"actor died unexpectedly before finishing this task. -- after 4 of 6 requests "
                                   f"(round 3)"]
    assert pools[0].rounds == 3 and fake.killed[0] == 1                     # killed at once; no round after
    assert [w.index for w in run.workers] == [0] and len(sent.outcomes) == 6  # only the survivor's records
    assert {r.worker for r in sent.outcomes} == {f"100@{NODES[0]}"}


def test_a_node_silent_past_the_rounds_bound_is_named_and_every_wait_is_bounded():
    make, fake = fake_pool(lambda k, pos: 100, fails={0: (2, None)})
    shards = round_shards(2, "t", [], 0, 4, output_tokens=4, extra=None)
    with make(shards, None, request_timeout_s=10.0) as pool:
        assert len(pool.send_round(0, prompts(4))) == 4
        got = pool.send_round(4, prompts(4))
    assert [r.worker for r in got] == [f"101@{NODES[1]}"] * 2              # the answering node's part
    assert pool.failures == {0: f"worker 0 on node {NODES[0]} failed: TimeoutError: did not answer the round in "
                                f"time -- after 2 of 4 requests (round 2)"}
    assert fake.now >= (10.0 + ray_pool.ROUND_SLACK_S) * 1e9                 # waited out the bound, no longer
    assert max(fake.waits) <= ray_pool.WAIT_S and fake.now < (10.0 + ray_pool.ROUND_SLACK_S + 1) * 1e9
    assert fake.killed[0] == 0


def test_the_driver_takes_the_ray_pool_over_every_node_up_to_a_request_of_each_round(monkeypatch):
    """Three nodes (workers: auto) at concurrency 2: two nodes send the rounds; the warm-up prompts
    prepared for every node are cut from the end (``planned_requests``), the rest are the rounds."""
    from pytest_llm_latency.client.placement.ray import cluster as ray_cluster

    made: list = []
    make, _ = fake_pool(lambda k, pos: 100)
    monkeypatch.setattr(ray_cluster, "node_count", lambda address: 3)  # three live nodes
    monkeypatch.setattr(ray_pool, "RayPool", lambda address, shards, creds, **kw: made.append(address) or
                        make(shards, creds, **kw))
    w = workload(workers="auto", concurrency=2, max_samples=10, min_samples=4)
    assert WorkerRounds(CLIENT).applies(w) and w.workers == "auto"
    samples = prompts(10 + 3)
    sent = WorkerRounds(CLIENT).send(None, samples, w, Run(), lambda records: None)
    assert made == ["127.0.0.1:6379"] and len(sent.load_run.workers) == 2
    assert len(sent.outcomes) <= 10 and sent.sequential.max_n == 10          # max_samples: the warm-ups cut off


def test_a_node_moves_its_round_records_to_the_drivers_timeline(monkeypatch):
    """Anchor (driver wall + the node's offset, driver monotonic) read at one instant: the node's
    monotonic at that instant maps to the driver's; every stamp moves by the difference, durations do not."""
    class Client:
        def stream(self, system, user, out, *, expected_prompt_tokens=None, extra=None):
            t = 7_000 * MS
            return RequestRecord(t_send_ns=t, t_first_byte_ns=t + 40 * MS, t_end_ns=t + 90 * MS,
                                 chunks=[TokenChunk(t + 40 * MS, 1), TokenChunk(t + 90 * MS, 1)])

    shard = round_shards(1, "t", [], 0, 2, output_tokens=2, extra=None)[0]
    actor = RoundActor()
    actor._prepared, actor._redact = PreparedShard(shard, Client(), lambda: None), str
    node_wall, node_mono = 50_000 * MS, 3_000 * MS                       # this node, when it reads its clocks
    monkeypatch.setattr(ray_pool.time, "time_ns", lambda: node_wall)
    monkeypatch.setattr(ray_pool, "MEASUREMENT_CLOCK", lambda: node_mono)
    # the driver: wall 49_990 ms + offset 4 ms at its monotonic 100_000 ms
    out = actor.round([(0, prompts(1)[0]), (1, prompts(2)[1])], "127.0.0.1/aaaa1111", (49_994 * MS, 100_000 * MS))
    shift = 100_000 * MS - (node_mono + (49_994 - 50_000) * MS)          # the node's 2_994 ms is the driver's 100_000
    assert shift == (100_000 - 2_994) * MS
    recs = [o for _, o in out.outcomes]
    assert [pos for pos, _ in out.outcomes] == [0, 1] and all(r.worker.endswith("@127.0.0.1/aaaa1111") for r in recs)
    assert all(r.t_send_ns == 7_000 * MS + shift and r.t_end_ns - r.t_send_ns == 90 * MS for r in recs)
    assert all([c.t_ns - r.t_send_ns for c in r.chunks] == [40 * MS, 90 * MS] for r in recs)
    node_mono = 9_999_999 * MS                                            # later rounds keep the first mapping
    again = actor.round([(2, prompts(3)[2])], "127.0.0.1/aaaa1111", (0, 0))
    assert again.outcomes[0][1].t_send_ns == 7_000 * MS + shift


def test_a_failing_round_on_a_node_is_redacted():
    shard = round_shards(1, "t", [], 0, 2, output_tokens=2, extra=None)[0]

    class Client:
        def stream(self, *a, **kw):
            raise RuntimeError("boom sk-secret-1")

    actor = RoundActor()
    actor._prepared = PreparedShard(shard, Client(), lambda: None)
    actor._redact = lambda s: s.replace("sk-secret-1", "***")
    with pytest.raises(RuntimeError) as e:
        actor.round([(0, prompts(1)[0])], "n", (0, 0))
    assert "boom ***" in str(e.value) and "sk-secret-1" not in str(e.value)
