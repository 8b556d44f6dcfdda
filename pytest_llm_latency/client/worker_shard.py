"""A worker's shard and the worker's side (``workers: N``; the controller: ``client/workers.py``).

``Shard``: pure data (no secrets) naming the scheduled arrivals, prompts and warm-up prompts one
worker sends; ``Credentials`` travel apart (the pipe, never argv, never a log line).  In the
worker process ``worker_main`` receives both, ``prepare_shard`` builds the worker's own client
and warms its connections, and ``run_shard`` runs the load engine on the shard from the common
start, returning a ``ShardRun`` of exact records, each naming the worker (``pid@host``).
``prepare_shard`` then ``run_shard`` is also what a shard runner on other hosts reuses
(``client/ray_shards.py``).
"""
from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core.bunching import StallTimeline
from ..core.prompts import Prompt
from ..core.result import Failure, sent_by
from .clock import MEASUREMENT_CLOCK
from .http import Timeouts
from .load import ClosedPlan

#: test hook, read by each worker process: ``"K:N"`` makes worker K exit (``os._exit``) after N requests
TEST_EXIT_AFTER_ENV = "LLM_LATENCY_TEST_WORKER_EXIT_AFTER"
TEST_EXIT_CODE = 86
_API_NAMES = {("OpenAIClient", "completions"): "openai-completions", ("OpenAIClient", "chat"): "openai-chat",
              ("OllamaClient", "generate"): "ollama", ("OllamaClient", "chat"): "ollama-chat"}


