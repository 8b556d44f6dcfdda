"""A closed loop on Ray nodes (``ray: ADDRESS`` with ``concurrency: C``, ``client/placement/ray/shards.py``): the
loop's books kept by one small actor, ``LoopBooks`` (the nodes share no memory; its stamps on the driver's
timeline), and on each node ``NodeLoopState``, the ``client.load.engine.Books`` its streams run the engine's own
loop on (``client.load.engine.run_closed``), calling the actor rarely: prompts leased in blocks, first draws
cast, counts reported in batches, a watcher thread per node waiting on the books (``watch``).  ``settle`` puts
the merged run on the books' one steady-state window.  The block and batch sizes, and what a node learns late:
docs/load.md#several-hosts-on-ray (a closed loop on Ray).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable

from ...load.engine import ClosedPlan, LoadRun

#: how long one ``watch`` call waits on the books before it asks again
WATCH_S = 2.0
#: a call on the books that takes longer than this (plus its own wait) is a lost actor
CALL_TIMEOUT_S = 30.0


class LoopBooks:
    """The closed loop's books for every node (a threaded Ray actor: ``books_actor``; a plain object
    in the unit tests).  Every stamp it is given or gives is on the driver's timeline."""

    def __init__(self, concurrency: int, samples: int, prompts: int, nodes: int):
        self.cond = threading.Condition()
        self.concurrency, self.samples, self.prompts, self.nodes = concurrency, samples, prompts, max(nodes, 1)
        self.next = 0
        self.starts: list[int] = []
        self.counted = 0
        self.latest = 0                  # the latest stamp a count carried
        self.ramp_end: int | None = None
        self.t_stop: int | None = None
        self.why: str | None = None      # "samples" | "short" (prompts ran out) | "stop" (duration, rejection)
        self.calls = 0

    def lease(self, want: int) -> tuple[int, int]:
        """The next prompt indices ``[lo, hi)`` (``lo == hi``: none left)."""
        with self.cond:
            self.calls += 1
            if self.ramp_end is not None:
                want = max(want, (self.prompts - self.next) // (2 * self.nodes))
            lo = self.next
            self.next = min(self.prompts, lo + max(want, 1))
            return lo, self.next

    def start(self, stamp: int) -> None:
        """A stream drew its first prompt at ``stamp``; the last one of all ``C`` begins full concurrency."""
        with self.cond:
            self.calls += 1
            self.starts.append(stamp)
            if len(self.starts) == self.concurrency:
                self.ramp_end = max(self.starts)
                self.cond.notify_all()

    def count(self, n: int, stamp: int) -> tuple[int, int | None]:
        """``n`` more requests counted by ``stamp``; the books' count and ``t_stop``."""
        with self.cond:
            self.calls += 1
            self.counted += n
            self.latest = max(self.latest, stamp)
            if self.counted >= self.samples:
                self._stop(self.latest, "samples")
            return self.counted, self.t_stop

    def stop(self, stamp: int, why: str) -> None:
        with self.cond:
            self.calls += 1
            self._stop(stamp, why)

    def _stop(self, stamp: int, why: str) -> None:
        if self.t_stop is None:
            self.t_stop, self.why = stamp, why
            self.cond.notify_all()

    def watch(self, knows_ramp: bool, knows_stop: bool, timeout_s: float) -> tuple[int | None, int | None]:
        """``(ramp_end, t_stop)`` once either is set and the caller does not know it yet, or after ``timeout_s``."""
        with self.cond:
            self.calls += 1
            self.cond.wait_for(lambda: (self.ramp_end is not None and not knows_ramp)
                               or (self.t_stop is not None and not knows_stop), timeout=timeout_s)
            return self.ramp_end, self.t_stop

    def books(self) -> dict:
        with self.cond:
            return {"ramp_end": self.ramp_end, "t_stop": self.t_stop, "why": self.why, "counted": self.counted,
                    "next": self.next, "started": len(self.starts), "calls": self.calls}


def books_actor(ray, plan: ClosedPlan, prompts: int, nodes: int) -> Any:
    """The ``LoopBooks`` actor, on the driver's node where Ray says which it is (a lost client node
    never takes the books with it; a hard affinity: Ray 2.x places a zero-CPU actor of a soft one on
    any node); no CPU of the shards' bundles; one thread per waiting node and more."""
    opts: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 4 * nodes + 8, "max_restarts": 0}
    with contextlib.suppress(Exception):  # a Ray client driver has no node of its own: anywhere
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                                     soft=False)
    return ray.remote(LoopBooks).options(**opts).remote(plan.concurrency, plan.samples, prompts, nodes)


