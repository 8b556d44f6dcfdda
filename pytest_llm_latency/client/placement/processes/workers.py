"""Worker processes on one host (``workers: N``): the controller's side.

``run_workers`` spawns one process per ``Shard`` (``placement.deal``: worker ``k`` of ``N`` gets the scheduled
arrivals ``k, k+N, ...``, their offsets unchanged), hands each its ``Credentials`` apart (the pipe), starts them
on one ``CLOCK_MONOTONIC`` instant (``client.transport.clock``) and merges their exact records back into one
run, in schedule order.  Every wait is bounded: a worker that is not ready in time, dies, or does not finish
within the schedule's span + the request timeout + slack is killed and a ``worker_failures`` entry naming it
(an error: ``core.checks.measurement_validity.check_workers``).  See docs/load.md#worker-processes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ....core.measure.bunching import StallTimeline
from ....core.result.result import Failure
from ...transport.clock import MEASUREMENT_CLOCK
from ...load.engine import LoadRun
from .shard import Credentials, Shard, ShardRun, worker_main

#: the common start: this long after the last worker reported ready
START_DELAY_S = 0.5
#: a worker's start-up (a spawned interpreter importing the client) and warm-up, on top of its requests' timeout
READY_SLACK_S = 60.0
#: after the schedule's span and one request's timeout, how long a worker may still take to report
FINISH_SLACK_S = 30.0


# ---------------------------------------------------------------------- the controller's side
@dataclass
class WorkerInfo:
    """One worker as the result reports it (``load.worker_lag``)."""
    index: int
    name: str
    requests: int
    send_lag_ms_p99: float | None
    client_lag_ms_p99: float | None
    lag_ns: list[int] = field(default_factory=list, repr=False)       # its samples, for its own health
    send_lag_ns: list[int] = field(default_factory=list, repr=False)
    node: str | None = None                 # ray: the node it ran on (client/placement/ray/shards.py)
    clock_offset_ms: float | None = None    # ray: that node's wall clock minus the driver's
    clock_rtt_ms: float | None = None       # ray: the round trip the offset was estimated from

    def as_json(self) -> dict:
        out = {"worker": self.name, "index": self.index, "requests": self.requests,
               "send_lag_ms_p99": self.send_lag_ms_p99, "client_lag_ms_p99": self.client_lag_ms_p99}
        if self.node is not None:
            out.update(node=self.node, clock_offset_ms=self.clock_offset_ms, clock_rtt_ms=self.clock_rtt_ms)
        return out


def run_workers(shards: list[Shard], credentials: Credentials, *, span_s: float, request_timeout_s: float,
                clock=MEASUREMENT_CLOCK, progress: Callable[[int, int], None] | None = None,
                shared: Any = None, on_ready: Callable[[], None] | None = None) -> LoadRun:
    """Run ``shards`` in spawned processes (never a fork of the threaded test process) from one
    common start, and merge their exact records in schedule order into one ``LoadRun``.  ``shared``:
    a closed loop's books (``client.placement.processes.closed.SharedLoopState``, made by the caller in the
    spawn context), handed to each process as a start argument.  ``on_ready``: called once every
    worker is ready (warmed), before the common start is set (the ``/metrics`` "before" reading, so
    the workers' warm-ups are not counted in the run's deltas).  A worker lost before the start: no
    sample is sent; in a closed loop the first lost worker ends the wait (``pump``)."""
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    closed = shards[0].loop_plan if shards else None
    procs, conns = [], []
    for s in shards:  # every interpreter starts at once; then each gets its shard
        parent, child = ctx.Pipe()
        p = ctx.Process(target=worker_main, args=(child, shared), name=f"llm-latency-worker-{s.index}", daemon=True)
        p.start()
        child.close()
        procs.append(p)
        conns.append(parent)
    state = {k: "starting" for k in range(len(shards))}
    done_counts = [0] * len(shards)
    results: dict[int, ShardRun] = {}
    failures: dict[int, str] = {}
    total = closed.samples if closed is not None else sum(len(s.positions) for s in shards)

    def died(k: int) -> None:  # its pipe closed, or the process is gone
        procs[k].join(1.0)
        failures[k] = _named(k, procs[k], f"died with exit code {procs[k].exitcode}", done_counts[k],
                             shards[k].planned)

    def pump(deadline_ns: int, until: str) -> None:
        """Read messages until every live worker is in state ``until`` or the deadline.  A closed
        loop stops at the first failure: its workers share books and a lock the lost one may have
        held, so the others would wait on it until the deadline; they are killed (``finally``
        below) and the run is an error naming the lost one.  Elsewhere the others finish their own
        shards (their records are reported; the run is an error all the same)."""
        while True:
            live = [k for k in state if k not in failures and state[k] != until]
            if not live or (failures and shared is not None):
                return
            left = (deadline_ns - clock()) / 1e9
            if left <= 0:
                for k in live:
                    failures[k] = _named(k, procs[k], f"did not {'get ready' if until == 'ready' else 'finish'} in "
                                                      f"time", done_counts[k], shards[k].planned)
                return
            for c in wait([conns[k] for k in live], timeout=min(left, 0.2)):
                k = next(i for i, own in enumerate(conns) if own is c)
                try:
                    msg: Any = conns[k].recv()
                except (EOFError, OSError):
                    died(k)
                    continue
                if msg[0] == "ready":
                    state[k] = "ready"
                elif msg[0] == "progress":
                    done_counts[k] = msg[1]
                    if progress:
                        progress(sum(done_counts), total)
                elif msg[0] == "done":
                    results[k], state[k] = msg[1], "done"
                elif msg[0] == "error":
                    failures[k] = _named(k, procs[k], f"failed: {msg[1]}", done_counts[k], shards[k].planned)
            for k in live:  # a process gone without a word (killed before its pipe said EOF)
                if k not in failures and state[k] != until and not procs[k].is_alive() and not conns[k].poll():
                    died(k)

    try:
        for k, (s, conn) in enumerate(zip(shards, conns)):
            try:
                conn.send((s, credentials))  # the pipe: not argv, not the environment, never logged
            except OSError:  # it died before reading it
                died(k)
        pump(clock() + int((READY_SLACK_S + request_timeout_s * max(len(s.warm) for s in shards)) * 1e9), "ready")
        if failures:  # a worker lost before the start: no sample is sent, the run is an error naming it
            return merge(shards, results, failures)
        if on_ready is not None:  # every worker warmed: the pipeline's /metrics "before" reading
            on_ready()
        t0 = clock() + int(START_DELAY_S * 1e9)
        for k, c in enumerate(conns):
            try:
                c.send(("go", t0))
            except OSError:  # it died after "ready"
                died(k)
        pump(t0 + int((span_s + request_timeout_s + FINISH_SLACK_S) * 1e9), "done")
    finally:
        for k, p in enumerate(procs):
            if p.is_alive() and k not in results:
                if failures and k not in failures:  # stopped because another was lost (a closed loop)
                    failures[k] = _named(k, p, "was stopped when another worker was lost", done_counts[k],
                                         shards[k].planned)
                p.kill()  # hung, or never started: nothing of it is waited for
            p.join(5.0)
            conns[k].close()
    return merge(shards, results, failures)


def _named(k: int, proc, what: str, done: int, of: int) -> str:
    return f"worker {k} (pid {proc.pid}) {what} after {done} of {of} requests"


def merge(shards: list[Shard], results: dict[int, ShardRun], failures: dict[int, str]) -> LoadRun:
    """One ``LoadRun`` of the workers' exact records, in schedule order (a closed loop's: the order
    its prompts were drawn in, its ramp-up and drain exclusions summed), with each worker's lag."""
    closed = shards[0].loop_plan if shards else None
    run = LoadRun("open" if closed is None else "closed")

    def ordered(group: str) -> list:
        return [o for _, o in sorted(((pos, o) for r in results.values() for pos, o in getattr(r, group)),
                                     key=lambda pair: pair[0])]
    run.outcomes, run.ramp, run.drain = ordered("outcomes"), ordered("ramp"), ordered("drain")
    for k in sorted(results):
        r = results[k]
        run.lag_ns += r.lag_ns
        run.send_lag_ns += r.send_lag_ns
        run.window_ns = max(run.window_ns, r.window_ns)
        run.stopped = run.stopped or r.stopped
        run.workers.append(WorkerInfo(k, r.name, len(r.outcomes), _p99_ms(r.send_lag_ns), _p99_ms(r.lag_ns),
                                      r.lag_ns, r.send_lag_ns))
    stalls = [r.stalls for r in results.values() if r.stalls is not None]
    if stalls:
        run.lag_timeline = StallTimeline(tuple(sorted(x for s in stalls for x in s.stalls)), stalls[0].tick_ns,
                                         min(s.start_ns for s in stalls), max(s.end_ns for s in stalls))
    run.prompts_short = any(r.prompts_short for r in results.values())
    if run.stopped:
        run.unsent = max((sum(len(s.positions) for s in shards) if closed is None else closed.samples)
                         - len(run.outcomes), 0)
    if run.stopped and closed is not None:  # as one process: the excluded failures are the run's too
        run.outcomes += [o for r in results.values() if not r.stopped for _, o in r.ramp + r.drain
                         if isinstance(o, Failure)]
    run.worker_failures = [failures[k] for k in sorted(failures)]
    run.worker_books = [results[k].books for k in sorted(results) if results[k].books]
    run.warm_failures = sum(r.warm_failures for r in results.values())
    return run


def _p99_ms(values: list[int]) -> float | None:
    """p99 in ms as the client part computes its own (``client.drivers.load_report``:
    ``core.measure.stats.percentile``)."""
    from ....core.measure.stats import percentile

    return round(percentile(sorted(v / 1e6 for v in values), 99), 3) if values else None
