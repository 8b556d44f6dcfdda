"""Agent sessions dealt over worker processes (``workers: N``) or Ray nodes (``ray:``): the controller's side.

Sessions stay whole: session ``i`` goes to worker ``i mod N`` with its prepared first prompt
(``client.agent.plan``), worker ``k`` with its share of the session slots (``session_slots``).  The shards run by
``client.placement.processes.workers.run_workers`` or, with ``ray:``, ``client.placement.ray.shards.run_on_ray``;
their records and sessions are merged so the result is built as one process's
(``client.agent.plan.session_result``).  See docs/load.md#worker-processes (agent sessions over workers).
"""
from __future__ import annotations

import math
from typing import Callable

from ...core.measure.agent_turns import Session
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure
from .plan import PreparedSessions
from .shard import AgentDeal, AgentShard
from ..transport.http import request_bound_s
from ..load.engine import LoadRun
from ..placement.deal import deal
from ..placement.processes.shard import Credentials, WorkerTarget


def session_slots(concurrency: int, workers: int) -> list[int]:
    """Worker ``k``'s sessions at once: its share of ``concurrency`` (the remainder to the first
    workers; at least one each -- the workload spec asks for ``workers <= concurrency``)."""
    return [max(concurrency // workers + (1 if k < concurrency % workers else 0), 1) for k in range(workers)]


def make_agent_shards(prep: PreparedSessions, workers: int, target: WorkerTarget,
                      concurrency: int) -> list[AgentShard]:
    """The ``workers`` shards of ``prep``'s sessions: session ``i`` whole on worker ``i mod N``
    (``positions``: its turns' session-major positions), with worker ``k``'s warm-up prompts."""
    plan = prep.plan
    slots = session_slots(concurrency, workers)
    out = []
    for k, mine in enumerate(deal(range(len(prep.first)), workers)):
        turns = tuple(plan.turn_position(i, t) for i in mine for t in range(1, plan.steps + 1))
        out.append(AgentShard(k, workers, target, turns, (), tuple(prep.first[i] for i in mine), tuple(prep.warm[k]),
                              plan.output_tokens, plan.extra, min(slots[k], max(len(mine), 1)),
                              deal=AgentDeal(plan, tuple(mine))))
    return out


def span_s(shards: list[AgentShard], request_timeout_s: float) -> float:
    """A hang guard, not a forecast: each worker's rounds of sessions, each turn within the request
    timeout, plus the session's tool pauses."""
    worst = 0.0
    for s in shards:
        deal: AgentDeal = s.deal
        if not deal.sessions:
            continue
        rounds = math.ceil(len(deal.sessions) / max(s.streams, 1))
        pauses = max(sum(deal.plan.pauses_ms[i]) for i in deal.sessions) / 1e3
        worst = max(worst, rounds * (deal.plan.steps * request_timeout_s + pauses))
    return worst


def run_on_workers(prep: PreparedSessions, workers: int, concurrency: int, *,
                   progress: Callable[[int, int], None] | None = None,
                   on_ready: Callable[[], None] | None = None) -> LoadRun:
    """Deal ``prep``'s sessions over ``workers`` spawned processes -- or, with ``ray:``, one per Ray
    node (``client/placement/ray/shards.py``: the records' stamps moved to the driver's timeline) -- and merge
    what they measured (``LoadRun.worker_books``: each worker's sessions; a failed worker, or a lost
    node, in ``worker_failures``)."""
    from ..placement import placement_for

    client = prep.client
    shards = make_agent_shards(prep, workers, WorkerTarget.of(client), concurrency)
    timeout_s = request_bound_s(client.timeouts)
    return placement_for(prep.workload).run(shards, Credentials.of(client), span_s=span_s(shards, timeout_s),
                                            request_timeout_s=timeout_s, progress=progress, on_ready=on_ready)


def merge_sessions(run: LoadRun) -> tuple[list[Session], list[RequestRecord], list[Failure]]:
    """The merged run's sessions (by index) and their records and failures (session-major: a
    session's turns in order, as one process at concurrency 1 has them)."""
    sessions = sorted((s for books in run.worker_books for s in books.get("sessions", ())), key=lambda s: s.index)
    records = [o for o in run.outcomes if isinstance(o, RequestRecord)]
    failures = [o for o in run.outcomes if isinstance(o, Failure)]
    return sessions, records, failures
