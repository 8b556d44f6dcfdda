"""Sweeps: a prompt-length sweep's per-length findings (tagged with the length), and a rate
sweep's capacity against ``capacity_min``."""
from __future__ import annotations

from ..findings import Finding
from ..result.result import WorkloadResult
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
    if sw.stopped_at is not None:  # a step lost a worker: the run is an error (check_workers), not a capacity
        return []
    unjudged = [s for s in sw.curve() if s.unjudged]
    bracket = sw.unjudged_bracket
    if bracket is not None:
        return [Finding("rate_sweep", "error",
                        f"sweep: the step at {bracket.rate:.3g} req/s could not be judged ({bracket.summary}); no rate "
                        f"the server failed brackets the capacity, so it is not known")]
    notes = [Finding("rate_sweep", "note",
                     f"sweep: {len(unjudged)} step(s) could not be judged (at {unjudged[0].rate:.3g} req/s: "
                     f"{unjudged[0].summary}); the capacity stands, bracketed by the failing step at "
                     f"{sw.lowest_failing:.3g} req/s")] if unjudged and sw.lowest_failing is not None else []
    cap = sw.capacity
    if cap is None:
        return notes + [Finding("rate_sweep", "failed",
                                f"sweep: no rate meets the SLO: capacity {sw.bounded} ({run.lowest_why})")]
    if run.capacity_min is not None and cap < run.capacity_min:
        return notes + [Finding("rate_sweep", "failed",
                                f"sweep: capacity {cap:.3g} req/s < capacity_min {run.capacity_min:g} req/s")]
    return notes
