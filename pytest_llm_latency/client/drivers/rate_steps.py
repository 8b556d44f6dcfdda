"""Run a ``rate_sweep`` workload: open-loop runs at the rates ``core.spec.rate_sweep.bisect_rate`` picks, each
judged against the workload's budgets (by the injected ``judge``: the verdict of a step picks the
next rate); the result is the run at the capacity (the highest rate that passed), with the capacity
and the curve in ``res.load``/notes and the sweep in its facts (``core.checks.sweeps`` judges
``capacity_min``).  Judge the result once more for its verdict.  An unjudged step, a step that lost a
worker, and steps over workers or Ray nodes: docs/load.md#rate-sweep and
docs/load.md#rate-sweeps-and-ab-runs-over-workers."""
from __future__ import annotations

from dataclasses import replace

from typing import Callable

from ...core.result.facts import RateSweepRun
from ...core.result.result import WorkloadResult
from ...core.spec.rate_sweep import Step, SweepResult, bisect_rate
from ...core.spec.workload import Workload
from .load_report import workers_lost


def run_sweep(measure_at, workload: Workload,
              judge: Callable[[WorkloadResult], WorkloadResult]) -> tuple[WorkloadResult, SweepResult]:
    """``measure_at(workload) -> WorkloadResult`` measures one fixed-rate workload; ``judge``
    (``core.checks.judge``) gives each step its verdict."""
    spec = workload.sweep
    results: dict[float, WorkloadResult] = {}

    def run_at(rate: float) -> Step:
        assert workload.load is not None  # a rate sweep is an open loop
        w = replace(workload, sweep=None, load=replace(workload.load, rate=rate))  # workers, ray: kept
        res = judge(measure_at(w))
        results[rate] = res
        lost = workers_lost(res)
        if lost:  # not the server's verdict at this rate: the sweep stops, the run is an error
            return Step(rate, False, lost[0], stopped=True)
        if res.verdict == "error":  # unjudgeable (the client fell behind, a cached sample...): not a fail either
            return Step(rate, False, res.errors[0] if res.errors else "not judged", unjudged=True)
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
    for s in sw.steps:  # another step's lost workers: the reported step's are in its facts already
        if results[s.rate] is not res:
            res.facts.workers_failed += [f"rate_sweep step at {s.rate:g} req/s: {why}"
                                         for why in workers_lost(results[s.rate])]
    return res, sw
