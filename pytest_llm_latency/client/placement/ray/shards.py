"""Shards on several hosts (``ray: ADDRESS``): the shards of ``client/placement/processes/workers.py`` -- an
open loop's schedule, a closed loop's streams (their books: ``client/placement/ray/loop.py``), a trace's or agent
sessions, whole (``client/agent/workers.py``) -- one ``ShardActor`` per Ray node, each in a ``{CPU: 1}`` bundle of
a ``STRICT_SPREAD`` placement group, given its ``Credentials`` only as an object reference inside a list (which Ray
does not resolve: a task's arguments show an object id, never the key).  The nodes start on one wall-clock instant
(each node's clock offset: the shortest of ``CLOCK_SAMPLES`` round trips) and their records' stamps are moved to
the driver's timeline; a lost node is a ``worker_failures`` entry naming it.  ``reserve``, ``start_actors``,
``release`` and ``shift_run`` are shared with ``client/placement/ray/pool.py``.  See
docs/load.md#several-hosts-on-ray (the clock offset, a lost node, credentials).
"""
from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import fields, replace
from typing import Any, Callable
from urllib.parse import urlsplit

from ....core.errors import ConfigError
from ....core.result.result import Failure
from ...transport.clock import MEASUREMENT_CLOCK
from ...load.engine import Books, LoadRun
from ....core.hosts import is_loopback
from .cluster import alive_nodes, connect
from ..processes.shard import Credentials, Shard, ShardRun
from ..processes.workers import FINISH_SLACK_S, READY_SLACK_S, merge

#: round trips per node to estimate its clock offset (the shortest one's estimate is kept)
CLOCK_SAMPLES = 5
#: the common start: this long after every node reported ready (Ray calls take milliseconds)
START_DELAY_S = 1.0
#: how long the placement group may take to get one bundle on each node
PLACEMENT_TIMEOUT_S = 60.0
#: how often the driver reads the nodes' request counts for the progress line while they run
PROGRESS_S = 0.25


def check_reachable(url: str, nodes: list[dict]) -> None:
    """A target on the driver's loopback (``reference://`` or ``http://127.0.0.1:...``) is reachable
    from the nodes only when they all are on this host's loopback too."""
    host = urlsplit(url).hostname
    if is_loopback(host):
        far = sorted({n.get("NodeManagerAddress", "?") for n in nodes} - {"127.0.0.1", "localhost", "::1"})
        if far:
            raise ConfigError(f"target {url} is on the driver's loopback, which the Ray nodes at {', '.join(far)} "
                              f"cannot reach -- start the server (or the reference target: "
                              f"`pytest-llm-latency serve-reference --host ADDRESS`) on an address the nodes can "
                              f"reach and give that URL, or run without ray (workers: N on this host)")


class ShardActor:
    """One node's shard (made a Ray actor by ``_actor_class``): clock readings, then prepare, then run;
    ``done``, its requests so far, answers while it runs (a second thread of the actor)."""
    _done = 0

    def done(self) -> int:
        return self._done

    def where(self) -> tuple[int, str, str]:
        import ray

        ctx = ray.get_runtime_context()
        return os.getpid(), ctx.get_node_id(), ray.util.get_node_ip_address()

    def clock(self) -> int:
        return time.time_ns()

    def prepare(self, shard: Shard, boxed_credentials: list) -> int:
        import ray

        from ...transport.http import Redactor
        from ..processes.shard import prepare_shard

        credentials: Credentials = ray.get(boxed_credentials[0])
        self._redact = Redactor(credentials.secrets)
        try:
            self._prepared = prepare_shard(shard, credentials)
        except Exception as exc:  # the message redacted, never the credentials
            raise RuntimeError(self._redact(f"{type(exc).__name__}: {exc}")) from None
        return self._prepared.warm_failures

    def run(self, start_wall_ns: int, offset_ns: int, t0_driver_ns: int, name: str, books: Any = None) -> ShardRun:
        """Run from the start instant; ``books``: a closed loop's ``LoopBooks`` actor
        (``client/placement/ray/loop.py``)."""
        from ..processes.shard import run_shard

        wall, mono = time.time_ns(), MEASUREMENT_CLOCK()
        t0 = mono + (start_wall_ns + offset_ns - wall)  # this node's monotonic at the start instant
        try:
            with self._books(books, t0_driver_ns - t0) as state:
                out = run_shard(self._prepared, t0, host=name, shared=state,
                                progress=lambda done: setattr(self, "_done", done))
        except Exception as exc:
            raise RuntimeError(self._redact(f"{type(exc).__name__}: {exc}")) from None
        finally:
            self._prepared.close()
        return shift_run(out, t0_driver_ns - t0)

    def _books(self, books: Any, shift_ns: int) -> Any:
        """A closed loop's ``NodeLoopState`` on ``books`` (its watcher running inside the ``with``)."""
        shard = self._prepared.shard
        if books is None or shard.loop_plan is None:
            return contextlib.nullcontext()
        import ray

        from .loop import NodeLoopState, ray_calls

        call, cast = ray_calls(ray, books)
        state: Books = NodeLoopState(call, cast, shard.loop_plan, prompts=len(shard.prompts), nodes=shard.workers,
                             shift_ns=shift_ns, clock=MEASUREMENT_CLOCK)
        return state


