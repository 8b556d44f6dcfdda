"""The roofline gates' decisions.  ``plugin.roofline_gate`` / ``plugin.prefill_gate`` measure
(efficiency against the ceiling, the prefill fit) and record a ``facts.gates`` entry with the
floor or budgets; here the rule is applied (``core.roofline.apply_floor``,
``core.prefill.apply_prefill_budgets``): below its floor, a failed check; a measurement that could not
be evaluated (a configuration error, no decode timing) makes the run unjudgeable.  The judged
status and message go to the result's ``roofline`` / ``prefill`` part."""
from __future__ import annotations

from ..findings import Finding
from ..result import WorkloadResult
from ..result_parts import PrefillInfo, RooflineInfo

UNJUDGED = ("config_error", "unjudged")


def _judged(res: WorkloadResult, check: str, g) -> tuple[str, str]:
    """(status, message) of one gate entry, judged; the part's ``status``/``message`` set."""
    if g.result is None or g.status in UNJUDGED:
        return g.status, g.message
    part: RooflineInfo | PrefillInfo
    if check == "roofline":
        from ..roofline import apply_floor

        decode = apply_floor(g.result)
        status, message, part = decode.status, decode.message, res.roofline
    else:
        from ..prefill import apply_prefill_budgets

        prefill = apply_prefill_budgets(g.result)
        status, message, part = prefill.status, prefill.message, res.prefill
    part.status = status
    if status not in ("fail", "config_error"):  # passed or report-only: information, not a note
        part.message = message
    return status, message


def check_gates(res: WorkloadResult, check: str) -> list[Finding]:
    out = []
    for g in res.facts.gates:
        if g.check != check:
            continue
        status, message = _judged(res, check, g)
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
