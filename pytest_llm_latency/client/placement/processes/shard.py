"""A worker's shard and the worker's side (``workers: N``; the controller: ``client/placement/processes/workers.py``).

``Shard``: pure data (no secrets) naming what one worker sends; ``Credentials`` travel apart (the pipe, never
argv, never a log line).  In the worker process ``worker_main`` receives both, ``prepare_shard`` builds and warms
its own client and ``run_shard`` sends the shard from the common start: a ``ShardRun`` of exact records, each
naming the worker (``pid@host``).  A Ray node reuses the pair (``client/placement/ray/shards.py``).
"""
from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ....core.measure.bunching import StallTimeline
from ....core.prompts.synthesis import Prompt
from ....core.result.result import Failure, sent_by
from ...transport.clock import MEASUREMENT_CLOCK
from ...transport.http import Timeouts
from ...load.engine import ClosedPlan
from ..deal import deal, warm_share

#: test hook, read by each worker process: ``"K:N"`` makes worker K exit (``os._exit``) after N requests
TEST_EXIT_AFTER_ENV = "LLM_LATENCY_TEST_WORKER_EXIT_AFTER"
TEST_EXIT_CODE = 86


@dataclass(frozen=True)
class WorkerTarget:
    """Where and how a worker sends: pure data, no secrets (``client.runner.make_client``'s target)."""
    url: str
    api: str
    model: str | None
    timeouts: Timeouts = Timeouts()

    @classmethod
    def of(cls, client) -> "WorkerTarget":
        return cls(client.base_url, getattr(client, "api_name", "openai-completions"), client.model, client.timeouts)


@dataclass(frozen=True)
class Credentials:
    """The ``Authorization`` header and the secrets to mask: handed to a worker apart from its shard
    (a pipe, not argv, not a task argument in clear); never shown (``repr`` hides them)."""
    authorization: str | None = None
    secrets: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Credentials(authorization={'<hidden>' if self.authorization else None}, {len(self.secrets)} secrets)"

    @classmethod
    def of(cls, client) -> "Credentials":
        http = getattr(client, "http", None)
        header = http.headers.get("Authorization") if http is not None else None
        basic = getattr(getattr(http, "auth", None), "_auth_header", None)  # httpx.BasicAuth from user:pass@
        redact = getattr(client, "redact", None)
        return cls(header or basic, tuple(getattr(redact, "secrets", ())))


@dataclass(frozen=True)
class Shard:
    """Worker ``index`` of ``workers``: its scheduled arrivals (``positions`` in the schedule, their
    ``due`` offsets in s from the common start, their ``prompts``), its unmeasured ``warm`` prompts,
    the output length and extra request fields, and how many streams it keeps connections for.

    One frozen dataclass per kind, each naming its worker-side runner (``run``): this one, an open
    loop's schedule (a rounds pool's shard has no arrivals of its own: ``client/placement/processes/pool.py``);
    ``ClosedShard``; a trace replay's ``drivers.trace_replay.TraceShard``; agent sessions'
    ``client.agent.shard.AgentShard``.  A worker unpickles its shard's class, so nothing here
    imports the kinds defined elsewhere."""
    index: int
    workers: int
    target: WorkerTarget
    positions: tuple[int, ...]
    due: tuple[float, ...]
    prompts: tuple[Prompt, ...]
    warm: tuple[Prompt, ...] = ()
    output_tokens: int = 1
    extra: dict | None = None
    streams: int = 1

    @property
    def planned(self) -> int:
        """Requests it is expected to measure."""
        return len(self.positions)

    @property
    def loop_plan(self) -> ClosedPlan | None:
        """A closed loop's plan, whose books the shards share (None: no shared books)."""
        return None

    def position_of(self, p: Prompt, positions: dict[int, int]) -> int:
        """The run position an outcome of ``p`` is kept at (``positions``: by prompt identity)."""
        return positions[id(p)]

    def warm_up(self, client) -> int:
        """The unmeasured warm-up (its connections opened): how many failed."""
        from ...load.send_one import sender

        one = sender(client, self.output_tokens, self.extra)
        return sum(1 for p in self.warm if isinstance(one(p), Failure))

    def run(self, prepared: "PreparedShard", out: "ShardRun", go: "Go") -> "ShardRun":
        """The worker's side: the open loop's schedule from the common start."""
        from ...load.engine import run_schedule
        from ...load.send_one import no_gc_pauses

        with no_gc_pauses():
            run = run_schedule(go.send, list(self.prompts), list(self.due), go.t0_ns, clock=go.clock, sleep=go.sleep,
                               progress=go.report)
        return out.kept(run)


