"""Sweeps: a prompt-length sweep's per-length findings (tagged with the length), and a rate
sweep's capacity against ``capacity_min``."""
from __future__ import annotations

from ..findings import Finding
from ..result import WorkloadResult
from .cold_starts import check_cold_starts
from .samples import check_samples
from .measurement_validity import (check_client_health, check_prefix_cache, check_token_counts,
                                   check_trace_complete, check_workers)

#: a prompt-sweep length's own checks (its samples are judged with every length's)
PART_CHECKS = (check_cold_starts, check_client_health, check_workers, check_trace_complete, check_prefix_cache,
               check_token_counts)


def check_prompt_sweep_parts(res: WorkloadResult) -> list[Finding]:
    """Each length's own findings (cold starts, prefix cache, counts...; its samples are judged
    with the others by the sample checks), prefixed with its length."""
    out = []
    for tag, part in res.facts.sweep_parts:
        for check in PART_CHECKS if part.prepared else (check_samples, *PART_CHECKS):  # its preparation failure
            out += [Finding(f.check, f.kind, tag + f.text, f.data) for f in check(part) if f.kind != "cause"]
    return out


def check_rate_sweep(res: WorkloadResult) -> list[Finding]:
    run = res.facts.rate_sweep
    if run is None:
        return []
    sw = run.sweep
    if sw.stopped_at is not None:  # a step lost a worker (an error: check_workers) or was not judgeable
        if not run.unjudged:
            return []
        return [Finding("rate_sweep", "error",
                        f"sweep: the step at {sw.stopped_at.rate:.3g} req/s could not be judged ({run.unjudged}); "
                        f"the sweep stopped there, so the capacity is not known")]
    cap = sw.capacity
    if cap is None:
        return [Finding("rate_sweep", "failed",
                        f"sweep: no rate meets the SLO: capacity {sw.bounded} ({run.lowest_why})")]
    if run.capacity_min is not None and cap < run.capacity_min:
        return [Finding("rate_sweep", "failed",
                        f"sweep: capacity {cap:.3g} req/s < capacity_min {run.capacity_min:g} req/s")]
    return []
