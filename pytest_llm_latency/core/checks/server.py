"""A managed server that died during the test: a failed check naming what it said
(``facts.server_died``; its refused requests already count as the server's failures)."""
from __future__ import annotations

from ..result.result import WorkloadResult
from ..findings import Finding


def check_server_alive(res: WorkloadResult) -> list[Finding]:
    died = res.facts.server_died
    return [Finding("server", "failed", f"the managed server died during the test: {died}")] if died else []
