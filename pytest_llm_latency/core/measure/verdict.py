"""Statistical budget verdicts: pass / fail / inconclusive / not_decided at a stated confidence, on the
bounds of ``core.measure.confidence``; the rules per statistic (order statistics, t, ``extreme``, ``point``)
and ``samples: auto``'s stop: docs/verdicts.md#statistical-verdicts-confidence-bounds-and-samples-auto.

Fixed ``samples``: fixed-n bounds (``budget_verdict``); ``samples: auto``: ``SequentialVerdicts``, a
budget's first decision kept.  ``min_n_to_pass``: what ``core.result.sample_size.check_min_samples`` refuses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from ..statuses import BudgetStatus
from . import confidence as ci
from .kv_transfer import METRIC as KV_TRANSFER
from .prefill_overlap import STALL_METRIC
from .stats import PERCENTILES, fmt_stat, percentile

INF = math.inf
#: metrics whose values are streams' gaps: many per request and not independent draws (one step's delay is
#: every running stream's gap; ITL, and the gaps a long prefill stalled: ``core.measure.prefill_overlap``), so
#: judged on the point estimate even at a confidence, and never what ``samples: auto`` samples on for
GAP_METRICS = ("itl", STALL_METRIC)
#: judged on the point estimate: the gaps, and the KV transfer (a disaggregated target's pools' histograms)
POINT_METRICS = GAP_METRICS + (KV_TRANSFER,)


@dataclass(frozen=True)
class BudgetVerdict:
    key: str                 # ttft_p95
    status: BudgetStatus
    estimate: float          # the point estimate of the statistic
    lower: float             # -inf: no lower bound at this n
    upper: float             # +inf: no upper bound at this n
    n: int                   # samples it was decided on (the metric's sample count)
    confidence: float | None
    method: str              # order-statistic | sequential order-statistic | t | extreme | point
    would_decide: int | None = None   # inconclusive: samples that would likely decide it
    stopped_by: str | None = None     # not_decided: the budget whose fail stopped sampling (ttft_p95)

    def interval(self, unit: str) -> str:
        if self.confidence is None or self.method in ("extreme", "point"):
            return ""
        lo = "-inf" if self.lower == -INF else fmt_stat(self.lower)
        return f" ({self.confidence:.0%} bounds {lo}..{fmt_stat(self.upper)} {unit})"


def _q(stat: str) -> float | None:
    p = PERCENTILES.get(stat)
    return None if p is None else p / 100.0


def estimate(values: Sequence[float], stat: str) -> float:
    s = sorted(values)
    if stat == "mean":
        return INF if s[-1] == INF else math.fsum(s) / len(s)
    if stat == "max":
        return s[-1]
    if stat == "min":
        return s[0]
    return percentile(s, PERCENTILES[stat])


def _status(lower: float, upper: float, limit: float, floor: bool) -> BudgetStatus:
    if floor:  # must be >= limit
        return "pass" if lower >= limit else "fail" if upper < limit else "inconclusive"
    return "pass" if upper <= limit else "fail" if lower > limit else "inconclusive"


def budget_verdict(key: str, metric: str, stat: str, limit: float, floor: bool, values: Sequence[float],
          confidence: float | None, *, max_n: int | None = None, min_n: int = 1, alpha_share: float = 1.0,
          advise: bool = True) -> BudgetVerdict:
    """One budget on ``values`` (arrival order).  ``max_n``: sequential rule with that horizon;
    ``alpha_share``: the part of alpha this look may use (means, Bonferroni over looks);
    ``advise``: estimate how many samples would decide an inconclusive one."""
    n = len(values)
    est = estimate(values, stat)
    point = _status(est, est, limit, floor)
    if confidence is None or metric in POINT_METRICS:
        return BudgetVerdict(key, point, est, est, est, n, confidence, "point")
    if stat in ("max", "min"):
        return BudgetVerdict(key, point, est, est, est, n, confidence, "extreme")
    alpha = 1.0 - confidence
    if stat == "mean":
        lo, up = ci.mean_bounds(list(values), alpha * alpha_share)
        method = "t"
    elif max_n is not None:
        lo, up = ci.sequential_quantile(_q(stat), alpha, max_n, min(min_n, max_n)).bounds(sorted(values))
        method = "sequential order-statistic"
    else:
        q = _q(stat)
        assert q is not None, f"{stat}: a percentile here (mean, max and min are judged above)"
        lo, up = ci.quantile_bounds(sorted(values), q, alpha)
        method = "order-statistic"
    status = _status(lo, up, limit, floor)
    more = would_decide(values, stat, limit, alpha) if status == "inconclusive" and advise else None
    return BudgetVerdict(key, status, est, lo, up, n, confidence, method, more)


def would_decide(values: Sequence[float], stat: str, limit: float, alpha: float, cap: int = 100_000) -> int | None:
    """Samples that would likely decide an inconclusive budget, taking the sample as the
    truth: the smallest n whose fixed-n bound lands on the estimate's side of the limit
    when the sample's fraction below the limit holds.  None: more than ``cap``."""
    n0 = len(values)
    if stat == "mean":
        finite = [v for v in values if math.isfinite(v)]
        if len(finite) < 2:
            return None
        mean = math.fsum(finite) / len(finite)
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in finite) / (len(finite) - 1))
        gap = abs(mean - limit)
        if gap == 0:
            return None
        n = math.ceil((1.645 * sd / gap) ** 2)  # z for the default 95%; a rough count
        return max(n, n0 + 1) if n <= cap else None
    q = _q(stat)
    if q is None:  # max/min: a bound decides nothing more with more samples
        return None
    below = sum(1 for v in values if v <= limit) / n0
    if below == q:
        return None

    def decides(n: int) -> bool:
        if below > q:  # heading for pass: X_(u) <= limit needs u <= n * below
            u = ci.upper_rank(n, q, alpha)
            return u is not None and u <= math.floor(n * below)
        lo = ci.lower_rank(n, q, alpha)  # heading for fail: fewer than l samples <= limit
        return lo is not None and math.ceil(n * below) < lo

    n = n0 + 1
    while n <= cap and not decides(n):
        n = math.ceil(n * 1.25)
    if n > cap:
        return None
    lo_n, hi_n = max(n0 + 1, math.floor(n / 1.25)), n  # refine between the last two tries
    while lo_n < hi_n:
        mid = (lo_n + hi_n) // 2
        if decides(mid):
            hi_n = mid
        else:
            lo_n = mid + 1
    return hi_n


