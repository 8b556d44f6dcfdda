"""N arms measured in blocks, a block of each arm in turn (A B C A B C ...): the loop of an A/B run
(``ab_interleaved.py``, two arms) and of a server sweep (``arm_sweep.py``, N arms).  Every block of
every arm has its own salt context (fresh prompts); with ``stop`` (one server at a time: alternating
A/B, a flags sweep) each arm's client is a callable starting its target before its block, ``stop(name)``
stops it after, and every block sends the warmup requests again.  With ``workers: N`` every block of each
arm is the workload's loop over new worker processes, which warm up again too.

``combine_arm``: an arm's blocks as one measurement (``core.result.blocks.combine_blocks``), or the
first block whose prompt preparation failed, as the single-target path reports it."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ...core.result.blocks import combine_blocks, combine_workers, workers_failed
from ...core.result.result import WorkloadResult
from ...core.spec.mix_spec import window
from ...core.spec.workload import Workload
from ..placement import placement_for
from .base import Run


def measure_in_blocks(inner, workload: Workload, run: Run, arms: Sequence[tuple[str, Any]], block_size: int, *,
                      stop: Callable[[str], None] | None = None,
                      salt: Callable[[int, str], str] = lambda block, name: f"arm{block}:{name}",
                      ) -> tuple[dict[str, list[WorkloadResult]], int]:
    """``({arm name: its blocks' measurements}, blocks)``: ``workload.samples`` requests per arm in blocks of
    ``block_size``, each block measured by ``inner(workload)`` with salt context ``run.salt_context#salt(k, name)``.
    ``arms``: (name, client) in block order; with ``stop``, (name, a callable starting its target)."""
    n = workload.samples
    parts: dict[str, list[WorkloadResult]] = {name: [] for name, _ in arms}
    done, block = 0, 0
    while done < n:
        size = min(block_size, n - done)
        # workers, ray: kept; a mix: this block's window of the run's one class sequence, the same for every arm
        w = replace(workload, samples=size, sequential=False, budgets=(), mix=window(workload.mix, done, n))
        # a block's worker processes are new: they warm their connections, as a restarted server is
        spread = placement_for(w).over().dealt
        w = replace(w, warmup=workload.warmup if block == 0 or stop or spread else 0)
        for name, client in arms:
            if stop is not None:
                client = client()
            try:
                # no pool scraped (disagg): the pools' histograms are not merged across blocks, and the baseline
                # arm's blocks would scrape the candidate's pools (plugin.disagg_floor.in_blocks says so)
                at = replace(run, salt_context=f"{run.salt_context}#{salt(block, name)}", ab=None, sweep=None,
                             disagg=None)
                parts[name].append(inner(w).measure(client, w, at))
            finally:
                if stop is not None:
                    stop(name)  # stop it: the next arm starts next
        done += size
        block += 1
    return parts, block


def combine_arm(workload: Workload, results: Sequence[WorkloadResult], label: Callable[[int], str]) -> WorkloadResult:
    """One arm's measurement from its blocks; ``label(k)`` names block ``k`` (0-based) in texts."""
    prepared = [res for res in results if not res.prepared]
    if prepared:  # a prompt preparation failed: that result, as the single-target path reports it
        res = prepared[0]
        combine_workers([x.load for x in results], res.load)
        res.facts.workers_failed = workers_failed(results, label)
        return res
    # every block's records, facts and parts (core.result.blocks): a later block's problem is the arm's
    return combine_blocks(workload, results, label)
