"""Every driver by name, and the one function choosing a workload's driver.

``driver_for(workload)``: an A/B baseline target (interleaved or alternating), a server sweep or a
rate sweep wraps the workload's base driver; otherwise the base driver: a prompt sweep, agent sessions,
a trace replay, or how the samples are sent (sequential rounds, open loop, closed loop, serial)."""
from __future__ import annotations

from ...core.spec.workload import Workload
from .ab_alternating import ABAlternating
from .ab_interleaved import ABInterleaved
from .agent_sessions import AgentSessions
from .arm_sweep import ArmSweep
from .base import Driver
from .prompt_sweep import PromptSweep
from .rate_sweep import RateSweep
from .sending import SAMPLE_DRIVERS, sample_driver_for
from .trace_replay import TraceReplay
from .workers import WorkerReplay

BASE_DRIVERS = (PromptSweep(), AgentSessions(), TraceReplay(WorkerReplay))


def base_driver_for(workload: Workload) -> Driver:
    """A prompt sweep, agent sessions, or the sample driver."""
    return next((d for d in BASE_DRIVERS if d.applies(workload)), None) or sample_driver_for(workload)


#: wrappers, tried first: each measures through ``base_driver_for``
WRAPPERS = (ABAlternating(base_driver_for), ABInterleaved(base_driver_for), ArmSweep(base_driver_for),
            RateSweep(base_driver_for))

DRIVERS: dict[str, Driver] = {d.name: d for d in (*WRAPPERS, *BASE_DRIVERS, *SAMPLE_DRIVERS)}


def driver_for(workload: Workload) -> Driver:
    """The driver that measures ``workload``."""
    return next((d for d in WRAPPERS if d.applies(workload)), None) or base_driver_for(workload)