@dataclass(frozen=True)
class WorkerTarget:
    """Where and how a worker sends: pure data, no secrets (``client.runner.make_client``'s target)."""
    url: str
    api: str
    model: str | None
    timeouts: Timeouts = Timeouts()

    @classmethod
    def of(cls, client) -> "WorkerTarget":
        api = _API_NAMES.get((type(client).__name__, getattr(client, "api", "")), "openai-completions")
        return cls(client.base_url, api, client.model, client.timeouts)


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
    the output length and extra request fields, and how many streams it keeps connections for."""
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
    closed: ClosedPlan | None = None  # a closed loop: this worker's streams (its prompts: all, drawn in turn)
    trace: Any = None                 # a trace replay: its core.trace.TraceSpec; ``rows``: its sessions' rows
    rows: tuple = ()
    agent: Any = None                 # agent sessions: its client.agent_shard.AgentDeal (``prompts``: turn 1s)

    @property
    def planned(self) -> int:
        """Requests it is expected to measure (a closed loop: its streams' share of the samples)."""
        c = self.closed
        return len(self.positions) if c is None else -(-c.samples * len(c.streams or ()) // c.concurrency)


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


def shard_positions(n_due: int, workers: int) -> list[list[int]]:
    """Worker ``k`` takes scheduled arrivals ``k, k+N, k+2N, ...``: disjoint, and together every one."""
    return [list(range(k, n_due, workers)) for k in range(workers)]


def make_shards(due: list[float], prompts: list[Prompt], spares: list[Prompt], workers: int, target: WorkerTarget,
                *, warmup: int, output_tokens: int, extra: dict | None, in_flight: int) -> list[Shard]:
    """The ``workers`` shards of the schedule ``due`` (``prompts[i]`` due at ``due[i]``); each worker
    gets ``warmup`` of the ``spares`` for its warm-up."""
    due = due[:len(prompts)]
    streams = max(1, math.ceil(in_flight / workers))
    return [Shard(k, workers, target, tuple(pos), tuple(due[i] for i in pos), tuple(prompts[i] for i in pos),
                  tuple(spares[k * warmup:(k + 1) * warmup]), output_tokens, extra, streams)
            for k, pos in enumerate(shard_positions(len(due), workers))]


# ---------------------------------------------------------------------- the worker's side
@dataclass
class PreparedShard:
    shard: Shard
    client: Any
    close: Callable[[], None]
    warm_failures: int = 0


def prepare_shard(shard: Shard, credentials: Credentials) -> PreparedShard:
    """The worker's own HTTP and protocol clients, its connections warmed (unmeasured requests)."""
    from .drivers.pipeline import sender
    from .http import Redactor, ensure_connections, make_http_client
    from .target import Target, make_client

    t = shard.target
    http = make_http_client(t.timeouts, pool_size=max(shard.streams, 1))
    if credentials.authorization:
        http.headers["Authorization"] = credentials.authorization
    client = make_client(Target(t.url, t.api, t.model), http, timeouts=t.timeouts,
                         redact=Redactor(credentials.secrets))
    ensure_connections(http, shard.streams)
    if shard.agent is not None:  # turn 1s with the tools (client.agent_shard)
        from .agent_shard import warm_shard

        return PreparedShard(shard, client, http.close, warm_shard(client, shard))
    one = sender(client, shard.output_tokens, shard.extra)
    failed = sum(1 for p in shard.warm if isinstance(one(p), Failure))  # unmeasured: its connection opened
    return PreparedShard(shard, client, http.close, failed)


def run_shard(prepared: PreparedShard, t0_ns: int, *, progress: Callable[[int], None] | None = None,
              clock=MEASUREMENT_CLOCK, sleep: Callable[[float], None] = time.sleep, shared: Any = None,
              host: str | None = None) -> ShardRun:
    """Send the shard from the common start ``t0_ns``: an open loop's on its schedule, a closed
    loop's streams (``shard.closed``) keeping their books in ``shared`` (the controller's
    ``SharedLoopState``); return its exact records, each naming this worker (``pid@host``; ``host``:
    this host's name, or a Ray node's: ``client/ray_shards.py``)."""
    from .drivers.pipeline import _no_gc_pauses, sender
    from .load import run_closed, run_schedule

    shard = prepared.shard
    out = ShardRun(shard.index, os.getpid(), host or socket.gethostname(), warm_failures=prepared.warm_failures)
    one = sender(prepared.client, shard.output_tokens, shard.extra)
    position = {id(p): pos for p, pos in zip(shard.prompts, shard.positions)}
    sent: dict[int, int] = {}  # id(outcome) -> its prompt's position
    exit_after = exit_hook_after(shard.index)

    def send(p: Prompt, t_due: int | None):
        res = sent_by(one(p, t_due), out.name)
        # a trace's later turn is a new prompt: its row index
        pos = int(p.key) if shard.trace is not None and p.key is not None else position[id(p)]
        out.outcomes.append((pos, res))
        sent[id(res)] = pos
        if exit_after is not None and len(out.outcomes) >= exit_after:
            os._exit(TEST_EXIT_CODE)  # the test hook: a worker dying mid-run
        return res

    report = (lambda done, total: progress(done)) if progress else None
    if shard.agent is not None:  # whole agent sessions (client.agent_shard)
        from .agent_shard import run_agent_shard

        def after(n: int) -> None:
            if exit_after is not None and n >= exit_after:
                os._exit(TEST_EXIT_CODE)  # the test hook: a worker dying mid-run

        return run_agent_shard(prepared.client, shard, out, t0_ns, report, clock, sleep, after)
    if shard.trace is not None:  # whole sessions (client.drivers.trace_replay.replay_shard)
        from .drivers.trace_replay import replay_shard

        return replay_shard(shard, out, send, t0_ns, report, clock, sleep)
    with _no_gc_pauses():
        if shard.closed is not None:
            run = run_closed(send, list(shard.prompts), shard.closed, shared, t0_ns, clock=clock, sleep=sleep,
                             progress=report)
        else:
            run = run_schedule(send, list(shard.prompts), list(shard.due), t0_ns, clock=clock, sleep=sleep,
                               progress=report)
    out.lag_ns, out.send_lag_ns, out.stalls = run.lag_ns, run.send_lag_ns, run.lag_timeline
    out.stopped, out.window_ns, out.prompts_short = run.stopped, run.window_ns, run.prompts_short
    if shard.closed is not None:  # measured, ramp-up, drain: as the loop sorted them
        out.outcomes, out.ramp, out.drain = ([(sent[id(o)], o) for o in group] for group in
                                             (run.outcomes, run.ramp, run.drain))
    return out


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
        from .http import Redactor

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
        try:
            conn.send(("error", redact(f"{type(exc).__name__}: {exc}")))
        except (OSError, ValueError):
            pass
