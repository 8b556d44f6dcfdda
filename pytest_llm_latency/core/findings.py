"""One finding of one check, and the one function that turns findings into a verdict."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: violation: a budget missed (``data`` is the ``core.result.Violation``); failed: another check failed;
#: error: the run cannot be judged; note: information the user should see; cause: why a budget failed
KINDS = ("violation", "failed", "error", "note", "cause")


@dataclass(frozen=True)
class Finding:
    check: str          # the check's name: "budgets", "error_rate", "roofline", ...
    kind: str           # one of KINDS
    text: str
    data: Any = None    # structured detail (the Violation for a violation)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"finding kind {self.kind!r} is not one of {', '.join(KINDS)}")


def verdict_of(findings: list[Finding]) -> str:
    """``error`` if any finding is an error; else ``fail`` if any is a violation or a failed
    check; else ``pass``."""
    kinds = {f.kind for f in findings}
    if "error" in kinds:
        return "error"
    return "fail" if kinds & {"violation", "failed"} else "pass"


def found(check: str, kind: str, texts) -> list[Finding]:
    return [Finding(check, kind, t) for t in texts if t]
