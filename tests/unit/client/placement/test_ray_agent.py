"""Agent sessions on Ray nodes (``ray: ADDRESS``; ``client/agent/workers.py`` through
``client.placement.RayNodes.run`` to ``client/ray_shards.run_on_ray``) without a cluster: the sessions
dealt whole as for worker processes with the controller's ``/metrics`` scrape before the start, how
many nodes take them, a node's ``ShardActor`` running its agent shard from the start instant with
every record's stamps moved to the driver's timeline, and the sessions' own timings (per-turn
durations, tool pauses) unchanged by the move.  The cluster: tests/load/test_ray.py."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from pytest_llm_latency.client.placement.ray import cluster as ray_cluster, shards as ray_shards
from pytest_llm_latency.client.agent.loop import turn_of
from pytest_llm_latency.client.drivers.agent_session import session_shares
from pytest_llm_latency.client.agent.workers import make_agent_shards, run_on_workers
from pytest_llm_latency.client.transport.http import Timeouts, request_bound_s
from pytest_llm_latency.client.load.engine import LoadRun
from pytest_llm_latency.client.placement.ray.shards import ShardActor, shift_run
from pytest_llm_latency.client.placement.processes.shard import PreparedShard, WorkerTarget
from pytest_llm_latency.core.spec.workload import make_workload
from tests.unit.client.agent.test_agent_deal import SPEC, TARGET, FakeChat, prepared, run_worker

MS = 1_000_000
CLIENT = SimpleNamespace(base_url="http://127.0.0.1:9", model="m", timeouts=Timeouts(total_s=5), api="chat",
                         http=SimpleNamespace(headers={}))


def test_the_sessions_go_to_the_ray_nodes_dealt_whole_with_the_scrape_before_the_start(monkeypatch):
    calls: list = []
    monkeypatch.setattr(ray_shards, "run_on_ray", lambda address, shards, creds, **kw: calls.append(
        (address, shards, kw)) or LoadRun("open"))
    prep = prepared()
    prep.workload, prep.client = replace(prep.workload, ray="127.0.0.1:6379", workers="auto"), CLIENT
    scrape, progress = (lambda: None), (lambda done, total: None)
    run_on_workers(prep, 2, 3, progress=progress, on_ready=scrape)
    ((address, shards, kw),) = calls
    assert address == "127.0.0.1:6379"
    assert shards == make_agent_shards(prep, 2, WorkerTarget.of(CLIENT), 3)                # as for processes
    assert [s.deal.sessions for s in shards] == [(0, 2, 4), (1, 3)]        # session i on node i mod N
    assert kw["on_ready"] is scrape and kw["progress"] is progress
    assert kw["request_timeout_s"] == request_bound_s(CLIENT.timeouts)  # every try, its waits included


def test_every_node_takes_sessions_up_to_a_session_slot_and_a_session_each(monkeypatch):
    monkeypatch.setattr(ray_cluster, "node_count", lambda address: 3)
    on_ray = {**SPEC, "ray": "127.0.0.1:6379"}
    on_ray.pop("workers")
    assert session_shares(make_workload("s", {**on_ray, "concurrency": 2})).count == 2    # three nodes, two slots
    assert session_shares(make_workload("s", {**on_ray, "concurrency": 8, "samples": 8})).count == 3
    assert session_shares(make_workload("s", {**on_ray, "workers": 1})).count == 1       # one node, as given


def test_a_node_runs_its_agent_shard_from_the_start_instant_on_the_drivers_timeline(monkeypatch):
    prep = prepared()
    prep.plan = replace(prep.plan, pauses_ms=tuple((0.0,) * 3 for _ in range(5)))  # no tool time: no waiting
    shard = make_agent_shards(prep, 2, TARGET, concurrency=2)[1]
    chat = FakeChat()
    actor = ShardActor()
    actor._prepared, actor._redact = PreparedShard(shard, chat, lambda: None), str
    monkeypatch.setattr(ray_shards.time, "time_ns", lambda: 80_000 * MS)   # this node's wall clock ...
    monkeypatch.setattr(ray_shards, "MEASUREMENT_CLOCK", lambda: 0)        # ... and its monotonic, at one read
    t0_driver = 5_000_000 * MS
    # the start instant is now on this node (start_wall + offset = its wall): its t0 is its monotonic 0
    out = actor.run(80_000 * MS - 3 * MS, 3 * MS, t0_driver, "127.0.0.1/bbbb2222")
    assert sorted(pos for pos, _ in out.outcomes) == [3, 4, 5, 9, 10, 11]  # sessions 1 and 3, every turn
    assert all(o.worker.endswith("@127.0.0.1/bbbb2222") for _, o in out.outcomes)
    sends = sorted(o.t_send_ns for _, o in out.outcomes)
    assert sends == [t0_driver + n * MS for n in range(1, 7)]              # FakeChat's n-th stamp, moved by t0_driver
    assert [s.index for s in out.books["sessions"]] == [1, 3]


def test_moving_an_agent_shards_stamps_leaves_its_sessions_timings_as_measured():
    out, _ = run_worker(0, prepared(), FakeChat())
    before = {pos: turn_of(o, 0, 1) for pos, o in out.outcomes}
    sends = {pos: (o.t_send_ns, [c.t_ns for c in o.chunks], o.t_end_ns) for pos, o in out.outcomes}
    sessions = out.books["sessions"]
    pauses = [s.pauses_ms for s in sessions]
    moved = shift_run(out, 123_456 * MS)
    for pos, o in moved.outcomes:
        send, chunks, end = sends[pos]
        assert o.t_send_ns == send + 123_456 * MS and o.t_end_ns == end + 123_456 * MS
        assert [c.t_ns for c in o.chunks] == [t + 123_456 * MS for t in chunks]
        assert turn_of(o, 0, 1) == before[pos]                              # TTFT, E2E, tool-call times: durations
    assert moved.books["sessions"] is sessions
    assert [s.pauses_ms for s in sessions] == pauses == [1 + 2, 21 + 22, 41 + 42]   # tool time: durations too


def test_every_clock_stamp_of_a_record_is_moved_with_the_node_so_no_duration_changes():
    from dataclasses import fields

    from pytest_llm_latency.client.placement.processes.shard import ShardRun
    from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk

    stamps = [f.name for f in fields(RequestRecord) if f.name.startswith("t_") and f.name.endswith("_ns")]
    rec = RequestRecord(t_send_ns=0, chunks=[TokenChunk(50 * MS, 1, bound_ns=3 * MS)])
    for i, name in enumerate(stamps):
        setattr(rec, name, (i + 1) * MS)
    out = ShardRun(0, 1, "node0")
    out.outcomes = [(0, rec)]
    before = {name: getattr(rec, name) for name in stamps}
    moved = shift_run(out, 7 * MS).outcomes[0][1]
    assert {name: getattr(moved, name) - before[name] for name in stamps} == {name: 7 * MS for name in stamps}
    assert moved.chunks[0].t_ns == 57 * MS and moved.chunks[0].bound_ns == 3 * MS  # a bound is a duration
