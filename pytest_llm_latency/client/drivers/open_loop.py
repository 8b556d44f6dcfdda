"""Open loop: requests sent on a schedule (a rate, bursts, a ramp) whatever the server's
latency, so a stall shows in the next requests' queueing (the load engine, ``client.load.engine``)."""
from __future__ import annotations

from ...core.spec.workload import Workload
from ..placement.plan import uses_load_engine
from .closed_loop import ClosedLoop
from .workers import WorkerOpenLoop


class OpenLoop(ClosedLoop):
    name = "open_loop"
    dealt = WorkerOpenLoop

    def applies(self, workload: Workload) -> bool:
        return uses_load_engine(workload) and workload.load is not None and workload.load.open_loop
