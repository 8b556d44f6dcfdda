"""One finding of one check, and the one function that turns findings into a verdict."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

#: A workload's verdict (``core.result.result``'s module docstring).  A ``Literal`` of plain strings, not
#: an Enum: the verdict crosses xdist workers and is written to JSON, JUnit and baselines as it is
#: (execnet refuses a str subclass); mypy still checks every value.
Verdict = Literal["pass", "fail", "error"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

#: violation: a budget missed (``data`` is the ``core.result.result.Violation``); failed: another check failed;
#: error: the run cannot be judged; note: information the user should see; cause: why a budget failed;
#: part: figures the check decided for a result part (``data`` is a ``PartUpdate``; no text, no verdict)
KINDS = ("violation", "failed", "error", "note", "cause", "part")


@dataclass(frozen=True)
class Finding:
    check: str          # the check's name: "budgets", "error_rate", "roofline", ...
    kind: str           # one of KINDS
    text: str
    data: Any = None    # structured detail (the Violation for a violation)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"finding kind {self.kind!r} is not one of {', '.join(KINDS)}")


def verdict_of(findings: list[Finding]) -> Verdict:
    """``error`` if any finding is an error; else ``fail`` if any is a violation or a failed
    check; else ``pass``."""
    kinds = {f.kind for f in findings}
    if "error" in kinds:
        return "error"
    return "fail" if kinds & {"violation", "failed"} else "pass"


@dataclass(frozen=True)
class PartUpdate:
    """Figures a check decided for the result part ``part`` (``core.result.result_parts``: ``roofline``,
    ``load``, ``agent``, ...): ``core.checks.judge`` sets them, in check order; a check never writes a part."""
    part: str
    fields: tuple[tuple[str, Any], ...]


def part_update(check: str, part: str, **fields: Any) -> Finding:
    """A ``part`` finding: ``fields`` for the result part ``part``."""
    return Finding(check, "part", "", PartUpdate(part, tuple(fields.items())))


def found(check: str, kind: str, texts) -> list[Finding]:
    return [Finding(check, kind, t) for t in texts if t]
