"""Open loop: requests sent on a schedule (a rate, bursts, a ramp) whatever the server's
latency, so a stall shows in the next requests' queueing (the load engine, ``client.load.engine``)."""
from __future__ import annotations

from ...core.spec.workload import Workload
from ..placement.plan import uses_load_engine
from ..placement import placement_for
from .base import Run
from .closed_loop import ClosedLoop
from .pipeline import measure_samples


class OpenLoop(ClosedLoop):
    name = "open_loop"

    def applies(self, workload: Workload) -> bool:
        return uses_load_engine(workload) and workload.load is not None and workload.load.open_loop

    def measure(self, client, workload: Workload, run: Run):
        # workers: N (client/placement/processes/workers.py), ray: one shard per node
        # (client/placement/ray/shards.py); else this process
        if placement_for(workload).dealt:
            from .workers import WorkerOpenLoop

            return measure_samples(client, workload, run, WorkerOpenLoop(client, self))
        return measure_samples(client, workload, run, self)
