"""A server sweep (``server_sweep:``): the test passes when at least one arm met every budget of the
workload (each arm judged on its own by the driver: ``client/drivers/arm_sweep.py``), and fails when none
did, naming each arm's first violation; when none met and an arm could not be judged, the sweep cannot
say whether that arm would have: an error.  The ``arms`` part (``core.result.sweep_parts.ArmsInfo``: every
arm's figures, the arms meeting every budget and the recommended one, by ``core.result.arm_ranking``'s
rule) is written here, through a part finding."""
from __future__ import annotations

import shlex

from ..findings import Finding, part_update
from ..result.arm_ranking import Arm, arm_row, budgets_text, headroom, recommend
from ..result.result import WorkloadResult

CHECK = "server_sweep"


def check_arm_sweep(res: WorkloadResult) -> list[Finding]:
    run = res.facts.server_sweep
    if run is None or not run.arms:
        return []
    rows, ranks = [], []
    for arm, judged in run.arms:
        h = headroom(judged)
        setting = {"url": arm.describe()} if arm.url is not None else {"flags": shlex.join(arm.flags)}
        rows.append(arm_row(arm.name, setting, judged, h))
        ranks.append(Arm(arm.name, judged.verdict, h))
    meeting, recommended, sentence = recommend(ranks, budgets_text(run.arms[0][1]))
    out = [part_update(CHECK, "arms", mode=run.sweep.mode, blocks=run.blocks, block_size=run.block_size, arms=rows,
                       meeting=meeting, recommended=recommended, recommendation=sentence, reported=run.reported)]
    if meeting:
        return out
    why = "".join(f"\n  {r['name']} ({r.get('flags') or r.get('url') or 'no extra flags'}): "
                  f"{r.get('why') or r['verdict']}" for r in rows)
    unjudged = [r["name"] for r in rows if r["verdict"] == "error"]
    if unjudged:
        return out + [Finding(CHECK, "error", f"server_sweep: no arm met every budget, and {', '.join(unjudged)} "
                                              f"could not be judged, so whether any setting meets them is not "
                                              f"known:{why}")]
    return out + [Finding(CHECK, "failed", f"server_sweep: {sentence}:{why}")]