@dataclass(frozen=True)
class ClosedShard(Shard):
    """A closed loop's worker: its streams (``plan.streams``), all the prompts (drawn from the shared
    index in turn: each sent once), the books shared with the other workers (``go.shared``)."""
    plan: ClosedPlan = field(kw_only=True)

    @property
    def planned(self) -> int:
        """Its streams' share of the samples."""
        c = self.plan
        return -(-c.samples * len(c.streams or ()) // c.concurrency)

    @property
    def loop_plan(self) -> ClosedPlan | None:
        return self.plan

    def run(self, prepared: "PreparedShard", out: "ShardRun", go: "Go") -> "ShardRun":
        from ...load.engine import run_closed
        from ...load.send_one import no_gc_pauses

        with no_gc_pauses():
            run = run_closed(go.send, list(self.prompts), self.plan, go.shared, go.t0_ns, clock=go.clock,
                             sleep=go.sleep, progress=go.report)
        out = out.kept(run)
        out.outcomes, out.ramp, out.drain = ([(go.sent[id(o)], o) for o in group] for group in
                                             (run.outcomes, run.ramp, run.drain))  # as the loop sorted them
        return out


@dataclass
class Go:
    """What a shard's runner is handed at the common start: ``send(prompt, t_due)`` (keeps the outcome
    at its position, names the worker, runs the test hook), the start ``t0_ns``, progress, the clock,
    a closed loop's shared books, ``sent`` (outcome id -> position) and ``after(n)`` (the test hook)."""
    send: Callable
    t0_ns: int
    report: Callable[[int, int], None] | None
    clock: Any
    sleep: Callable[[float], None]
    shared: Any
    sent: dict[int, int]
    after: Callable[[int], None]


@dataclass
class ShardRun:
    """What a worker measured: ``(position, RequestRecord | Failure)`` pairs, its lag samples, who it was."""
    index: int
    pid: int
    host: str
    outcomes: list[tuple[int, Any]] = field(default_factory=list)
    lag_ns: list[int] = field(default_factory=list)
    send_lag_ns: list[int] = field(default_factory=list)
    stalls: StallTimeline | None = None
    stopped: str | None = None
    window_ns: int = 0
    warm_failures: int = 0
    ramp: list[tuple[int, Any]] = field(default_factory=list)    # a closed loop's exclusions, positioned
    drain: list[tuple[int, Any]] = field(default_factory=list)
    prompts_short: bool = False
    books: dict = field(default_factory=dict)  # a trace replay's: skipped rows, the stopping rejection, unsent

    @property
    def name(self) -> str:
        return f"{self.pid}@{self.host}"

    def kept(self, run: Any) -> "ShardRun":
        """The load engine's figures of ``run`` (``client.load.engine.LoadRun``) kept beside the outcomes."""
        self.lag_ns, self.send_lag_ns, self.stalls = run.lag_ns, run.send_lag_ns, run.lag_timeline
        self.stopped, self.window_ns, self.prompts_short = run.stopped, run.window_ns, run.prompts_short
        return self


def make_shards(due: list[float], prompts: list[Prompt], spares: list[Prompt], workers: int, target: WorkerTarget,
                *, warmup: int, output_tokens: int, extra: dict | None, in_flight: int) -> list[Shard]:
    """The ``workers`` shards of the schedule ``due`` (``prompts[i]`` due at ``due[i]``); each worker
    gets ``warmup`` of the ``spares`` for its warm-up."""
    due = due[:len(prompts)]
    streams = max(1, math.ceil(in_flight / workers))
    return [Shard(k, workers, target, tuple(pos), tuple(due[i] for i in pos), tuple(prompts[i] for i in pos),
                  warm_share(spares, k, warmup), output_tokens, extra, streams)
            for k, pos in enumerate(deal(range(len(due)), workers))]  # worker k: arrivals k, k+N, ...


# ---------------------------------------------------------------------- the worker's side
@dataclass
class PreparedShard:
    shard: Shard
    client: Any
    close: Callable[[], None]
    warm_failures: int = 0


def prepare_shard(shard: Shard, credentials: Credentials) -> PreparedShard:
    """The worker's own HTTP and protocol clients, its connections warmed (unmeasured requests)."""
    from ...transport.http import Redactor, ensure_connections, make_http_client
    from ...apis.target import Target, make_client

    t = shard.target
    http = make_http_client(t.timeouts, pool_size=max(shard.streams, 1))
    if credentials.authorization:
        http.headers["Authorization"] = credentials.authorization
    client = make_client(Target(t.url, t.api, t.model), http, timeouts=t.timeouts,
                         redact=Redactor(credentials.secrets))
    ensure_connections(http, shard.streams)
    return PreparedShard(shard, client, http.close, shard.warm_up(client))  # unmeasured: its connections opened


def run_shard(prepared: PreparedShard, t0_ns: int, *, progress: Callable[[int], None] | None = None,
              clock=MEASUREMENT_CLOCK, sleep: Callable[[float], None] = time.sleep, shared: Any = None,
              host: str | None = None) -> ShardRun:
    """Send the shard from the common start ``t0_ns`` by its own runner (``Shard.run``: an open
    loop's schedule, a closed loop's streams keeping their books in ``shared``, the controller's
    ``SharedLoopState``, a trace's or agent's sessions); return its exact records, each naming this
    worker (``pid@host``; ``host``: this host's name, or a Ray node's: ``client/placement/ray/shards.py``)."""
    from ...load.send_one import sender

    shard = prepared.shard
    out = ShardRun(shard.index, os.getpid(), host or socket.gethostname(), warm_failures=prepared.warm_failures)
    one = sender(prepared.client, shard.output_tokens, shard.extra)
    position = {id(p): pos for p, pos in zip(shard.prompts, shard.positions)}
    sent: dict[int, int] = {}  # id(outcome) -> its prompt's position
    exit_after = exit_hook_after(shard.index)

    def after(n: int) -> None:
        if exit_after is not None and n >= exit_after:
            os._exit(TEST_EXIT_CODE)  # the test hook: a worker dying mid-run

    def send(p: Prompt, t_due: int | None):
        res = sent_by(one(p, t_due), out.name)
        pos = shard.position_of(p, position)
        out.outcomes.append((pos, res))
        sent[id(res)] = pos
        after(len(out.outcomes))
        return res

    report = (lambda done, total: progress(done)) if progress else None
    return shard.run(prepared, out, Go(send, t0_ns, report, clock, sleep, shared, sent, after))


def exit_hook_after(index: int) -> int | None:
    """The test hook (``TEST_EXIT_AFTER_ENV``, ``"K:N"``): after how many requests worker ``index`` exits."""
    raw = os.environ.get(TEST_EXIT_AFTER_ENV, "")
    k, _, n = raw.partition(":")
    return int(n) if k.strip().isdigit() and n.strip().isdigit() and int(k) == index else None


def worker_main(conn, shared: Any = None) -> None:
    """A worker process: receive its shard and credentials, prepare, report ready, wait for
    ``("go", t0_ns)``, run, send back the ``ShardRun``.  An exception is reported redacted.
    ``shared``: a closed loop's ``SharedLoopState``, inherited at the process's start."""
    redact: Callable[[str], str] = str
    try:
        shard, credentials = conn.recv()
        from ...transport.http import Redactor

        redact = Redactor(credentials.secrets)
        prepared = prepare_shard(shard, credentials)
        conn.send(("ready", os.getpid()))
        msg = conn.recv()
        if msg[0] != "go":
            return
        result = run_shard(prepared, msg[1], progress=lambda done: conn.send(("progress", done)), shared=shared)
        prepared.close()
        conn.send(("done", result))
    except BaseException as exc:  # reported to the controller, which makes it an error
        with contextlib.suppress(OSError, ValueError):
            conn.send(("error", redact(f"{type(exc).__name__}: {exc}")))
