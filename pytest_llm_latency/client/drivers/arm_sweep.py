"""Server sweep (``server_sweep:``, ``core.spec.server_sweep``): the workload under N server settings, a
block of each arm in turn (``arm_blocks.measure_in_blocks``: the A/B loop with N arms), each arm's blocks
combined into one measurement and judged on the workload's own budgets by the injected ``Run.judge``, as
a rate sweep judges its steps.  The arms (a client each, or with ``stop`` a starter: a flags sweep runs one
server at a time) are injected by the plugin (``Run.sweep``, ``plugin.server_sweep``), which owns the
targets' processes.

The measurement returned is the recommended arm's (``core.result.arm_ranking``), or, when none meets
every budget, the arm with the most headroom (else the first): a copy, with every arm in its facts
(``facts.server_sweep``) for ``core.checks.arm_sweep`` to judge the sweep; a worker lost in any arm's
block is the run's."""
from __future__ import annotations

from dataclasses import replace

from ...core.result.arm_ranking import Arm, budgets_text, headroom, recommend
from ...core.result.facts import ServerSweepRun
from ...core.result.result import WorkloadResult
from ...core.result.result_parts import PART_NAMES
from ...core.spec.workload import Workload
from .arm_blocks import combine_arm, measure_in_blocks
from .base import Run


class ArmSweep:
    name = "arm_sweep"

    def __init__(self, inner):
        self.inner = inner  # (workload) -> the driver of one block (registry.base_driver_for)

    def applies(self, workload: Workload) -> bool:
        return workload.server_sweep is not None

    def measure(self, client, workload: Workload, run: Run) -> WorkloadResult:
        arms = run.sweep
        if arms is None:
            raise TypeError("a server sweep needs Run.sweep (its arms, from plugin.server_sweep)")
        if run.judge is None:
            raise TypeError("a server sweep needs Run.judge (core.checks.judge) to judge each arm")
        named = [(arm.name, c) for arm, c in zip(arms.arms, arms.clients)]
        parts, blocks = measure_in_blocks(self.inner, workload, run, named, arms.block_size, stop=arms.stop)
        judged = []
        for arm in arms.arms:
            def label(k: int, _name: str = arm.name) -> str:
                return f"sweep block {k + 1} (arm {_name})"
            judged.append(run.judge(combine_arm(workload, parts[arm.name], label)))
        ranks = [Arm(arm.name, res.verdict, headroom(res)) for arm, res in zip(arms.arms, judged)]
        _, recommended, _ = recommend(ranks, budgets_text(judged[0]))
        scored = [(a.headroom.ratio, -i, a.name) for i, a in enumerate(ranks) if a.headroom is not None]
        pick = recommended or (max(scored)[2] if scored else ranks[0].name)  # max: the first of equals
        k = [a.name for a in ranks].index(pick)
        mine = judged[k].facts
        facts = replace(mine, server_sweep=ServerSweepRun(
            workload.server_sweep, tuple(zip(arms.arms, judged)), pick, blocks, arms.block_size),
            workers_failed=list(dict.fromkeys(w for res in judged for w in res.facts.workers_failed)),
            gates=list(mine.gates), comparisons=list(mine.comparisons), sweep_parts=list(mine.sweep_parts))
        return _copy(judged[k], facts)


def _copy(res: WorkloadResult, facts) -> WorkloadResult:
    """``res``'s measurement, unjudged, with its own parts and lists (the arm stays as it was judged)."""
    parts = {name: getattr(res, name).copy() for name in PART_NAMES}
    return replace(res, facts=facts, notes=list(res.notes), findings=None, violations=[], failed_checks=[],
                   errors=[], causes=[], verdicts=[], **parts)
