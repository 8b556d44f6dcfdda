"""Structured output (issue 36): the ``structured_tpot_overhead_max`` budget on the TPOT overhead of
constrained decoding (``core.measure.structured.tpot_overhead``, measured against the unconstrained
twins), and the note on the lengths constrained decoding produced (they are reported, never judged
as short outputs).  Schema violations are failed requests (``schema_violation``), counted against
``max_error_rate`` by ``core.checks.error_rate``."""
from __future__ import annotations

from ..findings import Finding
from ..result.result import WorkloadResult
from ..spec.structured_spec import OVERHEAD_BUDGET
from .samples import judgeable

CHECK = "structured_tpot_overhead"


def _ms(v: float | None) -> str:
    return "none" if v is None else f"{v:.2f} ms"


def check_structured(res: WorkloadResult) -> list[Finding]:
    s = res.workload.structured
    if s is None or not res.prepared:
        return []
    part = res.structured
    out: list[Finding] = []
    if part.output_tokens_p50 is not None:
        out.append(Finding("structured", "note", (
            f"structured output: constrained decoding stops at the schema's end, so the forced "
            f"{res.workload.output_tokens} output tokens do not hold: the answers had {part.output_tokens_min}.."
            f"{part.output_tokens_max} tokens (p50 {part.output_tokens_p50:g}), reported, not counted as short "
            f"outputs; TPOT uses the server's token count")))
    if not s.compares or not judgeable(res):
        return out
    how = (f"constrained TPOT p50 {_ms(part.tpot_ms_p50)} vs unconstrained {_ms(part.comparison_tpot_ms_p50)}, "
           f"{sum(1 for r in res.records if r.structured == 'constrained')} and {part.comparison_requests or 0} "
           f"requests")
    if part.tpot_overhead is None:
        failed = f"; {part.comparison_failed} unconstrained requests failed" if part.comparison_failed else ""
        return out + [Finding("budgets", "error", f"{OVERHEAD_BUDGET}: cannot be judged: no TPOT on one side "
                                                  f"({how}{failed}) -- every request needs at least 2 output tokens")]
    assert s.overhead_max is not None  # compares
    if part.tpot_overhead > s.overhead_max:
        return out + [Finding(CHECK, "failed", f"structured TPOT overhead {part.tpot_overhead:.1%} > "
                                               f"{OVERHEAD_BUDGET} {s.overhead_max:.1%} ({how})")]
    return out