def decidable(stat: str, metric: str, confidence: float | None, max_n: int, sequential: bool,
              min_n: int = 1) -> bool:
    """Could any sample size up to ``max_n`` decide this budget either way?  With ``samples: auto``
    it must be able to *pass*: sampling on towards a verdict that can only be a fail is pointless."""
    q = _q(stat)
    if confidence is None or q is None or metric in POINT_METRICS:
        return stat != "mean" or max_n >= 1
    alpha = 1.0 - confidence
    if sequential:
        rule = ci.sequential_quantile(q, alpha, max_n, min(min_n, max_n))
        return any(r is not None for r in rule.upper)
    return max_n >= min(ci.min_n_to_bound(q, alpha), ci.min_n_to_bound(q, alpha, upper=False))


def min_n_to_pass(stat: str, metric: str, confidence: float | None, floor: bool = False) -> int:
    """Fewest values of the metric at which a budget judged on a *fixed* sample can pass at all: a
    quantile ceiling from q^n <= alpha on (a p95 at 95%: 59), a floor from (1-q)^n <= alpha, a mean
    from 2 (the t interval); the point estimate, ITL and extremes at any n: 1."""
    q = _q(stat)
    if confidence is None or metric in POINT_METRICS or (q is None and stat != "mean"):
        return 1
    if q is None:  # the mean
        return 2
    alpha = 1.0 - confidence
    n, rank = ci.min_n_to_bound(q, alpha, upper=not floor), ci.lower_rank if floor else ci.upper_rank
    while rank(n, q, alpha) is None:  # the ranks' float tails decide at the boundary ((1-q)^n == alpha)
        n += 1
    return n


def holds_up(b) -> bool:
    """Can ``samples: auto`` decide this budget (and so keep sampling until it is decided)?  Extremes, gaps
    (ITL, stalls), fractions of the run (goodput, fluidity: judged once, at the end) and the KV transfer (the
    pools' histograms, read after the run) can't."""
    return b.metric not in POINT_METRICS and b.stat not in ("max", "min") and not getattr(b, "is_fraction", False)