def shift_run(run: ShardRun, delta: int) -> ShardRun:
    """``run`` with every clock stamp moved by ``delta`` ns (a node's monotonic to the driver's)."""
    for group in ("outcomes", "ramp", "drain"):  # a closed loop's exclusions: records too
        setattr(run, group, [(pos, _shift(o, delta)) for pos, o in getattr(run, group)])
    if run.stalls is not None:
        s = run.stalls
        run.stalls = replace(s, stalls=tuple((t + delta, lag) for t, lag in s.stalls), start_ns=s.start_ns + delta,
                             end_ns=s.end_ns + delta)
    return run


_STAMPS = ("t_send_ns", "t_first_byte_ns", "t_end_ns", "t_submit_ns", "t_connect_ns", "t_connected_ns",
           "t_scheduled_ns", "t_last_ns", "t_written_ns")


def _shift(o: Any, delta: int) -> Any:
    moved = {f.name: getattr(o, f.name) + delta for f in fields(o)
             if f.name in _STAMPS and getattr(o, f.name) is not None}
    if isinstance(o, Failure):
        return replace(o, **moved)
    for k, v in moved.items():
        setattr(o, k, v)
    o.chunks = [replace(c, t_ns=c.t_ns + delta) for c in o.chunks]
    o.tool_deltas = [(t + delta, *rest) for t, *rest in o.tool_deltas]
    return o


def _actor_class(ray):
    # two threads: ``done`` answers while ``run`` runs (nothing else is ever called concurrently)
    return ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0, max_concurrency=2)(ShardActor)


