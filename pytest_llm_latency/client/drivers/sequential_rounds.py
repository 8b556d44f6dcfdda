"""Sequential rounds (``samples: auto``): rounds of ``concurrency`` requests sent together,
the budgets checked after each round once ``min_samples`` are in (``core.measure.verdict.SequentialVerdicts``
decides "keep sampling"), until every budget is decided or ``max_samples`` are sent.  With
``workers: N`` (or ``ray:``) each round is split over worker processes or Ray nodes (``worker_rounds.WorkerRounds``)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from ...core.prompts.synthesis import Prompt
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure
from ...core.measure.verdict import SequentialVerdicts
from ...core.spec.workload import Workload
from ..placement import placement_for
from .base import ProgressFn, Run, Sent
from .pipeline import measure_samples
from .rounds import send_rounds


class SequentialRounds:
    name = "sequential_rounds"
    engine = False

    def applies(self, workload: Workload) -> bool:
        return bool(workload.sequential)

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        outcomes, sequential = send_samples(one, samples, workload, run.progress, recover=recover)
        return Sent(outcomes=outcomes, sequential=sequential)

    def measure(self, client, workload: Workload, run: Run):
        # workers: N: each round split over worker processes, ray: over its nodes; else this process
        if placement_for(workload).dealt:
            from .worker_rounds import WorkerRounds

            return measure_samples(client, workload, run, WorkerRounds(client, single=self))
        return measure_samples(client, workload, run, self)


def send_samples(one: Callable[[Prompt], "RequestRecord | Failure"], samples: list[Prompt], workload: Workload,
                 progress: ProgressFn | None = None,
                 recover: Callable[[list], None] = lambda _: None) -> tuple[list, SequentialVerdicts | None]:
    """Send the samples; outcomes in arrival order.  Fixed ``samples``: all of them, a closed loop at
    the workload's concurrency; ``samples: auto``: in rounds (``rounds.send_rounds``)."""
    total, conc = len(samples), workload.concurrency
    outcomes: list = []
    pool = ThreadPoolExecutor(max_workers=conc, thread_name_prefix="llm-latency") if conc > 1 else None
    each = map if pool is None else pool.map  # one at a time on this thread, or ``conc`` at once

    def send_round(batch: list[Prompt]) -> list:
        return list(each(one, batch))

    try:
        if not workload.sequential:
            for out in each(one, samples):
                outcomes.append(out)
                if progress:
                    progress(len(outcomes), total)
            return outcomes, None
        return send_rounds(send_round, samples, workload, progress, recover)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
