"""Agent sessions in a worker process (``workers: N``): the sessions dealt to it, whole.

An ``AgentShard`` carries an ``AgentDeal``: the ``SessionPlan`` every turn follows and the global indices of its
sessions, whose first prompts (salted by the controller, never rebuilt here) are the shard's ``prompts``.  The
worker warms with its own turn-1 prompts, waits for the common start, then runs its sessions' turn loops
(``client.agent.loop``) with its share of the session slots; each turn's record is kept at its session-major
position, and the sessions go back in the ``ShardRun``'s books (the controller merges: ``client.agent.workers``).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ...core.result.result import sent_by
from .loop import SessionPlan, chat_client, run_session, run_sessions, warm
from ..load.engine import LagMonitor
from ..placement.processes.shard import Shard


@dataclass(frozen=True)
class AgentDeal:
    """A worker's agent sessions: ``sessions[j]`` (a session's index in the run) starts from the
    shard's ``prompts[j]``; ``plan`` is the run's, the same on every worker."""
    plan: SessionPlan
    sessions: tuple[int, ...]


@dataclass(frozen=True)
class AgentShard(Shard):
    """A worker's whole agent sessions (``deal``; ``prompts``: their turn 1s, ``positions``: their
    turns' session-major positions)."""
    deal: AgentDeal = field(kw_only=True)

    def warm_up(self, client) -> int:
        """The worker's unmeasured turn 1s (``warm``, with the tools): how many failed."""
        return warm(chat_client(client), list(self.warm), self.deal.plan)

    def run(self, prepared, out, go):
        return run_agent_shard(prepared.client, self, out, go.t0_ns, go.report, go.clock, go.sleep, go.after)


def run_agent_shard(client, shard, out, t0_ns: int, report: Callable[[int, int], None] | None, clock,
                    sleep: Callable[[float], None], sent: Callable[[int], None]) -> Any:
    """Run ``shard``'s sessions from the common start ``t0_ns`` into ``out`` (its ``ShardRun``):
    outcomes by session-major position, its lag samples, and ``books["sessions"]``.  ``sent(n)``
    is told after each of its requests (the worker's test hook)."""
    deal: AgentDeal = shard.deal
    plan = deal.plan
    client = chat_client(client)
    total = len(shard.positions)
    lock = threading.Lock()

    def keep(session: int, turn: int, outcome) -> None:
        outcome = sent_by(outcome, out.name)
        with lock:  # one pipe: one progress message at a time
            out.outcomes.append((plan.turn_position(session, turn), outcome))
            done = len(out.outcomes)
            if report:
                report(done, total)
        sent(done)

    while (d := t0_ns - clock()) > 0:
        sleep(min(d / 1e9, 0.05))
    with LagMonitor(clock=clock) as mon:
        sessions = run_sessions(lambda j, p: run_session(client, plan, deal.sessions[j], p, keep, sleep),
                                list(shard.prompts), shard.streams)
    out.lag_ns, out.stalls = list(mon.samples), mon.timeline()
    out.window_ns = max(clock() - t0_ns, 0)
    out.books = {"sessions": sessions}
    return out