def measure_offset(ray, actor) -> tuple[int, int]:
    """``(offset_ns, rtt_ns)`` of the actor's node's wall clock against this one's: the estimate of
    the round trip that took the shortest of ``CLOCK_SAMPLES``."""
    best: tuple[int, int] | None = None
    for _ in range(CLOCK_SAMPLES):
        t_send = time.time_ns()
        remote = ray.get(actor.clock.remote(), timeout=READY_SLACK_S)  # bounded: a silent node is named
        t_recv = time.time_ns()
        rtt = t_recv - t_send
        if best is None or rtt < best[1]:
            best = (remote - (t_send + t_recv) // 2, rtt)
    assert best is not None
    return best


def run_on_ray(address: str, shards: list[Shard], credentials: Credentials, *, span_s: float,
               request_timeout_s: float, clock=MEASUREMENT_CLOCK,
               progress: Callable[[int, int], None] | None = None,
               on_ready: Callable[[], None] | None = None) -> LoadRun:
    """Run ``shards`` one per Ray node (``STRICT_SPREAD``) from one wall-clock start and merge their
    exact records (on the driver's timeline) in schedule order into one ``LoadRun``: an open loop's
    schedule, a closed loop's streams (their books in a ``LoopBooks`` actor, ``client/placement/ray/loop.py``),
    a trace's sessions or agent sessions (``client/agent/workers.py``: whole sessions, their books).
    ``progress(done, total)``: the nodes' counts, polled while they run; ``on_ready``: called once
    every node is ready (warmed), before the start is set (agent sessions scrape ``/metrics`` there)."""
    ray = connect(address)
    from ray.exceptions import GetTimeoutError, RayError

    n = len(shards)
    closed = shards[0].loop_plan
    books = None
    pg = None
    failures: dict[int, str] = {}
    results: dict[int, ShardRun] = {}
    names: dict[int, str] = {}
    offsets: dict[int, tuple[int, int]] = {}
    actors: list = []
    book: dict = {}
    try:
        if closed is not None:  # its process starts while the placement is made
            from .loop import books_actor

            books = books_actor(ray, closed, len(shards[0].prompts), n)
        pg = reserve(ray, address, n, shards[0].target.url)
        actors = start_actors(ray, _actor_class(ray), pg, shards, credentials, request_timeout_s=request_timeout_s,
                              names=names, offsets=offsets, failures=failures)
        if books is not None:  # up before the start: a node's first lease is not late
            try:
                ray.get(books.books.remote(), timeout=READY_SLACK_S)
            except (RayError, GetTimeoutError) as exc:
                why = RuntimeError(f"the closed loop's books (a LoopBooks actor) did not start: {type(exc).__name__}")
                failures.update({k: _lost(k, names.get(k), why, 0, shards[k].planned) for k in range(n)})
        if failures:  # a node lost before the start: no sample is sent, the run is an error naming it
            return merge(shards, results, failures)
        if on_ready is not None:  # every node warmed: the pipeline's /metrics "before" reading
            on_ready()
        wall_now, mono_now = time.time_ns(), clock()
        start_wall = wall_now + int(START_DELAY_S * 1e9)
        t0_driver = mono_now + (start_wall - wall_now)
        running = {actors[k].run.remote(start_wall, offsets[k][0], t0_driver, names[k], books): k
                   for k in range(n) if k not in failures}
        total = closed.samples if closed is not None else sum(len(s.positions) for s in shards)
        deadline = time.monotonic() + START_DELAY_S + span_s + request_timeout_s + FINISH_SLACK_S
        collect(ray, running, actors, deadline, results, failures,
                lambda k, exc, done: _lost(k, names[k], exc, done, shards[k].planned),
                None if progress is None else lambda done: progress(min(done, total), total))
        if books is not None:
            with contextlib.suppress(RayError, GetTimeoutError):  # the books are with every node's failure
                book = ray.get(books.books.remote(), timeout=READY_SLACK_S)
    finally:
        release(ray, [*actors, *([books] if books is not None else [])], pg)
    run = merge(shards, results, failures)
    if closed is not None:
        from .loop import settle

        run = settle(run, book, closed.samples)
    return describe_nodes(run, names, offsets)


def reserve(ray, address: str, n: int, url: str) -> Any:
    """A ready ``STRICT_SPREAD`` placement group of ``n`` ``{CPU: 1}`` bundles, one per node (a
    bounded wait); a ``ConfigError`` when the cluster has fewer nodes or the target is on a loopback
    the nodes cannot reach."""
    from ray.exceptions import GetTimeoutError
    from ray.util.placement_group import placement_group, remove_placement_group

    nodes = alive_nodes(ray)
    check_reachable(url, nodes)
    if n > len(nodes):
        raise ConfigError(f"ray: {address}: {n} workers need {n} nodes (one shard per node, STRICT_SPREAD), the "
                          f"cluster has {len(nodes)} with a free CPU -- give workers: {len(nodes)} or workers: auto")
    pg = placement_group([{"CPU": 1}] * n, strategy="STRICT_SPREAD", name="")
    try:
        ray.get(pg.ready(), timeout=PLACEMENT_TIMEOUT_S)
    except GetTimeoutError:
        remove_placement_group(pg)
        raise ConfigError(f"ray: {address}: no placement of {n} CPU bundles on {n} distinct nodes within "
                          f"{PLACEMENT_TIMEOUT_S:.0f} s (STRICT_SPREAD; are {n} nodes free?)") from None
    return pg


def start_actors(ray, cls: Any, pg: Any, shards: list[Shard], credentials: Credentials, *, request_timeout_s: float,
                 names: dict[int, str], offsets: dict[int, tuple[int, int]], failures: dict[int, str]) -> list:
    """One actor of ``cls`` (a ``ShardActor``) in bundle ``k`` of ``pg`` for each shard ``k``: its node
    named (``names``), its clock offset measured (``offsets``), its shard prepared and warmed -- each a
    bounded wait; a node that fails one of them is in ``failures``, naming it."""
    from ray.exceptions import GetTimeoutError, RayError
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    actors = [cls.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=k)).remote() for k in range(len(shards))]
    cred_ref = ray.put(credentials)
    ready = {}
    for k, a in enumerate(actors):
        try:
            pid, node_id, ip = ray.get(a.where.remote(), timeout=READY_SLACK_S)
            names[k] = f"{ip}/{node_id[:8]}"  # in records and errors: its address, its Ray node id's start
            offsets[k] = measure_offset(ray, a)
            ready[k] = a.prepare.remote(shards[k], [cred_ref])
        except (RayError, GetTimeoutError) as exc:
            failures[k] = _lost(k, names.get(k), exc, 0, shards[k].planned)
    for k, ref in ready.items():
        try:
            ray.get(ref, timeout=READY_SLACK_S + request_timeout_s * max(len(s.warm) for s in shards))
        except (RayError, GetTimeoutError) as exc:
            failures[k] = _lost(k, names.get(k), exc, 0, shards[k].planned)
    return actors


