"""Run a ``rate_sweep`` workload: open-loop runs at the rates ``core.rate_sweep.bisect_rate`` picks, each
judged against the workload's budgets; the result is the run at the capacity (the highest rate
that passed), with the capacity and the curve in ``res.load``/notes and ``capacity_min`` judged."""
from __future__ import annotations

from dataclasses import replace

from ..core.result import WorkloadResult
from ..core.rate_sweep import Step, SweepResult, bisect_rate
from ..core.workload import Workload


def run_sweep(measure_at, workload: Workload) -> tuple[WorkloadResult, SweepResult]:
    """``measure_at(workload) -> WorkloadResult`` measures one fixed-rate workload."""
    spec = workload.sweep
    results: dict[float, WorkloadResult] = {}

    def run_at(rate: float) -> Step:
        assert workload.load is not None  # a rate sweep is an open loop
        w = replace(workload, sweep=None, load=replace(workload.load, rate=rate))
        res = measure_at(w)
        results[rate] = res
        why = res.failure_message().splitlines()[0] if res.verdict != "pass" and res.failure_message() else ""
        return Step(rate, res.verdict == "pass", why)

    sw = bisect_rate(run_at, spec)
    cap = sw.capacity
    res = results[cap] if cap is not None else results[min(results)]
    res.load.rate_sweep_steps = len(sw.steps)
    if cap is not None:
        res.load.rate_sweep_capacity_rps = round(cap, 4)
    if sw.lowest_failing is not None:
        res.load.rate_sweep_lowest_failing_rps = round(sw.lowest_failing, 4)
    res.notes.insert(0, f"rate_sweep: {sw.describe()}")
    if cap is None:
        res.failed_checks.append(f"rate_sweep: no rate meets the SLO: capacity {sw.bounded} "
                                 f"({results[min(results)].failure_message().splitlines()[0]})")
    elif spec.capacity_min is not None and cap < spec.capacity_min:
        res.failed_checks.append(f"rate_sweep: capacity {cap:.3g} req/s < capacity_min {spec.capacity_min:g} req/s")
    return res, sw