def ray_calls(ray, books) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(call, cast)`` on the books actor: a bounded call waiting for its answer, and one that does not."""
    def call(method: str, *args):
        wait = args[-1] if method == "watch" else 0.0
        return ray.get(getattr(books, method).remote(*args), timeout=CALL_TIMEOUT_S + wait)

    def cast(method: str, *args) -> None:
        getattr(books, method).remote(*args)
    return call, cast


class NodeLoopState:
    """``client.load.engine.LoopState`` on one node: its streams' lock, barrier (the node's streams; the
    nodes start on one instant) and ``all_started``; ``next``, ``started``, ``counted``,
    ``ramp_end`` and ``t_stop`` kept from the books (``call``/``cast``: ``ray_calls``), on this node's
    clock (``shift_ns``: this node's monotonic to the driver's timeline)."""

    def __init__(self, call: Callable[..., Any], cast: Callable[..., Any], plan: ClosedPlan, *, prompts: int,
                 nodes: int, shift_ns: int, clock: Callable[[], int]):
        streams = len(plan.streams or ()) or plan.concurrency
        self.lock: Any = threading.Lock()
        self.barrier: Any = threading.Barrier(streams, timeout=30.0)
        self.all_started: Any = threading.Event()
        self._call, self._cast, self._clock, self._shift = call, cast, clock, shift_ns
        self._want, self._samples, self._nodes, self._prompts = streams, plan.samples, max(nodes, 1), prompts
        self._lo, self._hi = call("lease", streams)  # before the start: off the first requests' path
        self._exhausted = self._lo >= self._hi
        self._started = self._known = self._unreported = 0
        self.ramp_end: int | None = None  # the books' (or, one node running every stream, the loop's own)
        self._t_stop: int | None = None
        self._closing = threading.Event()
        self._error: BaseException | None = None
        self._watcher = threading.Thread(target=self._watch, name="llm-latency-books", daemon=True)

    # the names client.load.engine._closed_loop reads and writes, under ``lock``
    @property
    def next(self) -> int:
        if self._lo >= self._hi and not self._exhausted:
            self._lo, self._hi = self._call("lease", self._want if self.ramp_end is None else 1)
            self._exhausted = self._lo >= self._hi
        return self._prompts if self._exhausted and self._lo >= self._hi else self._lo

    @next.setter
    def next(self, value: int) -> None:
        self._lo = value

    @property
    def started(self) -> int:
        return self._started

    @started.setter
    def started(self, value: int) -> None:
        self._started = value
        self._cast("start", self._clock() + self._shift)

    @property
    def counted(self) -> int:
        return self._known + self._unreported

    @counted.setter
    def counted(self, value: int) -> None:
        self._unreported = value - self._known
        if self._unreported >= max(self._want, (self._samples - self._known) // (2 * self._nodes)):
            self._report(self._clock() + self._shift)

    @property
    def t_stop(self) -> int | None:
        return self._t_stop

    @t_stop.setter
    def t_stop(self, value: int | None) -> None:
        if value is None or self._t_stop is not None:
            return
        # the count first: the samples may be in already (the books stop there)
        if self._unreported and self._report(value + self._shift):
            return
        self._t_stop = value
        self.all_started.set()  # nothing more to wait for
        self._cast("stop", value + self._shift, "short" if self._exhausted else "stop")

    @property
    def stop(self) -> bool:
        return self._t_stop is not None

    def _report(self, stamp: int) -> bool:
        """The unreported count to the books at ``stamp`` (the driver's timeline); did they stop?"""
        self._known, t_stop = self._call("count", self._unreported, stamp)
        self._unreported = 0
        if t_stop is not None:
            self._learn(None, t_stop)
        return t_stop is not None

    # the watcher
    def _learn(self, ramp_end: int | None, t_stop: int | None) -> None:
        """What the books said, moved to this node's clock (the caller holds ``lock`` or is the loop)."""
        if ramp_end is not None and self.ramp_end is None:
            self.ramp_end = ramp_end - self._shift
        if t_stop is not None and self._t_stop is None:
            self._t_stop = t_stop - self._shift
        if self.ramp_end is not None or self._t_stop is not None:
            self.all_started.set()  # full concurrency, or nothing more to wait for

    def _watch(self) -> None:
        try:
            while not self._closing.is_set() and self._t_stop is None:
                ramp_end, t_stop = self._call("watch", self.ramp_end is not None, self._t_stop is not None, WATCH_S)
                with self.lock:
                    self._learn(ramp_end, t_stop)
        except BaseException as exc:  # the books are gone: the node's streams must not wait on them
            self._error = exc
            self.all_started.set()

    def __enter__(self) -> "NodeLoopState":
        self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closing.set()
        self._watcher.join(WATCH_S + CALL_TIMEOUT_S)
        if self._error is not None and exc[0] is None:
            raise RuntimeError(f"the closed loop's books were lost: {type(self._error).__name__}: "
                               f"{self._error}") from None


def settle(run: LoadRun, books: dict, samples: int) -> LoadRun:
    """The merged closed loop of every node (``client.placement.processes.workers.merge``) on the books' one
    steady-state
    window: a request a node counted after ``t_stop`` (it heard of the stop late), or beyond the
    first ``samples`` to end, goes to the drain; ``window_ns`` runs from ``ramp_end`` to ``t_stop``
    (the stop at ``samples``: the last measured end).  A run stopped by a rejection stays as merged."""
    ramp_end, t_stop = books.get("ramp_end"), books.get("t_stop")
    run.prompts_short = books.get("why") == "short"
    if run.stopped or ramp_end is None or t_stop is None:
        return run

    def end(o) -> int:  # a failure never stamped at its end: at its send, else the stop (never first in line)
        return next((t for t in (o.t_end_ns, getattr(o, "t_send_ns", None)) if t is not None), t_stop)
    inside = [o for o in run.outcomes if end(o) <= t_stop]
    kept = {id(o) for o in sorted(inside, key=end)[:samples]}
    run.drain = run.drain + [o for o in run.outcomes if id(o) not in kept]
    run.outcomes = [o for o in run.outcomes if id(o) in kept]
    for info in run.workers:  # each node's measured requests, as settled
        info.requests = sum(1 for o in run.outcomes if o.worker == info.name)
    run.prompts_short = run.prompts_short and len(run.outcomes) < samples  # short of prompts, and of samples
    last = max((end(o) for o in run.outcomes), default=t_stop) if books.get("why") == "samples" else t_stop
    run.window_ns = max(min(last, t_stop) - ramp_end, 0)
    return run
