"""The roofline gates' decisions.  ``plugin.roofline_gate`` / ``plugin.prefill_gate`` measure
(efficiency against the ceiling, the prefill fit) and record a ``facts.gates`` entry with the
floor or budgets; here the rule is applied (``core.roofline.ceiling.apply_floor``,
``core.roofline.prefill.apply_prefill_budgets``): below its floor, a failed check; a measurement that could not
be evaluated (a configuration error, no decode timing) makes the run unjudgeable.  The judged
status and message go to the result's ``roofline`` / ``prefill`` part (a ``part`` finding)."""
from __future__ import annotations

from ..findings import Finding, part_update
from ..result.result import WorkloadResult

UNJUDGED = ("config_error", "unjudged")


def _judged(check: str, g) -> tuple[str, str, list[Finding]]:
    """(status, message) of one gate entry, judged, and the part's ``status``/``message`` as a finding."""
    if g.result is None or g.status in UNJUDGED:
        return g.status, g.message, []
    from ..roofline.ceiling import apply_floor
    from ..roofline.prefill import apply_prefill_budgets

    judged = apply_floor(g.result) if check == "roofline" else apply_prefill_budgets(g.result)
    status, message = judged.status, judged.message
    shown = {} if status in ("fail", "config_error") else {"message": message}  # passed, report: information
    return status, message, [part_update(check, check, status=status, **shown)]


def check_gates(res: WorkloadResult, check: str) -> list[Finding]:
    out = []
    for g in res.facts.gates:
        if g.check != check:
            continue
        status, message, part = _judged(check, g)
        out += part
        if status == "fail":
            out.append(Finding(check, "failed", message))
        elif status in UNJUDGED:
            out.append(Finding(check, "error", message))
        else:  # ... except caveats that make the ceiling itself doubtful: those warn on every passing run
            out.extend(Finding(check, "note", c) for c in g.caveats)
    return out


def check_roofline(res: WorkloadResult) -> list[Finding]:
    return check_gates(res, "roofline")


def check_prefill_roofline(res: WorkloadResult) -> list[Finding]:
    return check_gates(res, "prefill")
