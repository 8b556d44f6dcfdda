"""Ranking a server sweep's arms (``server_sweep:``, issue 37): each arm's row of ``ArmsInfo.arms``
(``core.result.sweep_parts``), its headroom, and the recommendation.  Pure; ``core.checks.arm_sweep``
runs it on the arms' judged measurements.

The recommendation rule: among the arms meeting every budget (their verdict is ``pass``), the one with
the most headroom, where an arm's headroom is its tightest budget's margin: the minimum over the
workload's budgets of budget ÷ observed (observed ÷ budget for a floor such as ``output_tps_min``), and
over each class's budgets where a mixed workload's ``mix`` part gives them.  1.0 is exactly at a budget,
2.0 is half of a ceiling.  Ties go to the arm listed first.  An arm that does not meet every budget is
never recommended, whatever its margin elsewhere."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..measure.coldstart import COLD_BUDGET
from ..errors import ConfigError
from ..measure.stats import fmt_stat
from ..spec.budgets import Budget, parse_budget
from .part import Part
from .result import METRIC_LABEL, WorkloadResult


@dataclass(frozen=True)
class Headroom:
    """An arm's margin on its tightest budget: ``ratio`` budget ÷ observed (a floor: observed ÷ budget),
    ``tightest`` that budget in words."""
    ratio: float
    tightest: str


def _ratio(observed: float, limit: float, floor: bool) -> float:
    if floor:
        return observed / limit if limit > 0 else math.inf
    if observed <= 0:
        return math.inf
    return limit / observed if math.isfinite(observed) else 0.0


def _observed(res: WorkloadResult, b: Budget) -> float | None:
    """The figure budget ``b`` was judged on, from the judged ``res``; None where it has none."""
    if b.is_fraction:
        return res.load.goodput_fraction if b.metric == "goodput" else res.load.fluidity_index
    if b.is_acceptance:
        return getattr(res.spec_decode, b.metric, None)
    s = res.summaries.get(b.metric)
    return s.get(b.stat) if s is not None and s.n else None


#: the budgets judged outside the per-request metrics, named as their checks' messages name them
_LABELS = {**METRIC_LABEL, "itl_stall": "ITL stall", "kv_transfer": "KV transfer"}


def _name(b: Budget) -> str:
    """``TTFT p95``, ``ITL stall p99``; a fraction or speculative-decoding floor by its key."""
    if b.is_fraction or b.is_acceptance or not b.stat:
        return b.key
    return f"{_LABELS.get(b.metric, b.metric)} {b.stat}"


def budget_label(b: Budget) -> str:
    """``TTFT p95 <= 500 ms``."""
    return f"{_name(b)} {'>=' if b.is_floor else '<='} {b.limit:g}{' ' + b.unit if b.unit else ''}"


def _class_budgets(res: WorkloadResult) -> list[tuple[str, Budget, float]]:
    """A mixed workload's per-class ``(class, budget, observed)`` from its ``mix`` part (``core.checks.mix``:
    each class's ``budgets`` rows, key and limit in the budget's own unit, with the figure each was judged on)."""
    mix = getattr(res, "mix", None)
    out = []
    for c in getattr(mix, "classes", None) or ():
        for row in c.get("budgets") or ():
            limit, obs = row.get("limit"), row.get("observed")
            if isinstance(limit, (int, float)) and isinstance(obs, (int, float)) and limit > 0:
                try:
                    b = parse_budget(str(row.get("key")), limit, "")
                except ConfigError:  # a key parse_budget does not know: named by its key, an ms ceiling
                    b = Budget(str(row.get("key")), str(row.get("key")), "", float(limit))
                out.append((str(c.get("name", "?")), b, float(obs)))
    return out


def headroom(res: WorkloadResult) -> Headroom | None:
    """``res``'s margin on its tightest budget (the module docstring's rule); None: no budget with a figure."""
    best: Headroom | None = None
    for b in res.workload.budgets:
        if b.key == COLD_BUDGET:  # one request after an unload, not the arm's samples
            continue
        obs = _observed(res, b)
        if obs is None:
            continue
        r = _ratio(obs, b.limit, b.is_floor)
        unit = f" {b.unit}" if b.unit else ""
        if best is None or r < best.ratio:
            best = Headroom(r, f"{_name(b)} {fmt_stat(obs)}{unit} vs {b.limit:g}{unit}")
    for name, b, obs in _class_budgets(res):
        r = _ratio(obs, b.limit, b.is_floor or b.key.endswith("_min"))
        unit = f" {b.unit}" if b.unit else ""
        if best is None or r < best.ratio:
            best = Headroom(r, f"{name} {_name(b)} {fmt_stat(obs)}{unit} vs {b.limit:g}{unit}")
    return best


def _stat(res: WorkloadResult, metric: str, stat: str) -> float | None:
    s = res.summaries.get(metric)
    return s.get(stat) if s is not None and s.n else None


def arm_row(name: str, setting: dict[str, Any], res: WorkloadResult, h: Headroom | None) -> dict[str, Any]:
    """One arm of ``ArmsInfo.arms`` from its judged measurement and its headroom (``headroom(res)``)."""
    texts = [v.message for v in res.violations] + res.failed_checks + res.errors
    why = texts[0] if texts else None
    row: dict[str, Any] = {"name": name, **setting, "requests": res.n + res.failed_requests,
                           "failed": res.failed_requests, "verdict": res.verdict,
                           "ttft_p95_ms": _stat(res, "ttft", "p95"), "itl_p99_ms": _stat(res, "itl", "p99"),
                           "tpot_p95_ms": _stat(res, "tpot", "p95")}
    if h is not None:
        row.update(headroom=round(h.ratio, 4) if math.isfinite(h.ratio) else None, tightest=h.tightest)
    if why:
        row["why"] = why.splitlines()[0]
    stall = getattr(res, "stall", None)  # another module's part: its figures as they are, when measured
    figures = stall.to_json() if isinstance(stall, Part) else {}
    figures = {k: v for k, v in figures.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if figures:
        row["stall"] = figures
    classes = [c for c in getattr(getattr(res, "mix", None), "classes", None) or () if isinstance(c, dict)]
    if classes:
        row["classes"] = [{"name": c.get("name"), "verdict": c.get("status"), "stats": c.get("stats") or {},
                           **({"why": str((c.get("violations") or c.get("errors"))[0])}
                              if c.get("violations") or c.get("errors") else {})} for c in classes]
    return row


def budgets_text(res: WorkloadResult) -> str:
    """Every budget the arms are judged on, ``TTFT p95 <= 500 ms and TPOT p95 <= 50 ms`` (classes prefixed)."""
    texts = [budget_label(b) for b in res.workload.budgets if b.key != COLD_BUDGET]
    texts += [f"{name} {budget_label(b)}" for name, b, _ in _class_budgets(res)]
    return " and ".join(texts) if texts else "no budgets"


@dataclass(frozen=True)
class Arm:
    """What the rule reads of one arm: its name, verdict and headroom (None: no budget with a figure)."""
    name: str
    verdict: str
    headroom: Headroom | None = None


def recommend(arms: list[Arm], budgets: str) -> tuple[list[str], str | None, str]:
    """``(meeting, recommended, sentence)``: the arms meeting every budget (block order), the recommended one
    (the module docstring's rule; None when none meets, or when there are no budgets to rank by) and why, with
    ``budgets`` the budgets in words (``budgets_text``)."""
    meeting = [a for a in arms if a.verdict == "pass"]
    names = [a.name for a in meeting]
    if not meeting:
        return [], None, f"no arm meets every budget ({budgets})"
    ranked = [a for a in meeting if a.headroom is not None]
    if not ranked:
        return names, None, (f"{len(meeting)} of {len(arms)} arms pass with no budget figure to rank them by: none "
                             f"recommended")
    best = max(ranked, key=lambda a: a.headroom.ratio if a.headroom is not None else -math.inf)  # the first of equals
    if len(meeting) == 1:
        return names, best.name, f"{best.name}: the only setting meeting {budgets}"
    assert best.headroom is not None
    return names, best.name, (f"{len(meeting)} of {len(arms)} arms meet every budget; recommended {best.name}: most "
                              f"headroom ({best.headroom.ratio:.2f}x on its tightest budget, {best.headroom.tightest})")
