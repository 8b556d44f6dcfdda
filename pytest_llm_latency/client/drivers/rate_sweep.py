"""Rate sweep (``load.rate_sweep``): open-loop runs at the rates ``core.spec.rate_sweep.bisect_rate``
picks, each measured by the workload's own driver and judged by the injected ``Run.judge``
(the verdict of a step picks the next rate); the measurement is the run at the capacity
(``client.drivers.rate_steps.run_sweep``)."""
from __future__ import annotations

from dataclasses import replace

from ...core.spec.workload import Workload
from .base import Run


class RateSweep:
    name = "rate_sweep"

    def __init__(self, inner):
        self.inner = inner  # () -> the driver of one fixed-rate step (registry.base_driver_for)

    def applies(self, workload: Workload) -> bool:
        return workload.sweep is not None

    def measure(self, client, workload: Workload, run: Run):
        from .rate_steps import run_sweep

        if run.judge is None:
            raise TypeError("a rate sweep needs Run.judge (core.checks.judge) to decide each step")

        def measure_at(w: Workload):  # a step: prompts of its own
            rate = w.load.rate if w.load is not None else None
            at = replace(run, salt_context=f"{run.salt_context}|rate={rate!r}")
            return self.inner(w).measure(client, w, at)
        return run_sweep(measure_at, workload, run.judge)[0]