def release(ray, actors: list, pg: Any) -> None:
    """Kill ``actors`` (those already gone with their node are skipped) and remove ``pg``."""
    for a in actors:
        with contextlib.suppress(Exception):  # already gone with its node
            ray.kill(a)
    if pg is not None:
        from ray.util.placement_group import remove_placement_group

        with contextlib.suppress(Exception):
            remove_placement_group(pg)


def describe_nodes(run: LoadRun, names: dict[int, str], offsets: dict[int, tuple[int, int]]) -> LoadRun:
    """Each worker of ``run`` with its node and that node's clock offset and round trip (``load.worker_lag``)."""
    for info in run.workers:
        info.node = names.get(info.index)
        off, rtt = offsets.get(info.index, (None, None))
        info.clock_offset_ms = None if off is None else round(off / 1e6, 3)
        info.clock_rtt_ms = None if rtt is None else round(rtt / 1e6, 3)
    return run


def collect(ray, running: dict, actors: list, deadline: float, results: dict[int, ShardRun], failures: dict[int, str],
            lost: Callable[[int, BaseException, "int | None"], str], progress: Callable[[int], None] | None) -> None:
    """Wait for the shards' runs (``running``: run ref -> shard index) until ``deadline`` (``time.monotonic``):
    each into ``results``, or into ``failures`` (``lost``: the message naming its node) when it failed, its
    node died or it did not finish in time.  Every ``PROGRESS_S`` the running shards' ``done`` counters
    are read (a bounded wait; a lost one keeps its last count) and ``progress`` gets their sum."""
    RayError, GetTimeoutError = ray.exceptions.RayError, ray.exceptions.GetTimeoutError
    done_counts: dict[int, int] = {}
    while running:
        left = deadline - time.monotonic()
        ready, _ = ray.wait(list(running), num_returns=1, timeout=max(min(left, PROGRESS_S), 0))
        if ready:
            k = running.pop(ready[0])
            try:
                results[k] = ray.get(ready[0])
                done_counts[k] = len(results[k].outcomes)
            except RayError as exc:
                failures[k] = lost(k, exc, done_counts.get(k))
        elif left <= PROGRESS_S:
            for k in running.values():
                failures[k] = lost(k, TimeoutError("did not finish in time"), done_counts.get(k))
            return
        if progress is None or not running:
            continue
        live = list(running.values())
        for k, ref in zip(live, [actors[k].done.remote() for k in live]):
            with contextlib.suppress(RayError, GetTimeoutError):
                done_counts[k] = ray.get(ref, timeout=PROGRESS_S)
        progress(sum(done_counts.values()))
    if progress is not None:
        progress(sum(done_counts.values()))


def _lost(k: int, node: str | None, exc: BaseException, done: int | None, of: int, *, dead: bool | None = None) -> str:
    """A worker failure naming the node; the exception's first line only (Ray's carry tracebacks).
    ``dead``: whether its actor died (default: ``exc`` is Ray's ``RayActorError``)."""
    if dead is None:
        from ray.exceptions import RayActorError

        dead = isinstance(exc, RayActorError)
    cause = getattr(exc, "cause", None)  # a task's own exception under Ray's wrapper, whose first line is a header
    if not dead and isinstance(cause, BaseException):
        exc = cause
    where = f"on node {node}" if node else "(no node yet)"
    what = "lost (its node or actor died)" if dead else "failed"
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # Ray colours its task names
    first = (text.splitlines() or [type(exc).__name__])[0][:300]
    count = f"before reporting its {of} requests" if done is None else f"after {done} of {of} requests"
    return f"worker {k} {where} {what}: {type(exc).__name__}: {first} -- {count}"
