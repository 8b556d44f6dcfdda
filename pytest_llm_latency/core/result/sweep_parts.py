"""The parts of a sweep's result: ``ArmsInfo``, a server sweep's arms (``server_sweep:``, issue 37), filled by
``core.checks.arm_sweep`` with the rules of ``core.result.arm_ranking`` (which arm meets every budget,
which one is recommended and why)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .part import Part


@dataclass
class ArmsInfo(Part):
    """A server sweep (``server_sweep:``): per arm (``arms``, in block order) its ``name``, its ``flags`` or
    ``url``, ``requests``, ``failed``, ``verdict``, ``ttft_p95_ms``, ``itl_p99_ms``, ``tpot_p95_ms``,
    ``headroom`` (its tightest budget's budget ÷ observed), ``tightest`` (that budget in words), ``why`` (its
    first violation or error), ``stall`` (the arm's stall figures, when measured) and ``classes`` (a mixed
    workload's per-class verdicts); the arms meeting every budget, the recommended one (most headroom
    among them) and the sentence saying why.  The test's own figures are the recommended arm's (or, when
    none meets, the arm with the most headroom)."""
    NAME: ClassVar[str] = "arms"
    mode: str | None = None                    # flags (the managed command, restarted per arm) | urls
    blocks: int | None = None                  # blocks per arm
    block_size: int | None = None              # requests of one arm per block
    arms: list[dict] = field(default_factory=list)
    meeting: list[str] = field(default_factory=list)   # arms meeting every budget, in block order
    recommended: str | None = None
    recommendation: str | None = None          # "mnbt-2048: the only setting meeting ..."
    reported: str | None = None                # the arm whose figures are the test's
