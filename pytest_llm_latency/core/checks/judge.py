"""The one judging function: every check, once, in a fixed order; the verdict from their findings.

A check is ``check(res: WorkloadResult) -> list[Finding]``: pure, no I/O; it reads the
measurement (records, failures, summaries, ``res.facts``) and the findings of the checks before
it (through the result's views).  ``judge`` resets the views, runs the checks, and fills
``violations`` / ``failed_checks`` / ``errors`` / ``causes`` from the findings (the checks' notes stay
findings: ``WorkloadResult.shown_notes``):
nothing else writes them.  Judging a result again (other budgets: ``check()``) recomputes
everything from the measurement, never a diff of texts."""
from __future__ import annotations

import copy

from dataclasses import replace

from ..result.result import Failure, WorkloadResult, measured, miss_summaries
from ..result.result_parts import PART_NAMES
from ..spec.workload import Workload
from .ab_arm import check_baseline_arm
from .agent_sessions import check_agent_sessions
from .arm_sweep import check_arm_sweep
from .budgets import check_budgets
from .by_prompt import check_by_prompt
from .diagnosis import check_causes
from .error_rate import check_error_rate
from .gates import check_prefill_roofline, check_roofline
from .mix import check_mix
from .kv_transfer import check_kv_transfer
from .regression import check_regression
from .samples import check_samples
from .server import check_server_alive
from .stalls import check_stalls
from .structured import check_structured
from .sweeps import PART_CHECKS, check_prompt_sweep_parts, check_rate_sweep

#: the order is the order of the texts in a failure message
CHECKS = (check_samples, check_budgets, check_stalls, check_mix, check_kv_transfer, check_by_prompt, check_error_rate,
          check_structured, *PART_CHECKS, check_agent_sessions, check_prompt_sweep_parts, check_baseline_arm,
          check_rate_sweep, check_arm_sweep, check_server_alive, check_roofline, check_prefill_roofline,
          check_regression, check_causes)

_LISTS = {"violation": "violations", "failed": "failed_checks", "error": "errors", "cause": "causes"}


def judge(res: WorkloadResult) -> WorkloadResult:
    """Run every check on ``res`` (in place) and return it; ``res.verdict`` is ``verdict_of(res.findings)``."""
    res.findings = []  # a result judged before: its measurement notes stay in ``notes``, the checks' go
    if res.prepared:
        res.summaries = miss_summaries(res)  # check_samples clears them when nothing was measured
    res.violations, res.failed_checks, res.errors, res.causes, res.verdicts = [], [], [], [], []
    for check in CHECKS:
        for f in check(res):
            res.findings.append(f)  # a note stays a finding (``WorkloadResult.shown_notes``)
            if f.kind == "note":
                continue
            if f.kind == "part":  # figures the check decided for a part: set here, in check order
                getattr(res, f.data.part).set(**dict(f.data.fields))
            elif f.kind == "violation":
                res.violations.append(f.data)
            else:
                getattr(res, _LISTS[f.kind]).append(f.text)
    return res


def with_workload(res: WorkloadResult, workload: Workload) -> WorkloadResult:
    """``res``'s measurement, to be judged against ``workload``'s budgets (the samples: auto
    decisions belong to the budgets they were taken for)."""
    keep = res.sequential if workload is res.workload else None
    parts = {name: copy.deepcopy(getattr(res, name)) for name in PART_NAMES}
    return replace(res, workload=workload, sequential=keep, notes=list(res.notes), **parts,
                   findings=list(res.findings or ()), violations=[], failed_checks=[], errors=[], causes=[],
                   verdicts=[])


def evaluate(workload: Workload, records: list, failures: list[Failure], *, server_failed: bool = False,
             sequential=None) -> WorkloadResult:
    """Statistics and the verdict of ``records``/``failures`` (a measurement without other facts)."""
    res = measured(workload, records, failures, sequential=sequential)
    res.facts.server_failed = server_failed
    return judge(res)


def preparation_failed(workload: Workload, failure: Failure, *, server_answered: bool = False) -> WorkloadResult:
    """The judged result of a run whose preparation failed (``core.result.result.unprepared``)."""
    from ..result.result import unprepared

    res = unprepared(workload, failure)
    res.facts.server_failed = server_answered
    return judge(res)
