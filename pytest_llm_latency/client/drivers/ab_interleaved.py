"""A/B interleaved: the candidate (the test's target) and the baseline target measured in blocks,
A B A B ..., both running at once; every block of every arm has its own salt context (fresh
prompts).  The baseline arm (``Run.ab``) is injected by the plugin (``plugin.ab``), which owns
the targets' processes.  With ``workers: N`` every block of each arm is the workload's loop over new
worker processes (docs/load.md#rate-sweeps-and-ab-runs-over-workers).

An arm is judged as one sample: its blocks are combined by ``core.result.blocks.combine_blocks`` (every
block's records, facts and parts are the arm's); a worker lost or behind in any block of either arm is
carried into the candidate's facts, and so is the baseline arm itself (``facts.baseline_target_arm``: its
validity checks are the run's)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ...core.result.blocks import combine_blocks, combine_workers, workers_failed
from ...core.result.result import WorkloadResult
from ...core.spec.mix_spec import window
from ...core.spec.workload import Workload
from ..placement import placement_for
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
        n = workload.samples
        parts: dict[str, list] = {"a": [], "b": []}
        done, block = 0, 0
        while done < n:
            size = min(ab.block_size, n - done)
            # workers, ray: kept; a mix: this block's window of the run's class sequence, the same for both arms
            w = replace(workload, samples=size, sequential=False, budgets=(), mix=window(workload.mix, done, n))
            # a block's worker processes are new: they warm their connections, as a restarted server is
            spread = placement_for(w).over().dealt
            w = replace(w, warmup=workload.warmup if block == 0 or alternate or spread else 0)
            for arm, client in (("a", client_a), ("b", ab.client_b)):
                if alternate is not None:
                    client = client()
                try:
                    at = replace(run, salt_context=f"{run.salt_context}#ab{block}{arm}", ab=None)
                    parts[arm].append(self.inner(w).measure(client, w, at))
                finally:
                    if alternate is not None:
                        alternate(arm)  # stop it: the other one starts next
            done += size
            block += 1
        out = []
        for arm in ("a", "b"):
            results = parts[arm]
            name = "candidate" if arm == "a" else "baseline target"

            def label(k: int, _name: str = name) -> str:
                return f"A/B block {k + 1} ({_name})"
            prepared = [res for res in results if not res.prepared]
            if prepared:  # a prompt preparation failed: that result, as the single-target path reports it
                res = prepared[0]
                combine_workers([x.load for x in results], res.load)
                res.facts.workers_failed = workers_failed(results, label)
            else:  # every block's records, facts and parts (core.result.blocks): a later block's problem is the arm's
                res = combine_blocks(workload, results, label)
            out.append(res)
        out[0].facts.workers_failed += out[1].facts.workers_failed  # the candidate's verdict is the run's
        out[0].facts.baseline_target_arm = out[1]  # and so is the baseline arm's validity (core.checks.ab_arm)
        out[0].load.set(ab_blocks=block, ab_block_size=ab.block_size,
                        ab_mode="alternating" if alternate is not None else "interleaved")
        return out[0], out[1]
