"""The ``samples: auto`` round loop, shared by one process (``sequential_rounds``) and worker
processes (``worker_rounds``): rounds of ``concurrency`` prompts, the budgets checked after each
round once ``min_samples`` are in (``core.measure.verdict.SequentialVerdicts`` decides "keep sampling")."""
from __future__ import annotations

from typing import Callable

from ...core.prompts.synthesis import Prompt
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure, metric_values
from ...core.measure.verdict import SequentialVerdicts
from ...core.spec.workload import Workload
from .base import ProgressFn


def send_rounds(send_round: Callable[[list[Prompt]], list], samples: list[Prompt], workload: Workload,
                progress: ProgressFn | None = None, recover: Callable[[list], None] = lambda _: None, *,
                halted: Callable[[], bool] = lambda: False) -> tuple[list, SequentialVerdicts]:
    """``samples: auto``: rounds of ``concurrency`` prompts, each round sent by ``send_round(batch)
    -> outcomes`` (this process's threads, ``sequential_rounds``, or worker processes,
    ``worker_rounds``), the budgets checked on every outcome so far after each round once
    ``min_samples`` are in, until every budget is decided or ``max_samples`` (``len(samples)``)
    are sent.  ``halted()``: stop now (a worker process was lost: the run is an error,
    ``core.checks.measurement_validity.check_workers``)."""
    assert workload.confidence is not None  # samples: auto decides at a confidence (core.spec.workload)
    total, conc = len(samples), workload.concurrency
    judge = SequentialVerdicts(workload.budgets, workload.confidence, workload.min_samples, total)
    outcomes: list = []
    sent = 0
    while sent < total and not halted():
        batch = samples[sent:sent + conc]
        outcomes += send_round(batch)
        sent += len(batch)
        if progress:
            progress(len(outcomes), total)
        if halted():
            break
        if len(outcomes) >= workload.min_samples:
            records = [o for o in outcomes if isinstance(o, RequestRecord)]
            failures = [o for o in outcomes if isinstance(o, Failure)]
            recover(records)  # between rounds: ITL judged on per-token counts
            if judge.check(metric_values(records, failures, workload.output_tokens)):
                break
    return outcomes, judge
