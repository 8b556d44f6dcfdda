"""Run a workload against a target: make the API client, then ``measure``: pick the workload's
driver (``client/drivers``), run it, return the measurement (judged by ``core.checks``).

No pytest import: the plugin, the fixture and the CLI all call ``measure``.
"""
from __future__ import annotations

from typing import Callable

from ..core.result.result import WorkloadResult
from ..core.spec.workload import Workload
from .drivers.base import ABArms, ProgressFn, Run, SweepArms
from .drivers.pipeline import connection_counts, stop_info, warm_up, _no_gc_pauses
from .drivers.registry import driver_for
from .drivers.sequential_rounds import send_samples
from .apis.target import Target, make_client

#: the pipeline's pieces, where callers and tests found them before the drivers package
__all__ = ["Target", "make_client", "measure", "send_samples", "stop_info", "warm_up", "connection_counts",
           "_no_gc_pauses"]


def measure(client, workload: Workload, *, seed: int = 0, nonce: str | None = None, salt_context: str = "",
            progress: ProgressFn | None = None, counter: Callable[[str], int] | None = None,
            extra: dict | None = None, judge: Callable[[WorkloadResult], WorkloadResult] | None = None,
            ab: ABArms | None = None, sweep: SweepArms | None = None) -> WorkloadResult:
    """Measure ``workload`` on ``client`` with its driver (``drivers.registry.driver_for``); never
    raises for a server fault (counted as failure).  The result is a measurement:
    ``core.checks.judge`` gives it its verdict (a rate sweep needs ``judge`` for its steps, an
    A/B workload the baseline arm ``ab``, a server sweep ``judge`` and its arms ``sweep``).

    ``seed`` fixes the prompt bodies; the salts come from ``nonce`` (the run's: a fresh one
    when None) and ``salt_context`` (which measurement of the run this is, so that two
    measurements of one workload in a run never share prompts)."""
    run = Run(seed=seed, nonce=nonce, salt_context=salt_context, progress=progress, counter=counter, extra=extra,
              judge=judge, ab=ab, sweep=sweep)
    return driver_for(workload).measure(client, workload, run)
