"""A persistent pool of worker processes sending rounds (``samples: auto`` with ``workers: N``).

``WorkerPool`` spawns ``N`` processes; each receives its pure-data ``Shard`` and, apart, its ``Credentials`` (the
pipe), prepares and warms its own client once (``shard.prepare_shard``), reports ready, then takes commands:
``("round", [(position, prompt), ...])`` -- send these all at once, each on a thread of its own, and answer with
their exact records and the round's lag -- and ``("stop",)``.  ``deal_round`` / ``merge_round`` deal a round over
the workers and put the answers back in prompt order (``drivers.worker_rounds`` judges them as one process's).
Every wait is bounded; a lost worker is killed and named in ``failures``.  See docs/load.md#worker-processes.
"""
from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import Any, Callable

from ....core.measure.bunching import StallTimeline
from ....core.prompts.synthesis import Prompt
from ....core.result.result import sent_by
from ...transport.clock import MEASUREMENT_CLOCK
from ...load.engine import LoadRun
from ..deal import deal
from .shard import TEST_EXIT_CODE, Credentials, Shard, ShardRun, exit_hook_after, prepare_shard
from .workers import READY_SLACK_S, _named

#: after one request's bound, how long a worker may still take to answer a round
ROUND_SLACK_S = 30.0
#: how long a worker may take to leave after ``stop`` before it is killed
STOP_WAIT_S = 5.0


def deal_round(start: int, batch: list[Prompt], workers: int) -> list[list[tuple[int, Prompt]]]:
    """A round's ``batch`` (prompts ``start, start+1, ...`` of the run) over ``workers``
    (``placement.deal``: worker ``k`` gets the round's prompts ``k, k+N, ...``) with their positions."""
    return deal(list(enumerate(batch, start)), workers)


def merge_round(answers: list[list[tuple[int, Any]]]) -> list:
    """The workers' ``(position, outcome)`` answers of one round, in prompt order."""
    return [o for _, o in sorted((pair for a in answers for pair in a), key=lambda pair: pair[0])]


class WorkerPool:
    """``N`` spawned worker processes, prepared and warmed once, sending rounds on command.
    Use as a context manager: entering starts them (bounded), leaving stops them (killing any that
    does not leave).  ``runs``: each live worker's ``ShardRun`` over the rounds so far (its records
    with their positions, its lag samples and stalls); ``failures``: index -> why it was lost."""

    def __init__(self, shards: list[Shard], credentials: Credentials, *, request_timeout_s: float,
                 clock=MEASUREMENT_CLOCK, target: Callable[[Any], None] | None = None, ctx: Any = None):
        self.shards, self.credentials, self.clock = shards, credentials, clock
        self.request_timeout_s = request_timeout_s
        self.target = target or pool_worker_main   # the worker's body (tests inject one)
        self.ctx = ctx                             # the multiprocessing context (default: spawn)
        self.procs: list[Any] = []
        self.conns: list[Any] = []
        self.runs: dict[int, ShardRun] = {}
        self.failures: dict[int, str] = {}
        self.dealt = [0] * len(shards)   # requests handed to each worker so far
        self.rounds = 0

    # ------------------------------------------------------------------ start and stop
    def __enter__(self) -> "WorkerPool":
        import multiprocessing

        ctx = self.ctx or multiprocessing.get_context("spawn")  # never a fork of the threaded test process
        try:
            for s in self.shards:  # every interpreter starts at once; then each gets its shard
                parent, child = ctx.Pipe()
                p = ctx.Process(target=self.target, args=(child,), name=f"llm-latency-worker-{s.index}", daemon=True)
                p.start()
                child.close()
                self.procs.append(p)
                self.conns.append(parent)
            for k, s in enumerate(self.shards):
                try:
                    self.conns[k].send((s, self.credentials))  # the pipe: not argv, not the environment
                except OSError:  # it died before reading it
                    self._lost(k, None)
            warm = max((len(s.warm) for s in self.shards), default=0)
            self._collect(list(range(len(self.shards))), READY_SLACK_S + self.request_timeout_s * warm, "ready")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for k, c in enumerate(self.conns):
            if k not in self.failures:
                with contextlib.suppress(OSError):
                    c.send(("stop",))
        for k, p in enumerate(self.procs):
            p.join(STOP_WAIT_S if k not in self.failures else 0.1)
            if p.is_alive():
                p.kill()  # hung, or lost: nothing of it is waited for any more
                p.join(5.0)
            self.conns[k].close()

    @property
    def live(self) -> list[int]:
        return [k for k in range(len(self.shards)) if k not in self.failures]

    # ------------------------------------------------------------------ one round
    def send_round(self, start: int, batch: list[Prompt]) -> list:
        """Send ``batch`` (the run's prompts ``start, ...``) split over the live workers (``deal``);
        the outcomes that came back, in prompt order.  A worker lost in the round is named in
        ``failures`` (its part of the round is missing: the caller stops)."""
        live = self.live
        if not live:
            return []
        self.rounds += 1
        parts = deal_round(start, batch, len(live))
        asked = []
        for k, part in zip(live, parts):
            if not part:
                continue
            self.dealt[k] += len(part)
            try:
                self.conns[k].send(("round", part))
                asked.append(k)
            except OSError:
                self._lost(k, None)
        answers = self._collect(asked, self.request_timeout_s + ROUND_SLACK_S, "round")
        return merge_round([a.outcomes for a in answers.values()])

    def _collect(self, ks: list[int], within_s: float, what: str) -> dict[int, ShardRun]:
        """Wait (at most ``within_s``) for each of workers ``ks`` to answer ``what``; a worker that
        dies, reports an error or does not answer in time is killed and named in ``failures``."""
        from multiprocessing.connection import wait

        deadline = self.clock() + int(within_s * 1e9)
        got: dict[int, ShardRun] = {}
        waiting = [k for k in ks if k not in self.failures]
        while waiting:
            left = (deadline - self.clock()) / 1e9
            if left <= 0:
                for k in waiting:
                    self._lost(k, f"did not {'get ready' if what == 'ready' else 'answer'} in time")
                break
            for c in wait([self.conns[k] for k in waiting], timeout=min(left, 0.2)):
                k = next(i for i in waiting if self.conns[i] is c)
                try:
                    msg: Any = self.conns[k].recv()
                except (EOFError, OSError):
                    self._lost(k, None)
                    continue
                if msg[0] == "error":
                    self._lost(k, f"failed: {msg[1]}")
                elif msg[0] == what:
                    got[k] = msg[1]
                    if what == "round":
                        keep_round(self.runs, k, msg[1])
            for k in waiting:  # a process gone without a word (killed before its pipe said EOF)
                if k not in got and k not in self.failures and not self.procs[k].is_alive() \
                        and not self.conns[k].poll():
                    self._lost(k, None)
            waiting = [k for k in waiting if k not in got and k not in self.failures]
        return got

    def _lost(self, k: int, what: str | None) -> None:
        p = self.procs[k]
        if what is None:  # its pipe closed: it died
            p.join(1.0)
            what = f"died with exit code {p.exitcode}"
        if p.is_alive():
            p.kill()
        self.failures[k] = _named(k, p, what, len(self.runs[k].outcomes) if k in self.runs else 0,
                                  self.dealt[k]) + (f" (round {self.rounds})" if self.rounds else "")
        self.runs.pop(k, None)  # the run is an error: a lost worker's records are not merged (as workers.merge)

    def load_run(self) -> LoadRun:
        """The rounds as one ``LoadRun`` (mode ``rounds``): every live worker's records in prompt
        order, its lag (``load.worker_lag``) and the lost workers (``load.workers`` counts both)."""
        from .workers import merge

        run = merge(self.shards, self.runs, self.failures)
        run.mode = "rounds"
        return run


