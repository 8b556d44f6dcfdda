"""A/B interleaved: the candidate (the test's target) and the baseline target measured in blocks,
A B A B ..., both running at once; every block of every arm has its own salt context (fresh
prompts).  The baseline arm (``Run.ab``) is injected by the plugin (``plugin.ab``), which owns
the targets' processes.  With ``workers: N`` every block of each arm is the workload's loop over new
worker processes (docs/load.md#rate-sweeps-and-ab-runs-over-workers).

The loop is ``arm_blocks.measure_in_blocks`` with two arms.  An arm is judged as one sample: its blocks
are combined by ``core.result.blocks.combine_blocks`` (every block's records, facts and parts are the
arm's); a worker lost or behind in any block of either arm is carried into the candidate's facts, and so
is the baseline arm itself (``facts.baseline_target_arm``: its validity checks are the run's)."""
from __future__ import annotations

from collections.abc import Mapping

from ...core.result.result import WorkloadResult
from ...core.spec.workload import Workload
from .arm_blocks import combine_arm, measure_in_blocks
from .base import Run


class ABInterleaved:
    name = "ab_interleaved"

    def __init__(self, inner):
        self.inner = inner  # (workload) -> the driver of one block (registry.base_driver_for)

    def applies(self, workload: Workload) -> bool:
        bt = workload.baseline_target
        return bt is not None and not (isinstance(bt, Mapping) and bt.get("mode") == "alternating")

    def measure(self, client, workload: Workload, run: Run) -> WorkloadResult:
        return self.measure_arms(client, workload, run)[0]

    def measure_arms(self, client_a, workload: Workload, run: Run) -> tuple[WorkloadResult, WorkloadResult]:
        """(candidate, baseline target): ``workload.samples`` requests each, in blocks of
        ``run.ab.block_size``.  Alternating (``run.ab.alternate``): ``client_a`` and the baseline
        arm's ``client_b`` are callables starting that arm's target, ``alternate(arm)`` stops it
        after its block, and every block sends the warmup requests again."""
        ab = run.ab
        if ab is None:
            raise TypeError("an A/B driver needs Run.ab (the baseline arm, from plugin.ab)")
        alternate = ab.alternate
        parts, blocks = measure_in_blocks(self.inner, workload, run, (("a", client_a), ("b", ab.client_b)),
                                          ab.block_size, stop=alternate, salt=lambda block, arm: f"ab{block}{arm}")
        out = []
        for arm in ("a", "b"):
            name = "candidate" if arm == "a" else "baseline target"

            def label(k: int, _name: str = name) -> str:
                return f"A/B block {k + 1} ({_name})"
            out.append(combine_arm(workload, parts[arm], label))
        out[0].facts.workers_failed += out[1].facts.workers_failed  # the candidate's verdict is the run's
        out[0].facts.baseline_target_arm = out[1]  # and so is the baseline arm's validity (core.checks.ab_arm)
        out[0].load.set(ab_blocks=blocks, ab_block_size=ab.block_size,
                        ab_mode="alternating" if alternate is not None else "interleaved")
        return out[0], out[1]
