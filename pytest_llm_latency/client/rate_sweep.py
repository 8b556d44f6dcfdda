"""Run a ``rate_sweep`` workload: open-loop runs at the rates ``core.rate_sweep.bisect_rate`` picks, each
judged against the workload's budgets (by the injected ``judge``: the verdict of a step picks the
next rate); the result is the run at the capacity (the highest rate that passed), with the capacity
and the curve in ``res.load``/notes and the sweep in its facts (``core.checks.sweeps`` judges
``capacity_min``).  Judge the result once more for its verdict."""
from __future__ import annotations

from dataclasses import replace

from typing import Callable

from ..core.facts import RateSweepRun
from ..core.result import WorkloadResult
from ..core.rate_sweep import Step, SweepResult, bisect_rate
from ..core.workload import Workload


def run_sweep(measure_at, workload: Workload,
              judge: Callable[[WorkloadResult], WorkloadResult]) -> tuple[WorkloadResult, SweepResult]:
    """``measure_at(workload) -> WorkloadResult`` measures one fixed-rate workload; ``judge``
    (``core.checks.judge``) gives each step its verdict."""
    spec = workload.sweep
    results: dict[float, WorkloadResult] = {}

    def run_at(rate: float) -> Step:
        assert workload.load is not None  # a rate sweep is an open loop
        w = replace(workload, sweep=None, load=replace(workload.load, rate=rate))
        res = judge(measure_at(w))
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
    lowest = results[min(results)].failure_message().splitlines()
    res.facts.rate_sweep = RateSweepRun(sw, lowest[0] if lowest else "", spec.capacity_min)
    return res, sw
