"""A/B interleaved: the candidate (the test's target) and the baseline target measured in blocks,
A B A B ..., both running at once; every block of every arm has its own salt context (fresh
prompts).  The baseline arm (``Run.ab``) is injected by the plugin (``plugin.ab``), which owns
the targets' processes."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ...core.result import WorkloadResult, measured
from ...core import spec_decode
from ...core.result_parts import SpecDecodeInfo, copy_parts
from ...core.workload import Workload
from .base import Run


class ABInterleaved:
    name = "ab_interleaved"
    alternating = False

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
            warm = workload.warmup if block == 0 or alternate else 0
            w = replace(workload, samples=size, warmup=warm, sequential=False, budgets=())
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
            prepared = [res for res in results if not res.prepared]
            if prepared:  # a prompt preparation failed: that result, as the single-target path reports it
                res = prepared[0]
            else:
                res = measured(workload, [r for x in results for r in x.records],
                               [f for x in results for f in x.failures])
                copy_parts(results[0], res)
                blocks = [x.spec_decode.to_json() for x in results]
                spec = spec_decode.combine(blocks, res.records)  # every block's, not the first block's alone
                res.spec_decode = SpecDecodeInfo(**spec) if spec is not None else SpecDecodeInfo()
                if spec is None and any(blocks):
                    res.notes.append(f"speculative decoding: only {sum(1 for b in blocks if b)} of {len(blocks)} "
                                     "blocks of this arm have acceptance figures (or from different sources), so "
                                     "the arm reports none")
                res.notes[:0] = [x for x in results[0].notes if x not in res.notes]
            out.append(res)
        out[0].load.set(ab_blocks=block, ab_block_size=ab.block_size,
                        ab_mode="alternating" if alternate is not None else "interleaved")
        return out[0], out[1]
