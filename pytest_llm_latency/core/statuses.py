"""Every status that is not a workload's verdict (``core.findings.Verdict``), one ``Literal`` each:
plain strings (they cross xdist workers and are written to JSON, JUnit and baselines as they are),
checked by mypy wherever one is set."""
from __future__ import annotations

from typing import Literal

#: one budget at a confidence (``core.measure.verdict.BudgetVerdict``)
BudgetStatus = Literal["pass", "fail", "inconclusive", "not_decided"]
#: a roofline gate: measured (``report``, ``config_error``), judged (``pass``, ``fail``) or with no figure
GateStatus = Literal["pass", "fail", "report", "config_error", "unjudged"]
#: one metric against a baseline (``core.measure.compare.Comparison``)
ComparisonStatus = Literal["regression", "improvement", "ok"]
#: a result against its baseline: the worst comparison, or ``new`` (no baseline entry)
BaselineStatus = Literal["regression", "improvement", "ok", "new"]
#: one reason of the decode diagnosis (``core.roofline.decode_diagnosis``)
ReasonStatus = Literal["likely", "possible", "ruled out"]
