"""The result part of a mixed workload (issue 37, ``core.checks.mix``): one row per class."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .part import Part


@dataclass
class MixInfo(Part):
    """A mixed workload's classes (``core.spec.mix_spec``), each judged on its own budgets: per class
    ``name``, ``weight``, ``requests`` (sent and measured), ``completed``, ``failed``, ``prompt_tokens`` /
    ``output_tokens`` (the class's lengths: a number or a distribution's description), ``status`` (pass | fail |
    error), ``budgets`` (``key``, ``limit``, ``unit``, ``observed``, ``status``), ``stats`` (``ttft_p95_ms``...: the
    class's TTFT, TPOT, ITL and E2E p50/p95/p99, failures counted as misses), ``violations`` and ``errors`` (the
    texts, without the class's name), and, when the class has stall budgets, its ``stall`` figures."""
    NAME: ClassVar[str] = "mix"
    classes: list[dict] = field(default_factory=list)
