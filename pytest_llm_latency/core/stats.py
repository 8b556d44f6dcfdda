"""Summary statistics of a sample.

Percentiles use numpy's ``"linear"`` method (Hyndman & Fan type 7, numpy's
default), named in ``PERCENTILE_METHOD`` and reported alongside results.
An empty sample raises ``EmptySampleError``: a statistic is never 0 by default.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable

from .errors import EmptySampleError

PERCENTILE_METHOD = "linear"
STATS = ("mean", "p50", "p90", "p95", "p99", "max")
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    min: float

    def get(self, stat: str) -> float:
        return float(getattr(self, stat))

    def as_dict(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in ("n", *STATS, "min")}


def summarize(values: Iterable[float], what: str = "sample") -> Summary:
    import numpy as np

    arr = np.asarray([float(v) for v in values], dtype=float)
    if arr.size == 0:
        raise EmptySampleError(f"no values for {what}: cannot compute statistics of an empty sample")
    if not np.all(np.isfinite(arr)):
        raise EmptySampleError(f"non-finite values in {what}: {arr[~np.isfinite(arr)][:3].tolist()}")
    pct = np.percentile(arr, list(PERCENTILES.values()), method=PERCENTILE_METHOD)
    return Summary(n=int(arr.size), mean=float(arr.mean()), p50=float(pct[0]), p90=float(pct[1]),
                   p95=float(pct[2]), p99=float(pct[3]), max=float(arr.max()), min=float(arr.min()))


def min_samples_for(stat: str) -> int:
    """Fewest samples for which a percentile is more than the max: n >= 1/(1-q).

    p90 needs 10, p95 needs 20, p99 needs 100.  mean/p50/max need 1.
    """
    q = PERCENTILES.get(stat)
    if q is None or q <= 50:
        return 1
    return math.ceil(round(1.0 / (1.0 - q / 100.0), 9))
