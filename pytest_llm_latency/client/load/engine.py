"""The load engine: a closed loop with ramp-up and steady-state measurement, and an open loop
on a seeded arrival schedule -- a thread per in-flight stream sends; where the connection has
kernel arrival stamps one read pump per process reads every body (``client/transport/read_pump.py``).
The engine watches its own health: ``LagMonitor`` records how late a thread of this process wakes (its
p99 bounds how wrong the client's timestamps can be), an open loop how late each request went out.
The design and its measurements: docs/load.md#the-clients-own-health.

Closed loop (``concurrency: C``): ``C`` workers start spread over ``ramp_up``; a request counts
only when it ran entirely at full concurrency: sent after the last worker's first request,
finished before the run stopped issuing.  The run stops issuing once ``samples`` such requests
are in (or after ``duration``); the requests still in flight then (the drain, at falling
concurrency) and the ramp-up ones are excluded and reported.

Open loop (``rate: R``): request ``i`` is due at ``t0 + offsets[i]`` (``core/spec/schedule.py``) and
its latency counts from that time (``RequestRecord.t_scheduled_ns``), sent or not.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeGuard, runtime_checkable

from ...core.measure.bunching import StallTimeline
from ...core.prompts.synthesis import Prompt
from ...core.measure.record import Clock, RequestRecord
from ...core.result.result import Failure, is_deterministic_rejection
from ...core.spec.schedule import Arrival, offsets
from ...core.spec.workload import Workload
from ..transport.clock import MEASUREMENT_CLOCK
from ..transport.recv_stamp import latest_kernel_stamped

#: ``send(prompt, t_scheduled_ns or None) -> RequestRecord | Failure``
Send = Callable[[Prompt, "int | None"], "RequestRecord | Failure"]
MAX_OPEN_LOOP_THREADS = 512
#: the GIL switch interval while streams run on reads stamped when they return, and (CPython's default)
#: with kernel arrival stamps: docs/load.md#the-clients-own-health
SWITCH_INTERVAL_S = 0.0005
KERNEL_STAMPED_SWITCH_INTERVAL_S = 0.005
#: how often ``LagMonitor`` wakes: a stall of the client this long or longer is always seen
LAG_TICK_S = 0.002
#: wake-ups at least this late are kept with their time (``LagMonitor.stalls``)
STALL_RECORD_NS = 100_000


@dataclass
class LoadRun:
    mode: str                                         # "closed" | "open"
    outcomes: list = field(default_factory=list)      # measured: RequestRecord | Failure
    ramp: list = field(default_factory=list)          # closed loop: excluded, before full concurrency
    drain: list = field(default_factory=list)         # closed loop: excluded, in flight when it stopped
    window_ns: int = 0                                # the measured window
    lag_ns: list[int] = field(default_factory=list)   # LagMonitor wake-up lateness
    lag_timeline: StallTimeline | None = None         # LagMonitor.timeline(): its stalls, on its clock
    send_lag_ns: list[int] = field(default_factory=list)  # open loop: thread start - due time
    stopped: str | None = None                        # why it stopped early (deterministic 4xx)
    unsent: int = 0                                   # requests never sent because of ``stopped``
    prompts_short: bool = False                       # ran out of prepared prompts
    # workers: N: one client.placement.processes.workers.WorkerInfo each
    workers: list = field(default_factory=list)
    worker_failures: list[str] = field(default_factory=list)  # a worker that died, hung or never got ready
    # a trace replay's, per worker (client/placement/processes/workers.py)
    worker_books: list[dict] = field(default_factory=list)
    warm_failures: int = 0                            # workers: N: their unmeasured warm-ups that failed


class LagMonitor:
    """A daemon thread that sleeps ``tick_s`` at a time and records how late it woke (ns):
    ``samples`` (every wake-up) and ``stalls``, ``(t_wake_ns, lag_ns)`` of each late one on
    ``clock``, the timeline ``core.measure.bunching`` sets a stream's bursts against."""

    def __init__(self, tick_s: float = LAG_TICK_S, clock: Clock = MEASUREMENT_CLOCK,
                 sleep: Callable[[float], None] = time.sleep):
        self.tick_s, self.clock, self.sleep = tick_s, clock, sleep
        self.samples: list[int] = []
        self.stalls: list[tuple[int, int]] = []
        self._span = [0, 0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llm-latency-lag", daemon=True)

    @property
    def tick_ns(self) -> int:
        return int(self.tick_s * 1e9)

    def timeline(self) -> StallTimeline:
        """The stalls with the span the monitor watched (``core.measure.bunching``)."""
        return StallTimeline(tuple(self.stalls), self.tick_ns, self._span[0], self._span[1])

    def _run(self) -> None:
        tick_ns = self.tick_ns
        while not self._stop.is_set():
            t = self.clock()
            self.sleep(self.tick_s)
            woke = self.clock()
            lag = max(woke - t - tick_ns, 0)
            self.samples.append(lag)
            if lag >= STALL_RECORD_NS:
                self.stalls.append((woke, lag))

    def __enter__(self) -> "LagMonitor":
        self._span[0] = self.clock()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._span[1] = self.clock()
        self._stop.set()
        self._thread.join(timeout=5.0)


def run_load(send: Send, prompts: list[Prompt], workload: Workload, *, seed: int = 0,
             clock: Clock = MEASUREMENT_CLOCK, sleep: Callable[[float], None] = time.sleep,
             progress: Callable[[int, int], None] | None = None) -> LoadRun:
    if workload.load is not None and workload.load.open_loop:
        due = open_loop_schedule(workload, seed)
        return _monitored(lambda: _open_loop(send, prompts, due, None, clock, sleep, progress), clock, sleep)
    return _monitored(lambda: _closed_loop(send, prompts, ClosedPlan.of(workload), clock, sleep, progress),
                      clock, sleep)


def run_schedule(send: Send, prompts: list[Prompt], due: list[float], t0_ns: int, *,
                 clock: Clock = MEASUREMENT_CLOCK, sleep: Callable[[float], None] = time.sleep,
                 progress: Callable[[int, int], None] | None = None) -> LoadRun:
    """The open loop on a schedule given from outside (a worker's shard, ``client/placement/processes/workers.py``):
    ``prompts[i]`` due at ``t0_ns + due[i]`` seconds on ``clock`` -- the same arithmetic as
    ``run_load``'s, so a shard's due times are exactly the whole schedule's."""
    return _monitored(lambda: _open_loop(send, prompts, due, t0_ns, clock, sleep, progress), clock, sleep)


def _monitored(body: Callable[[], LoadRun], clock: Clock, sleep) -> LoadRun:
    """``body`` under the lag monitor, with the short GIL switch interval where reads are stamped when
    they return (the connections warmed before it say which)."""
    switch = sys.getswitchinterval()
    kernel = latest_kernel_stamped()
    sys.setswitchinterval(KERNEL_STAMPED_SWITCH_INTERVAL_S if kernel else SWITCH_INTERVAL_S)
    try:
        with LagMonitor(clock=clock, sleep=sleep) as mon:
            run = body()
    finally:
        sys.setswitchinterval(switch)
    run.lag_ns, run.lag_timeline = list(mon.samples), mon.timeline()
    return run


def _stops(out: RequestRecord | Failure) -> TypeGuard[Failure]:
    return isinstance(out, Failure) and is_deterministic_rejection(out.kind)


@runtime_checkable
class Books(Protocol):
    """The one protocol of a closed loop's books, which its streams read and write under ``lock``:
    the next prompt (``next``), the streams started, the requests counted, when full concurrency
    began (``ramp_end``) and when issuing stopped (``t_stop``; ``stop``), with the no-ramp start
    ``barrier`` and ``all_started``.  Kept by the placement that runs the loop: ``LoopState`` (the
    threads of this process), ``client.placement.processes.closed.SharedLoopState`` (shared memory
    across worker processes), ``client.placement.ray.loop.NodeLoopState`` (a node's view of the
    ``LoopBooks`` actor)."""
    lock: Any
    barrier: Any
    all_started: Any
    next: int
    started: int
    counted: int
    ramp_end: int | None
    t_stop: int | None

    @property
    def stop(self) -> bool: ...


class LoopState:
    """``Books`` kept by the streams of one process (its threads)."""

    def __init__(self, concurrency: int):
        self.lock: Any = threading.Lock()
        self.barrier: Any = threading.Barrier(concurrency, timeout=30.0)
        self.all_started: Any = threading.Event()
        self.next = self.started = self.counted = 0
        self.ramp_end: int | None = None
        self.t_stop: int | None = None

    @property
    def stop(self) -> bool:
        return self.t_stop is not None


@dataclass(frozen=True)
class ClosedPlan:
    """What the closed loop needs of a workload: ``concurrency`` streams in all, ``samples`` to count,
    the ramp and duration; ``streams``: the stream numbers this process runs (None: all of them; a
    worker process runs its share, ``client/placement/processes/workers.py``)."""
    concurrency: int
    samples: int
    ramp_up_s: float = 0.0
    duration_s: float | None = None
    streams: tuple[int, ...] | None = None

    @classmethod
    def of(cls, workload: Workload) -> "ClosedPlan":
        load = workload.load
        return cls(workload.concurrency, workload.samples, load.ramp_up_s if load else 0.0,
                   load.duration_s if load and load.duration_s else None)


def run_closed(send: Send, prompts: list[Prompt], plan: ClosedPlan, state: Books, t0_ns: int, *,
               clock: Clock = MEASUREMENT_CLOCK, sleep: Callable[[float], None] = time.sleep,
               progress: Callable[[int, int], None] | None = None) -> LoadRun:
    """The closed loop's streams ``plan.streams`` of ``plan.concurrency``, from ``t0_ns``, keeping
    the books in ``state`` (shared with the other worker processes, ``client/placement/processes/workers.py``): the
    same loop as ``run_load``'s, so the steady-state window is decided across all of them."""
    return _monitored(lambda: _closed_loop(send, prompts, plan, clock, sleep, progress, state=state, t0=t0_ns),
                      clock, sleep)


def _closed_loop(send: Send, prompts: list[Prompt], plan: ClosedPlan, clock: Clock, sleep,
                 progress, *, state: Books | None = None, t0: int | None = None) -> LoadRun:
    c = plan.concurrency
    ramp_ns = int(plan.ramp_up_s * 1e9)
    duration_ns = int(plan.duration_s * 1e9) if plan.duration_s else None
    run = LoadRun("closed")
    st = LoopState(c) if state is None else state
    lock = st.lock
    stop_reason: list[Failure] = []
    t0 = clock() if t0 is None else t0

    def stop(now: int) -> None:
        if not st.stop:
            st.t_stop = now

    # no ramp: the first requests go out together (a barrier), and no worker sends a second one
    # before every worker has sent its first (else a fast server lets one worker run through
    # the prompts while the others start: all of it ramp-up)
    barrier = st.barrier if not ramp_ns else None
    all_started = st.all_started
    # prompts the ramp-up may use before the last worker starts; the rest are the samples' and
    # the drain's (a fast server would otherwise let the first workers spend them all)
    ramp_budget = max(len(prompts) - plan.samples - 2 * c, c)

    def worker(k: int) -> None:
        due = t0 + (ramp_ns * k) // c
        while (d := due - clock()) > 0 and not st.stop:
            sleep(min(d / 1e9, 0.05))
        if barrier is not None:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        first = True
        while True:
            with lock:
                ramp_spent = not first and st.ramp_end is None and st.next >= ramp_budget
            if ramp_spent:  # the ramp's share of the prompts is spent: wait for full concurrency
                all_started.wait(60.0)
            with lock:
                now = clock()
                if st.ramp_end is not None and duration_ns and now - st.ramp_end >= duration_ns:
                    stop(now)
                if st.stop or st.next >= len(prompts):
                    if not st.stop:
                        run.prompts_short = True
                        stop(now)
                    return
                p = prompts[st.next]
                st.next += 1
                steady = st.ramp_end is not None
                if first:
                    st.started += 1
                    if st.started == c:
                        st.ramp_end = now
                        all_started.set()
            out = send(p, None)
            if first and barrier is not None:
                all_started.wait(30.0)
            first = False
            with lock:
                now = clock()
                if _stops(out) and not st.stop:
                    stop_reason.append(out)
                    run.outcomes.append(out)
                    stop(now)
                    continue
                if steady and not st.stop:
                    run.outcomes.append(out)
                    st.counted += 1
                    if progress:
                        progress(len(run.outcomes), plan.samples)
                    if st.counted >= plan.samples:
                        stop(now)
                elif steady:
                    run.drain.append(out)
                else:
                    run.ramp.append(out)

    mine = list(range(c)) if plan.streams is None else list(plan.streams)
    with ThreadPoolExecutor(max_workers=max(len(mine), 1), thread_name_prefix="llm-latency-load") as pool:
        for f in [pool.submit(worker, k) for k in mine]:
            f.result()
    end = st.t_stop or clock()
    run.window_ns = max(end - (st.ramp_end or t0), 0)
    if stop_reason:
        run.stopped = stop_reason[0].kind
        run.unsent = max(plan.samples - len(run.outcomes), 0)
        run.outcomes += [o for o in run.ramp + run.drain if isinstance(o, Failure)]
    return run


def open_loop_schedule(workload: Workload, seed: int) -> list[float]:
    """The open loop's due offsets (s from its start): ``core.spec.schedule.offsets`` of the workload's load."""
    load = workload.load
    assert load is not None and load.rate is not None, "an open loop has a rate"
    return offsets(Arrival(load.rate, load.arrival, load.burstiness), seed=seed, n=workload.samples,
                   duration_s=load.duration_s)


def _open_loop(send: Send, prompts: list[Prompt], due: list[float], t0_ns: int | None, clock: Clock, sleep,
               progress) -> LoadRun:
    """Request ``i`` due at ``t0 + due[i]`` (``t0_ns``, else now)."""
    due = due[:len(prompts)]
    run = LoadRun("open")
    lock = threading.Lock()
    stop = threading.Event()
    ends: list[int] = []

    def task(p: Prompt, t_due: int) -> None:
        run.send_lag_ns.append(max(clock() - t_due, 0))
        if stop.is_set():
            return
        out = send(p, t_due)
        with lock:
            run.outcomes.append(out)
            ends.append(clock())
            if _stops(out) and not stop.is_set():
                run.stopped = out.kind
                stop.set()
            if progress:
                progress(len(run.outcomes), len(due))

    workers = min(max(len(due), 1), MAX_OPEN_LOOP_THREADS)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-latency-open") as pool:
        t0 = clock() if t0_ns is None else t0_ns
        for p, off in zip(prompts, due):
            t_due = t0 + int(off * 1e9)
            while (d := t_due - clock()) > 0 and not stop.is_set():
                sleep(min(d / 1e9, 0.05))
            if stop.is_set():
                break
            pool.submit(task, p, t_due)
    run.unsent = len(due) - len(run.outcomes) if run.stopped else 0
    run.window_ns = max((max(ends) if ends else clock()) - t0, 0)
    return run
