"""The roofline gates' decisions: a measured result (``facts.gates``, from ``plugin.roofline_gate`` /
``plugin.prefill_gate``) whose efficiency is below its floor fails; one that could not be evaluated
(a configuration error, no decode timing) makes the run unjudgeable."""
from __future__ import annotations

from ..result import WorkloadResult
from ..findings import Finding

FAILED, UNJUDGED = ("fail",), ("config_error", "unjudged")


def check_gates(res: WorkloadResult, check: str) -> list[Finding]:
    out = []
    for g in res.facts.gates:
        if g.check != check:
            continue
        if g.status in FAILED:
            out.append(Finding(check, "failed", g.message))
        elif g.status in UNJUDGED:
            out.append(Finding(check, "error", g.message))
    return out


def check_roofline(res: WorkloadResult) -> list[Finding]:
    return check_gates(res, "roofline")


def check_prefill_roofline(res: WorkloadResult) -> list[Finding]:
    return check_gates(res, "prefill")
