"""A/B alternating: for two managed targets that cannot both run (two models on one GPU): one
target at a time, A A A A | B B B B | ..., each block after a start warmed up again.  The start
and stop of the targets are injected by the plugin (``Run.ab``: ``start_a``, ``client_b`` a
starter, ``alternate``)."""
from __future__ import annotations

from collections.abc import Mapping

from ...core.spec.workload import Workload
from .ab_interleaved import ABInterleaved
from .base import Run


class ABAlternating(ABInterleaved):
    name = "ab_alternating"

    def applies(self, workload: Workload) -> bool:
        bt = workload.baseline_target
        return isinstance(bt, Mapping) and bt.get("mode") == "alternating"

    def measure_arms(self, client_a, workload: Workload, run: Run):
        if run.ab is None or run.ab.alternate is None or run.ab.start_a is None:
            raise TypeError("the alternating A/B driver needs Run.ab with start_a and alternate (from plugin.ab)")
        return super().measure_arms(run.ab.start_a, workload, run)
