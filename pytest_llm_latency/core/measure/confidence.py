"""Confidence bounds and sequential decisions: the statistics behind statistical verdicts
(docs/verdicts.md#statistical-verdicts-confidence-bounds-and-samples-auto).  Pure Python (``math`` only).

Quantiles: distribution-free order-statistic bounds, fixed-n (``quantile_bounds``) or anytime-valid up
to ``max_n`` (``sequential_quantile``: exact dynamic programming over the binomial count); means: a
Student-t interval (``mean_bounds``).  Every bound is one-sided at error ``alpha`` (``confidence =
1 - alpha``); a bound the data cannot give is ``-inf`` / ``+inf`` (too few samples).
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from functools import lru_cache, reduce
from typing import Sequence

INF = math.inf


# --------------------------------------------------------------------------- binomial
def _log_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -INF
    if p >= 1.0:
        return 0.0 if k == n else -INF
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), exact up to float rounding."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if k > n * p:  # sum the shorter, smaller tail
        return 1.0 - binom_sf(k + 1, n, p)
    return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k + 1)))


def binom_sf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) >= k)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if k <= n * p:
        return 1.0 - binom_cdf(k - 1, n, p)
    return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k, n + 1)))


# --------------------------------------------------------------------------- fixed-n quantile bounds
@lru_cache(maxsize=4096)
def upper_rank(n: int, q: float, alpha: float) -> int | None:
    """Smallest 1-based rank u with P(Bin(n, q) >= u) <= alpha: X_(u) is an upper
    confidence bound for the q-quantile.  None when even the maximum is not (n too small)."""
    lo, hi = max(1, math.floor(n * q)), n + 1
    while lo < hi:  # P(Bin >= u) decreases in u
        mid = (lo + hi) // 2
        if binom_sf(mid, n, q) <= alpha:
            hi = mid
        else:
            lo = mid + 1
    return lo if lo <= n else None


@lru_cache(maxsize=4096)
def lower_rank(n: int, q: float, alpha: float) -> int | None:
    """Largest 1-based rank l with P(Bin(n, q) <= l - 1) <= alpha: X_(l) is a lower
    confidence bound for the q-quantile.  None when even the minimum is not."""
    lo, hi = 0, min(n, math.ceil(n * q) + 1)
    while lo < hi:  # P(Bin <= l-1) increases in l
        mid = (lo + hi + 1) // 2
        if binom_cdf(mid - 1, n, q) <= alpha:
            lo = mid
        else:
            hi = mid - 1
    return lo if lo >= 1 else None


def _at(sorted_vals: Sequence[float], rank: int | None, missing: float) -> float:
    return missing if rank is None else float(sorted_vals[rank - 1])


def quantile_bounds(sorted_vals: Sequence[float], q: float, alpha: float) -> tuple[float, float]:
    """(lower, upper) one-sided (1 - alpha) bounds for the q-quantile (0 < q < 1) of the
    distribution an ascending sample came from; ``-inf`` / ``+inf`` where n is too small."""
    n = len(sorted_vals)
    return (_at(sorted_vals, lower_rank(n, q, alpha), -INF), _at(sorted_vals, upper_rank(n, q, alpha), INF))


def min_n_to_bound(q: float, alpha: float, upper: bool = True) -> int:
    """Fewest samples for which a finite upper (or lower) bound exists: q^n <= alpha
    (upper) or (1-q)^n <= alpha (lower)."""
    p = q if upper else 1.0 - q
    return math.ceil(round(math.log(alpha) / math.log(p), 9))


# --------------------------------------------------------------------------- sequential
#: share of alpha the upper-bound side may spend at once (see ``spent``)
FRONT_SHARE = 0.8


#: the lower bound's SPRT alternative: the odds of a sample above the q-quantile this many
#: times the q-quantile's own ((1-q)/q); for p95 a 13.6 % share above instead of 5 %
SPRT_ODDS = 3.0


def spent(n: int, min_n: int, max_n: int, alpha: float, upper: bool = True) -> float:
    """Lan-DeMets alpha-spending function of the upper bound (a ceiling's *pass*): the error
    allowed by sample n (cumulative) from ``min_n`` (the first look) to ``max_n``,
    t = (n - min_n + 1) / (max_n - min_n + 1), front-loaded: ``alpha * (0.8 + 0.2 t)``.  The
    first sample size at which the bound can exist at all is an atom -- every sample below the
    budget, probability q^n (59 samples for p95 at 5%) -- so most of alpha is spent there: a
    budget far from the truth passes at the first possible look (62 samples for p95).
    (``upper=False``: the Pocock-type ``alpha * ln(1 + (e - 1) t)`` the lower bound used before
    ``sprt_lower``; kept for comparison in ``benchmarks/sequential_verdicts.py``.)"""
    if n < min_n:
        return 0.0
    t = min(1.0, (n - min_n + 1) / (max_n - min_n + 1))
    if upper:
        return alpha * (FRONT_SHARE + (1.0 - FRONT_SHARE) * t)
    return alpha * math.log(1.0 + (math.e - 1.0) * t)


def sprt_slope(q: float, odds: float = SPRT_ODDS) -> float:
    """Slope of Wald's SPRT boundary for the count of samples above the q-quantile: share
    p0 = 1 - q against p1 with odds ``odds`` x p0's.  The log likelihood ratio after n samples
    with c above is c ln(p1/p0) + (n - c) ln((1-p1)/(1-p0)), so it crosses a threshold when
    c >= thr / ln(p1 (1-p0) / (p0 (1-p1))) + slope x n."""
    p0 = 1.0 - q
    o = odds * p0 / q
    p1 = o / (1.0 + o)
    return math.log((1.0 - p0) / (1.0 - p1)) / math.log(p1 * (1.0 - p0) / (p0 * (1.0 - p1)))


def _step(dist: list[float], p: float) -> list[float]:
    """P(count = s) after one more sample with success probability ``p``."""
    nxt = [0.0] * (len(dist) + 1)
    for s, w in enumerate(dist):
        nxt[s] += w * (1.0 - p)
        nxt[s + 1] += w * p
    return nxt


def _crossing_counts(p: float, counts: Sequence, start: int = 1) -> float:
    """Exact P(the count of successes (prob p) ever reaches ``counts[n]`` at some n >= start)."""
    return reduce(operator.add, crossing_times(p, counts, True, start), 0.0)  # in order (3.12's sum compensates)


def sprt_lower(q: float, alpha: float, min_n: int, max_n: int) -> tuple[tuple, float]:
    """Lower-bound ranks (a ceiling's *fail*) on a truncated binomial SPRT boundary: the bound
    at n crosses the truth when c_n = ceil(thr + slope x n) or more of n samples lie above the
    q-quantile (slope: ``sprt_slope``), checked at every n in ``min_n..max_n``.  The threshold
    is calibrated exactly: the smallest thr (bisection) whose crossing probability with the
    true share above at 1 - q is <= alpha.  Wald's SPRT decides a Bernoulli share in about the
    fewest samples for alternatives near p1; a straight boundary spends alpha evenly over the
    run instead of the spending function's fixed schedule.  Returns (ranks, error)."""
    slope = sprt_slope(q)

    def counts(thr: float) -> list:
        out: list = [None] * (max_n + 1)
        for n in range(min_n, max_n + 1):
            c = max(1, math.ceil(thr + slope * n - 1e-9))
            out[n] = c if c <= n else None
        return out

    lo, hi = 0.0, float(max_n + 1)  # hi: never crosses (error 0)
    while hi - lo > 1e-7:
        mid = (lo + hi) / 2.0
        if _crossing_counts(1.0 - q, counts(mid), min_n) > alpha:
            lo = mid
        else:
            hi = mid
    cs = counts(hi)
    ranks = tuple(None if c is None else n - c + 1 for n, c in enumerate(cs))
    return ranks, _crossing_counts(1.0 - q, cs, min_n)


@dataclass(frozen=True)
class SequentialQuantile:
    """Ranks for bounds on the q-quantile that hold *simultaneously* for every n <= max_n.

    ``upper[n]`` / ``lower[n]`` are 1-based ranks (None: no bound at that n).  Calibrated
    exactly: the binomial count S_n of samples below the quantile is followed by dynamic
    programming.  Upper: at each n the most lenient rank whose extra crossing probability
    keeps P(the bound crossed the truth at some n' <= n) <= ``spent(n)``.  Lower: the
    truncated SPRT boundary of ``sprt_lower``.  ``error_*`` is the probability that the bound
    ever crosses the truth by max_n, per side (<= alpha)."""

    q: float
    alpha: float
    max_n: int
    min_n: int
    upper: tuple = field(repr=False)
    lower: tuple = field(repr=False)
    error_upper: float
    error_lower: float

    def bounds(self, sorted_vals: Sequence[float]) -> tuple[float, float]:
        n = len(sorted_vals)
        if n > self.max_n:
            raise ValueError(f"{n} samples exceed max_n {self.max_n} of this sequential rule")
        return _at(sorted_vals, self.lower[n], -INF), _at(sorted_vals, self.upper[n], INF)


def _calibrate(q: float, alpha: float, min_n: int, max_n: int, upper: bool) -> tuple[tuple, float]:
    # upper side: crossing = S_n >= u_n (S_n ~ count below the quantile, success prob q);
    # lower side: crossing = T_n <= l_n - 1, the mirror image: count above, success prob 1-q.
    p = q if upper else 1.0 - q
    dist = [1.0]          # P(count = s, never crossed), s = 0..n
    crossed = 0.0
    ranks: list = [None]  # index 0: no sample
    for n in range(1, max_n + 1):
        nxt = _step(dist, p)
        allowed = spent(n, min_n, max_n, alpha, upper) - crossed
        tail, c = 0.0, n + 1  # c: smallest count that counts as a crossing
        while c > 0 and tail + nxt[c - 1] <= allowed:
            c -= 1
            tail += nxt[c]
        for s in range(c, n + 1):
            nxt[s] = 0.0
        crossed += tail
        dist = nxt
        if c > n:
            ranks.append(None)
        else:  # upper: rank u = c; lower: "count above >= c" <=> count below <= n - c -> rank l = n - c + 1
            ranks.append(c if upper else n - c + 1)
    return tuple(ranks), crossed


@lru_cache(maxsize=64)
def sequential_quantile(q: float, alpha: float, max_n: int, min_n: int = 1) -> SequentialQuantile:
    """The anytime-valid rule for one (quantile, error, first look, horizon): bounds for every
    n in ``min_n..max_n``, looked at as often as one likes.  Cached (O(max_n^2) to build)."""
    if not (0.0 < q < 1.0 and 0.0 < alpha < 1.0 and 1 <= min_n <= max_n):
        raise ValueError(f"need 0 < q < 1, 0 < alpha < 1, 1 <= min_n <= max_n; got {q}, {alpha}, {min_n}, {max_n}")
    up, e_up = _calibrate(q, alpha, min_n, max_n, True)
    lo, e_lo = sprt_lower(q, alpha, min_n, max_n)
    return SequentialQuantile(q, alpha, max_n, min_n, up, lo, e_up, e_lo)


def crossing_probability(q: float, ranks: Sequence, upper: bool = True, start: int = 1) -> float:
    """Exact P(some bound X_(rank_n), n = start..len-1, crosses the true q-quantile) when the
    rank sequence ``ranks[n]`` is used after every sample from ``start`` on."""
    return math.fsum(crossing_times(q, ranks, upper, start))


def crossing_times(p_below: float, ranks: Sequence, upper: bool = True, start: int = 1) -> list[float]:
    """Exact P(the first crossing is at n), n = 0..len-1, of the bounds X_(rank_n) checked
    after every sample from ``start`` on, across a value L with P(sample <= L) = ``p_below``:
    upper (a pass) when X_(u_n) <= L, i.e. >= u_n samples <= L; lower (a fail) when
    X_(l_n) > L, i.e. fewer than l_n.  With ``p_below`` = q it is the error of the rule at
    the boundary; at a distribution's true P(X <= budget), the rule's stopping-time law."""
    p = p_below if upper else 1.0 - p_below
    dist, out = [1.0], [0.0] * len(ranks)  # dist: P(count = s, never crossed), cut at the boundary
    for n in range(1, len(ranks)):
        dist = _step(dist, p)
        r = ranks[n]
        if n >= start and r is not None:
            c = r if upper else n - r + 1
            out[n] = math.fsum(dist[c:])
            del dist[c:]
    return out


def median_time(times: Sequence[float]) -> int | None:
    """The median of a stopping-time law (``crossing_times``): the first n by which the
    rule has stopped with probability >= 1/2; None if it stops less often than that."""
    acc = 0.0
    for n, x in enumerate(times):
        acc += x
        if acc >= 0.5:
            return n
    return None


def naive_ranks(q: float, alpha: float, max_n: int, upper: bool = True) -> tuple:
    """The fixed-n ranks at every n: what re-checking a fixed-n bound after each sample uses."""
    pick = upper_rank if upper else lower_rank
    return (None,) + tuple(pick(n, q, alpha) for n in range(1, max_n + 1))


# --------------------------------------------------------------------------- means
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta (modified Lentz, Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student-t CDF."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_ppf(prob: float, df: float) -> float:
    """Student-t quantile (bisection on ``t_cdf``; |error| < 1e-10)."""
    if not 0.0 < prob < 1.0:
        raise ValueError(f"t_ppf needs 0 < prob < 1, got {prob}")
    lo, hi = -1e6, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < prob:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2.0


def mean_bounds(values: Sequence[float], alpha: float) -> tuple[float, float]:
    """(lower, upper) one-sided (1 - alpha) Student-t bounds for the mean.  A miss (+inf)
    makes the mean +inf (both bounds); fewer than 2 finite values give no bound."""
    n = len(values)
    if any(math.isinf(v) for v in values):
        return INF, INF
    if n < 2:
        return -INF, INF
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_ppf(1.0 - alpha, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def mean_looks(min_n: int, max_n: int) -> list[int]:
    """Sample sizes at which a sequential mean is checked: doubling from ``min_n`` to ``max_n``.
    The t bounds there use alpha / len(looks) (Bonferroni over the looks)."""
    looks, n = [], max(2, min_n)
    while n < max_n:
        looks.append(n)
        n *= 2
    looks.append(max_n)
    return looks
