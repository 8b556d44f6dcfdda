"""Regression against a baseline (a saved file, or the A/B baseline arm): each comparison
``core.measure.compare`` made that found a regression fails; an improvement is a note.  A TPOT or E2E
regression is explained (a cause) by its split, on run totals, into engine step time and
tokens per step (``core.measure.decode_totals``), also kept on ``res.baseline.explanation``."""
from __future__ import annotations

from ..measure.decode_totals import explain, totals_of
from ..result.result import WorkloadResult
from ..findings import Finding, found, part_update

CHECK = "regression"
#: the regressed metrics whose decode is split into step time and tokens per step
EXPLAINED = ("tpot", "e2e")


def check_regression(res: WorkloadResult) -> list[Finding]:
    out = found(CHECK, "failed", [res.facts.baseline_target_empty])
    for comp in res.facts.comparisons:
        for c in comp.comparisons:
            if c.status == "regression":
                out.append(Finding(CHECK, "failed", c.message(comp.label)))
            elif c.status == "improvement":
                out.append(Finding(CHECK, "note", c.message(comp.label)))
        regressed = [c.metric for c in comp.comparisons if c.status == "regression" and c.metric in EXPLAINED]
        if regressed:
            metric = "tpot" if "tpot" in regressed else regressed[0]
            text = explain(metric, comp.base_totals, totals_of(res), comp.fingerprint_changes)
            out.append(part_update(CHECK, "baseline", explanation=text))
            out.append(Finding(CHECK, "cause", f"cause: decode vs {comp.label} — {text}"))
    return out
