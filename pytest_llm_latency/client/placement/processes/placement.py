"""Worker processes of this host (``workers: N | auto``): spawned processes, each with its own HTTP
client (``client/placement/processes/workers.py``), a closed loop's books in shared memory
(``client.placement.processes.closed.SharedLoopState``), rounds on a persistent pool
(``client/placement/processes/pool.py``)."""
from __future__ import annotations

from dataclasses import dataclass
from ...load.engine import Books
from ..base import Placement, RoundPool


@dataclass(frozen=True)
class Processes(Placement):
    kind = "processes"

    def run(self, shards, credentials, *, span_s, request_timeout_s, progress=None, on_ready=None):
        import multiprocessing

        from .workers import run_workers
        from .closed import SharedLoopState

        plan = shards[0].loop_plan if shards else None
        # the processes inherit the closed loop's books at their start
        shared: Books | None = None
        if plan is not None:
            shared = SharedLoopState(multiprocessing.get_context("spawn"), plan.concurrency)
        return run_workers(shards, credentials, span_s=span_s, request_timeout_s=request_timeout_s,
                           progress=progress, shared=shared, on_ready=on_ready)

    def pool(self, shards, credentials, *, request_timeout_s) -> RoundPool:
        from .pool import WorkerPool

        return WorkerPool(shards, credentials, request_timeout_s=request_timeout_s)