def keep_round(runs: dict[int, ShardRun], k: int, r: ShardRun) -> None:
    """Add a round's answer ``r`` to worker ``k``'s run in ``runs`` (its records, lag samples, stalls)."""
    mine = runs.get(k)
    if mine is None:
        runs[k] = mine = ShardRun(k, r.pid, r.host, warm_failures=r.warm_failures)
    mine.outcomes += r.outcomes
    mine.lag_ns += r.lag_ns
    if r.stalls is not None:
        s = mine.stalls
        mine.stalls = r.stalls if s is None else StallTimeline(
            s.stalls + r.stalls.stalls, s.tick_ns, min(s.start_ns, r.stalls.start_ns), max(s.end_ns, r.stalls.end_ns))


# ---------------------------------------------------------------------- the worker's side
def send_part(one: Callable[..., Any], part: list[tuple[int, Prompt]], name: str,
               on_sent: Callable[[], None] = lambda: None) -> ShardRun:
    """Send ``part``'s prompts each on a thread of its own, all at once, under the lag monitor;
    their exact records with their positions, each naming this worker (``name``: ``pid@host``)."""
    from concurrent.futures import ThreadPoolExecutor

    from ...load.send_one import no_gc_pauses as _no_gc_pauses
    from ...load.engine import _monitored

    pid, _, host = name.partition("@")
    out = ShardRun(0, int(pid), host)

    def send(p: Prompt):
        return sent_by(one(p), name)

    def body() -> LoadRun:
        run = LoadRun("rounds")
        with ThreadPoolExecutor(max_workers=max(len(part), 1), thread_name_prefix="llm-latency-round") as pool:
            run.outcomes = list(pool.map(send, [p for _, p in part]))
        return run

    with _no_gc_pauses():
        run = _monitored(body, MEASUREMENT_CLOCK, time.sleep)
    for _ in run.outcomes:
        on_sent()
    out.outcomes = [(pos, o) for (pos, _), o in zip(part, run.outcomes)]
    out.lag_ns, out.stalls = run.lag_ns, run.lag_timeline
    return out


def pool_worker_main(conn) -> None:
    """A pool worker process: receive its shard and credentials, prepare and warm its client,
    report ready, then answer each ``("round", part)`` with a ``ShardRun`` until ``("stop",)``.
    An exception is reported redacted."""
    redact: Callable[[str], str] = str
    try:
        shard, credentials = conn.recv()
        from ...load.send_one import sender
        from ...transport.http import Redactor

        redact = Redactor(credentials.secrets)
        prepared = prepare_shard(shard, credentials)
        conn.send(("ready", prepared.warm_failures))
        one = sender(prepared.client, shard.output_tokens, shard.extra)
        name = f"{os.getpid()}@{socket.gethostname()}"
        exit_after, sent = exit_hook_after(shard.index), [0]

        def counted() -> None:
            sent[0] += 1
            if exit_after is not None and sent[0] >= exit_after:
                os._exit(TEST_EXIT_CODE)  # the test hook: a worker dying mid-run

        while True:
            msg = conn.recv()
            if msg[0] != "round":
                break
            conn.send(("round", send_part(one, msg[1], name, counted)))
        prepared.close()
    except BaseException as exc:  # reported to the controller, which makes it an error
        with contextlib.suppress(OSError, ValueError):
            conn.send(("error", redact(f"{type(exc).__name__}: {exc}")))
