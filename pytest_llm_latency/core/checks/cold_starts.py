"""Cold starts (``core.measure.coldstart``): cold samples named (a failed check under ``cold_starts: fail``,
else a note), and the ``cold_ttft_max`` request judged."""
from __future__ import annotations

from ..measure import coldstart, metrics as m
from ..result.result import Failure, WorkloadResult, is_server_fault
from ..findings import Finding, found

CHECK = "cold_starts"


def check_cold_starts(res: WorkloadResult) -> list[Finding]:
    facts, workload = res.facts.cold, res.workload
    if facts is None:
        return []
    out = []
    if facts.cold:
        text = coldstart.describe(facts.numbers, facts.cold, facts.total, workload.cold_starts)
        out.append(Finding(CHECK, "failed" if workload.cold_starts == "fail" else "note", text))
    budget, outcome = workload.cold_budget, facts.outcome
    if outcome is None or budget is None:
        return out
    if isinstance(outcome, Failure):
        text = f"{coldstart.COLD_BUDGET}: the cold-start request failed ({outcome.kind}): {outcome.message}"
        return out + [Finding(CHECK, "failed" if is_server_fault(outcome.kind, True) else "error", text)]
    failed, error = coldstart.cold_request_outcome(outcome, m.ttft_ms(outcome), budget.limit)
    return out + found(CHECK, "failed", [failed]) + found(CHECK, "error", [error])
