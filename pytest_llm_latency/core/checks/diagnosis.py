"""Why a budget failed: the likely causes with their evidence (``core.result.why`` / ``core.result.diagnosis``),
after every deciding check (the causes read the violations and failed checks found so far)."""
from __future__ import annotations

from ..result.result import WorkloadResult
from ..findings import Finding


def check_causes(res: WorkloadResult) -> list[Finding]:
    from ..result.why import causes

    return [Finding("diagnosis", "cause", line) for line in causes(res)]
