"""Agent sessions: multi-turn tool-calling sessions, each holding its slot through the tool
pauses (``client.drivers.agent_session``)."""
from __future__ import annotations

from ...core.spec.workload import Workload
from .base import Run


class AgentSessions:
    name = "agent_sessions"

    def applies(self, workload: Workload) -> bool:
        return workload.agent is not None

    def measure(self, client, workload: Workload, run: Run):
        from .agent_session import measure_sessions

        return measure_sessions(client, workload, seed=run.seed, nonce=run.nonce, salt_context=run.salt_context,
                                progress=run.progress, extra=run.extra)