class SequentialVerdicts:
    """Budget decisions for ``samples: auto``: call ``check(values)`` after each round with
    every metric's values so far (arrival order); a budget's first decision is kept.
    Quantiles: ``sequential_quantile`` (any number of looks).  Means: checked at the
    doubling looks of ``confidence.mean_looks`` only, each at alpha / number of looks."""

    def __init__(self, budgets, confidence: float, min_n: int, max_n: int):
        self.budgets, self.confidence, self.min_n, self.max_n = tuple(budgets), confidence, min_n, max_n
        self.decided: dict[str, BudgetVerdict] = {}
        self.looks = ci.mean_looks(min_n, max_n)
        self._mean_done: dict[str, int] = {}
        self.stopped_by: str | None = None  # the budget whose fail stopped sampling early

    def check(self, values: Mapping[str, Sequence[float]]) -> bool:
        """Stop sampling?  True when every budget is decided (or needs no sequential decision),
        or as soon as one budget is decided *fail*: the test fails whatever the others would
        show, so more samples could not change its verdict (``stopped_by`` names that budget;
        ``final`` reports the open ones as ``not_decided``)."""
        for b in self.budgets:
            if b.key in self.decided:
                continue
            vals = values.get(b.metric) or []
            if not vals:
                continue
            v = self._judge_now(b, vals)
            if v is not None and v.status != "inconclusive":
                self.decided[b.key] = v
                if v.status == "fail" and self.stopped_by is None:
                    self.stopped_by = b.key
        return self.stopped_by is not None or self.all_decided()

    def all_decided(self) -> bool:
        return all(b.key in self.decided or not holds_up(b) for b in self.budgets)

    def open_budgets(self) -> list[str]:
        """Keys of the budgets that keep sampling going and are not decided yet."""
        return [b.key for b in self.budgets if b.key not in self.decided and holds_up(b)]

    def stop_reason(self, sent: int, max_samples: int) -> str:
        """Why sampling stopped, for ``llm.stop_reason`` and the terminal."""
        if self.stopped_by is not None:
            still = self.open_budgets()
            left = f"; not decided: {', '.join(still)}" if still else ""
            return f"{self.stopped_by} failed at {sent} samples: sampling stopped{left}"
        if self.all_decided():
            return (f"every budget decided at {sent} samples" if sent < max_samples else
                    f"every budget decided at max_samples ({sent})")
        return f"max_samples reached ({sent}) with budgets undecided"

    def _rule(self, b, vals: Sequence[float], advise: bool = True) -> BudgetVerdict:
        """The sequential rule: a mean at its Bonferroni share of alpha, a quantile on its first ``max_n``."""
        if b.stat == "mean":
            return budget_verdict(b.key, b.metric, b.stat, b.limit, b.is_floor, vals, self.confidence,
                                  alpha_share=1.0 / len(self.looks), advise=advise)
        return budget_verdict(b.key, b.metric, b.stat, b.limit, b.is_floor, vals[: self.max_n], self.confidence,
                              max_n=self.max_n, min_n=self.min_n, advise=advise)

    def _judge_now(self, b, vals: Sequence[float]) -> BudgetVerdict | None:
        if b.stat == "mean":
            look = max((k for k in self.looks if k <= len(vals)), default=None)
            if look is None or self._mean_done.get(b.key) == look:
                return None
            self._mean_done[b.key] = look
            return self._rule(b, vals[:look], advise=False)
        return self._rule(b, vals, advise=False) if holds_up(b) else None

    def final(self, b, vals: Sequence[float]) -> BudgetVerdict:
        """The verdict at the end: the kept decision, else the rule at the last sample."""
        if b.key in self.decided:
            return self.decided[b.key]
        if self.stopped_by is not None and holds_up(b):  # sampling stopped at another's fail: bounds for the report
            v = self._rule(b, vals, advise=False)
            return replace(v, status="not_decided", would_decide=None, stopped_by=self.stopped_by)
        if b.stat == "mean" or holds_up(b):
            return self._rule(b, vals)
        return budget_verdict(b.key, b.metric, b.stat, b.limit, b.is_floor, vals, self.confidence)
