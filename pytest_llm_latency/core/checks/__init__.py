"""Every rule that can change a verdict, one check per module or family, pure, run once in a
fixed order by ``judge`` (``core/checks/judge.py``); the verdict is ``verdict_of`` their findings.

May import every other stage of ``core`` (the last one)."""
from ..findings import Finding, verdict_of
from .judge import CHECKS, evaluate, judge, preparation_failed, with_workload

__all__ = ["CHECKS", "Finding", "evaluate", "judge", "preparation_failed", "verdict_of", "with_workload"]
