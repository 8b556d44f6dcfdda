"""Planning a workload's load (for the runner and the drivers): how many prompts to prepare (the
measured ones, ``client.load.sample_count``, and the shards' warm-ups, ``client.placement``) and how
many connections to keep alive."""
from __future__ import annotations

from ...core.spec.workload import Workload
from ..load.engine import MAX_OPEN_LOOP_THREADS
from . import placement_for
from ..load.sample_count import planned_samples, uses_load_engine

__all__ = ["in_flight", "planned_requests", "uses_load_engine"]


def planned_requests(workload: Workload) -> int:
    """Samples to prepare prompts for: the measured ones plus, in a closed loop, the ramp-up
    and the drain (``client.load.sample_count.planned_samples``); dealt over worker processes or Ray
    nodes, each shard's warm-up prompts (``warmup`` each, unmeasured, prepared last:
    ``Placement.spare_prompts``; ``workers: auto``: for the most processes it may be sized to)."""
    return planned_samples(workload) + placement_for(workload).spare_prompts()


def in_flight(workload: Workload) -> int:
    """Connections to keep alive: the concurrency, or the open loop's (or a trace replay's) thread cap."""
    if getattr(workload, "trace", None) is not None:
        return min(workload.samples, MAX_OPEN_LOOP_THREADS)
    if workload.load is not None and workload.load.open_loop:
        return min(planned_requests(workload), MAX_OPEN_LOOP_THREADS)
    return workload.concurrency
