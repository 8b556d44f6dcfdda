"""One shard per node of the Ray cluster at ``ray:`` (``client/placement/ray/shards.py``: the records' stamps
moved to the driver's timeline; a closed loop's books in a ``LoopBooks`` actor; rounds on one actor
per node, ``client/placement/ray/pool.py``).  ``workers: auto``: every live node; a single node is still dealt."""
from __future__ import annotations

from dataclasses import dataclass

from ..base import Placement, RoundPool, Shares


@dataclass(frozen=True)
class RayNodes(Placement):
    kind = "ray"

    def planned(self) -> int:
        return self.count()

    def over(self, limit: int | None = None) -> Shares:
        return Shares(super().over(limit).count, True)

    def shares(self, base_url, warmed) -> Shares:
        return Shares(self.count(), True)  # the nodes, as counted: nothing to size

    @property
    def address(self) -> str:
        assert self.workload.ray is not None, "placement_for makes RayNodes only for a workload with ray:"
        return self.workload.ray

    def run(self, shards, credentials, *, span_s, request_timeout_s, progress=None, on_ready=None):
        from .shards import run_on_ray

        return run_on_ray(self.address, shards, credentials, span_s=span_s,
                          request_timeout_s=request_timeout_s, progress=progress, on_ready=on_ready)

    def pool(self, shards, credentials, *, request_timeout_s) -> RoundPool:
        from .pool import RayPool

        return RayPool(self.address, shards, credentials, request_timeout_s=request_timeout_s)
