"""The sample drivers, in the order they are tried, and the one function choosing among them."""
from __future__ import annotations

from ...core.spec.workload import Workload
from .closed_loop import ClosedLoop
from .open_loop import OpenLoop
from .sequential_rounds import SequentialRounds
from .serial import Serial

SAMPLE_DRIVERS = (SequentialRounds(), OpenLoop(), ClosedLoop(), Serial())


def sample_driver_for(workload: Workload):
    """How ``workload``'s samples are sent: the first sample driver that applies (Serial always does)."""
    return next(d for d in SAMPLE_DRIVERS if d.applies(workload))
