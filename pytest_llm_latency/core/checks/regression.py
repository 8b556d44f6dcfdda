"""Regression against a baseline (a saved file, or the A/B baseline arm): each comparison
``core.compare`` made that found a regression fails; an improvement is a note."""
from __future__ import annotations

from ..result import WorkloadResult
from ..findings import Finding

CHECK = "regression"


def check_regression(res: WorkloadResult) -> list[Finding]:
    out = []
    if res.facts.baseline_target_empty:
        out.append(Finding(CHECK, "failed", res.facts.baseline_target_empty))
    for comp in res.facts.comparisons:
        for c in comp.comparisons:
            if c.status == "regression":
                out.append(Finding(CHECK, "failed", c.message(comp.label)))
            elif c.status == "improvement":
                out.append(Finding(CHECK, "note", c.message(comp.label)))
    return out
