"""``placement_for(workload)``: where its requests run, decided once.

- ``Local``: this process (``workers: 1``, or ``auto`` that can only be one);
- ``Processes``: worker processes of this host (``workers: N``, ``N > 1``, or ``auto`` that may be more);
- ``RayNodes``: one shard per node of the Ray cluster at ``ray:``."""
from __future__ import annotations

from ...core.spec.workload import Workload
from . import shares as _shares
from .base import Placement
from .local import Local
from .processes.placement import Processes
from .ray.placement import RayNodes


def placement_for(workload: Workload) -> Placement:
    """Where ``workload``'s requests run: the one place that reads its ``ray`` address and worker count."""
    if getattr(workload, "ray", None) is not None:
        return RayNodes(workload)
    return Processes(workload) if _shares.planned_workers(workload) > 1 else Local(workload)
