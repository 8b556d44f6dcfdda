"""Summary statistics of a sample, with censored misses (docs/concepts.md#warm-up-statistics-and-failed-requests):
type-7 percentiles (``PERCENTILE_METHOD``), a failed request a ``+inf`` miss that can only make a
percentile worse (``Summary.censored`` counts them), an empty sample ``EmptySampleError``, never 0.
Pure Python (no numpy).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable

from ..errors import EmptySampleError

PERCENTILE_METHOD = "linear"
STATS = ("mean", "p50", "p90", "p95", "p99", "max")
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
INF = math.inf


@dataclass(frozen=True)
class Summary:
    n: int          # samples, misses included
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    min: float
    censored: int = 0  # samples that are misses (+inf, or 0 for a throughput)

    def get(self, stat: str) -> float:
        return float(getattr(self, stat))

    def as_dict(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in ("n", *STATS, "min", "censored")}


def percentile(sorted_vals: list[float], q: float) -> float:
    """Type-7 percentile of an ascending list; ``+inf`` where the rank falls on a miss
    or between a value and a miss (interpolating towards infinity)."""
    h = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_vals) - 1)
    frac = h - lo
    a, b = sorted_vals[lo], sorted_vals[hi]
    if frac == 0 or a == b:
        return a
    if math.isinf(b):
        return INF
    return a + (b - a) * frac


def summarize(values: Iterable[float], what: str = "sample", *, censored: int = 0) -> Summary:
    """Statistics of ``values`` (``+inf`` allowed: misses).  ``censored`` says how many
    of the values are misses when a miss is not ``+inf`` (a throughput's 0)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise EmptySampleError(f"no values for {what}: cannot compute statistics of an empty sample")
    if bad := [v for v in vals if math.isnan(v) or v == -INF]:
        raise EmptySampleError(f"non-finite values in {what}: {bad[:3]}")
    misses = sum(1 for v in vals if v == INF) + censored
    pct = [percentile(vals, q) for q in PERCENTILES.values()]
    mean = INF if vals[-1] == INF else math.fsum(vals) / len(vals)
    return Summary(n=len(vals), mean=mean, p50=pct[0], p90=pct[1], p95=pct[2], p99=pct[3], max=vals[-1],
                   min=vals[0], censored=misses)


def fmt_stat(v: float | None, digits: int = 1) -> str:
    """A statistic for a message: ``inf`` for a miss, ``-`` for none."""
    if v is None:
        return "-"
    return "inf" if math.isinf(v) else f"{v:.{digits}f}"


def min_samples_for(stat: str) -> int:
    """Fewest samples for which a percentile is more than the max: n >= 1/(1-q).

    p90 needs 10, p95 needs 20, p99 needs 100.  mean/p50/max need 1.
    """
    q = PERCENTILES.get(stat)
    if q is None or q <= 50:
        return 1
    return math.ceil(round(1.0 / (1.0 - q / 100.0), 9))
