"""Agent sessions as they really run: a multi-turn tool-calling loop per session (the turns, the tools' cost,
the salts: docs/agent-sessions.md).

Sessions run at ``concurrency`` through ``run_sessions`` (bounded threads); with ``workers: N`` they are dealt
whole over N worker processes, or with ``ray:`` one per Ray node (``client.agent.workers``).  The modules: the turn
loop (``client.agent.loop``), what is done once -- the preparation and the result (``client.agent.plan``) --, a
worker's side (``client.agent.shard``) and the controller's (``client.agent.workers``).  Pure arithmetic and the
verdict are in ``core.checks.agent_sessions`` (turn types in ``core.measure.agent_turns``); tool-call assembly in
``core.measure.tool_calls``.
"""
from __future__ import annotations

import time
from typing import Callable

from ...core.measure.record import RequestRecord
from ...core.result.result import Failure, WorkloadResult
from ...core.spec.workload import Workload
from ..agent.loop import run_session, run_sessions, tools_overhead, warm
from ..agent.plan import prepare_sessions, session_result, turn_table
from ..prepare.tokens import new_nonce

__all__ = ["measure_sessions", "run_sessions", "tools_overhead", "turn_table"]


def session_shares(workload: Workload):
    """The worker processes (or Ray nodes) the sessions are dealt over (``placement.Shares``; one
    without ``dealt``: this process): ``workers: N`` (or ``auto``), at most one per session slot and
    one per session."""
    from ..placement import placement_for

    return placement_for(workload).over(min(workload.concurrency, workload.samples))


def measure_sessions(client, workload: Workload, *, seed: int = 0, nonce: str | None = None,
                     salt_context: str = "", progress=None, sleep: Callable[[float], None] = time.sleep,
                     extra: dict | None = None, **_ignored) -> WorkloadResult:
    """Run ``workload.samples`` sessions of ``workload.agent.steps`` turns, here or dealt over
    worker processes; never raises for a server fault (a failed turn ends its session and counts
    as a failed request; a failed worker is a fact naming it, an error of the judge)."""
    from .pipeline import scrape
    from ..server.prometheus import delta

    nonce = new_nonce() if nonce is None else nonce
    shares = session_shares(workload)
    workers = shares.count
    prep = prepare_sessions(client, workload, seed=seed, nonce=nonce, salt_context=salt_context, extra=extra,
                            warmers=workers)
    if isinstance(prep, WorkloadResult):  # unprepared: a probe or tokenize request failed
        return prep
    client = prep.client
    scraped: dict = {}  # the server's prefix-cache counters, where no turn reports its own
    records: list[RequestRecord] = []
    failures: list[Failure] = []
    run = None

    def scrape_before() -> None:  # after the warm-ups, before the first session
        scraped["before"] = scrape(client)

    def keep(session: int, turn: int, outcome: "RequestRecord | Failure") -> None:
        if isinstance(outcome, RequestRecord):
            records.append(outcome)
        else:
            failures.append(outcome)

    if shares.dealt:  # dealt whole over worker processes or Ray nodes (client.agent.workers)
        from ..agent.workers import merge_sessions, run_on_workers

        run = run_on_workers(prep, workers, workload.concurrency, progress=progress, on_ready=scrape_before)
        sessions, records, failures = merge_sessions(run)
    else:
        warm(client, prep.warm[0], prep.plan)
        scrape_before()
        sessions = run_sessions(lambda i, p: run_session(client, prep.plan, i, p, keep, sleep), prep.first,
                                workload.concurrency, progress)
    before = scraped.get("before")
    after = scrape(client) if before is not None else None
    res = session_result(prep, sessions, records, failures,
                         delta(before, after) if before is not None and after is not None else None)
    if run is not None:  # load.workers, load.worker_lag; a failed or starved worker: an error naming it
        from .load_report import workers_summary

        workers_summary(res, run)
    return res
