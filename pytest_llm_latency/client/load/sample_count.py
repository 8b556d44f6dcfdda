"""How many requests a workload sends, before any placement: whether the load engine sends it and
the samples to prepare prompts for (``client.placement.plan`` adds the shards' warm-up prompts;
``client.placement`` splits the streams)."""
from __future__ import annotations

from ...core.spec.schedule import Arrival
from ...core.spec.workload import Workload


def uses_load_engine(workload: Workload) -> bool:
    """The engine runs open loops, closed loops at concurrency > 1, and duration-bounded runs;
    a plain sequential workload keeps the runner's simple loop."""
    if getattr(workload, "sequential", False):  # samples: auto sends its own rounds (client.runner)
        return False
    return workload.load is not None or workload.concurrency > 1


def planned_samples(workload: Workload) -> int:
    """The measured requests (an open loop: its schedule's) plus, in a closed loop, the ramp-up and
    the drain (``2 x concurrency`` more; ramping over time may use more)."""
    load = workload.load
    if load is not None and load.rate is not None:  # an open loop
        from ...core.spec.schedule import planned_requests as planned

        return planned(Arrival(load.rate, load.arrival, load.burstiness), n=workload.samples,
                       duration_s=load.duration_s)
    if not uses_load_engine(workload):
        return workload.samples
    c = workload.concurrency
    return workload.samples + 2 * c + (4 * c if load is not None and load.ramp_up_s else 0)
