"""Planning a workload's load (for the runner and the drivers): does the load engine send it, how
many prompts to prepare, how many worker processes (``workers: N | auto``, ``ray:``) and how many
connections to keep alive."""
from __future__ import annotations

from ..core.schedule import Arrival
from ..core.workload import Workload
from .load import MAX_OPEN_LOOP_THREADS


def uses_load_engine(workload: Workload) -> bool:
    """The engine runs open loops, closed loops at concurrency > 1, and duration-bounded runs;
    a plain sequential workload keeps the runner's simple loop."""
    if getattr(workload, "sequential", False):  # samples: auto sends its own rounds (client.runner)
        return False
    return workload.load is not None or workload.concurrency > 1


def planned_requests(workload: Workload) -> int:
    """Samples to prepare prompts for: the measured ones plus, in a closed loop, the ramp-up
    and the drain (``2 x concurrency`` more; ramping over time may use more); with worker
    processes, each worker's warm-up prompts (``warmup`` each, unmeasured: ``client/workers.py``)."""
    n = worker_count(workload)
    return _planned(workload) + (workload.warmup * n if n > 1 or getattr(workload, "ray", None) else 0)


def worker_count(workload: Workload) -> int:
    """The worker processes sending ``workload`` (``workers: N | auto``; 1: this process)."""
    workers = getattr(workload, "workers", 1)
    address = getattr(workload, "ray", None)
    if address is not None:  # ray: one shard per node (client/ray_shards.py): auto = every live node
        from .ray_cluster import node_count

        return node_count(address) if workers == "auto" else int(workers)
    if workers == 1:
        return 1
    import os

    from ..core.load_spec import resolve_workers

    open_loop = workload.load is not None and workload.load.open_loop
    if getattr(workload, "trace", None) is not None:  # a trace replay: its rows (the sessions are not read yet)
        streams = min(max(workload.samples, 1), MAX_OPEN_LOOP_THREADS)
    else:
        streams = min(_planned(workload), MAX_OPEN_LOOP_THREADS) if open_loop else workload.concurrency
    return min(resolve_workers(workers, streams, os.cpu_count()), streams)  # a closed loop: a stream each


def _planned(workload: Workload) -> int:
    load = workload.load
    if load is not None and load.rate is not None:  # an open loop
        from ..core.schedule import planned_requests as planned

        return planned(Arrival(load.rate, load.arrival, load.burstiness), n=workload.samples,
                       duration_s=load.duration_s)
    if not uses_load_engine(workload):
        return workload.samples
    c = workload.concurrency
    return workload.samples + 2 * c + (4 * c if load is not None and load.ramp_up_s else 0)


def in_flight(workload: Workload) -> int:
    """Connections to keep alive: the concurrency, or the open loop's (or a trace replay's) thread cap."""
    if getattr(workload, "trace", None) is not None:
        return min(workload.samples, MAX_OPEN_LOOP_THREADS)
    if workload.load is not None and workload.load.open_loop:
        return min(planned_requests(workload), MAX_OPEN_LOOP_THREADS)
    return workload.concurrency
