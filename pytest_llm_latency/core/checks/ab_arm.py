"""A/B in one run: the baseline target's arm is measured like the candidate's, and the comparison
is only as sound as both samples.  A client that fell behind, a prefix cache that served the salted
prompts, cold starts or streams without per-token counts on the baseline target's side (in any of
its blocks: ``core.result.blocks``) are the run's findings, prefixed ``baseline target:``.  Its lost workers
are carried into the candidate's ``facts.workers_failed`` already (``check_workers``), and an arm
that measured nothing is ``facts.baseline_target_empty`` (``check_regression``)."""
from __future__ import annotations

from dataclasses import replace

from ..findings import Finding
from ..result.result import WorkloadResult
from .cold_starts import check_cold_starts
from .measurement_validity import check_client_health, check_prefix_cache, check_token_counts, check_trace_complete
from .sweeps import check_prompt_sweep_parts

CHECK_PREFIX = "baseline target: "
#: the candidate's own validity checks, on the baseline arm (its workers: already the candidate's facts)
ARM_CHECKS = (check_cold_starts, check_client_health, check_trace_complete, check_prefix_cache, check_token_counts,
              check_prompt_sweep_parts)


def check_baseline_arm(res: WorkloadResult) -> list[Finding]:
    arm = res.facts.baseline_target_arm
    if arm is None or not arm.records:
        return []
    if arm.workload is not res.workload:  # judged again against other budgets (``with_workload``): those
        arm = replace(arm, workload=res.workload)
    return [Finding(f.check, f.kind, CHECK_PREFIX + f.text, f.data)
            for check in ARM_CHECKS for f in check(arm) if f.kind != "cause"]
