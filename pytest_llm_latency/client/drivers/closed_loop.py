"""Closed loop: ``concurrency`` streams, each sending its next request when the last one ends
(the load engine, ``client.load.engine``)."""
from __future__ import annotations

from ...core.spec.workload import Workload
from ..load.engine import run_load
from ..placement.plan import uses_load_engine
from ..placement import placement_for
from .base import Run, Sent
from .pipeline import measure_samples
from .workers import WorkerClosedLoop, WorkerOpenLoop


class ClosedLoop:
    name = "closed_loop"
    engine = True
    dealt: type[WorkerOpenLoop] = WorkerClosedLoop  # its driver over worker processes or Ray nodes

    def applies(self, workload: Workload) -> bool:
        return uses_load_engine(workload) and not (workload.load is not None and workload.load.open_loop)

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        load_run = run_load(one, samples, workload, seed=run.seed, progress=run.progress)
        return Sent(outcomes=list(load_run.outcomes), load_run=load_run)

    def measure(self, client, workload: Workload, run: Run):
        # workers: N, ray: one shard per node (``client.placement``); else this process
        if placement_for(workload).dealt:
            return measure_samples(client, workload, run, self.dealt(client, self))
        return measure_samples(client, workload, run, self)
