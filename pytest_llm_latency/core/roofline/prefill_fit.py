"""TTFT against prompt length: TTFT(n) = a + b·n fitted by Theil–Sen (the median of the pairwise
slopes, so one outlier moves neither term), and the shape of the curve.  Pure Python.  See
docs/roofline.md#the-fit.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from ..errors import ConfigError

#: TTFT that grows more slowly than linear: the overhead extrapolates below -max(this share of the
#: shortest prompt's TTFT, 3 x the residuals' median absolute deviation), or the slope between the
#: longest prompts is below SUBLINEAR_RATIO x the attention model's prediction (docs/roofline.md#linearity).
SUBLINEAR_SHARE = 0.25
SUBLINEAR_RATIO = 0.5
#: TTFT that grows faster than the attention model predicts: the last segment's slope above
#: SUPERLINEAR_RATIO x the predicted ratio to the first segment's slope (quadratic blow-up).
SUPERLINEAR_RATIO = 2.0


@dataclass(frozen=True)
class LineFit:
    intercept: float                 # y at x = 0
    slope: float                     # dy/dx
    residuals: tuple[float, ...]     # y - (a + b x), per sample, in input order

    @property
    def residual_mad(self) -> float:
        """Median absolute residual: the fit's typical miss, insensitive to an outlier."""
        return statistics.median(abs(r) for r in self.residuals)

    @property
    def residual_max(self) -> float:
        return max(abs(r) for r in self.residuals)


def _check_points(xs: Sequence[float], ys: Sequence[float]) -> None:
    if len(xs) != len(ys):
        raise ConfigError(f"prefill fit: {len(xs)} prompt lengths but {len(ys)} TTFTs")
    for v in list(xs) + list(ys):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"prefill fit: every point must be a finite number, got {v!r}")
    if len(set(xs)) < 2:
        raise ConfigError("prefill fit: needs samples at two or more prompt lengths, got "
                          f"{sorted(set(xs)) or 'none'}; give prompt_sweep at least two lengths")


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> LineFit:
    """Median of pairwise slopes (pairs with equal x skipped), intercept = median(y - b·x)."""
    _check_points(xs, ys)
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i])
              for i in range(len(xs)) for j in range(i + 1, len(xs)) if xs[j] != xs[i]]
    b = statistics.median(slopes)
    a = statistics.median(y - b * x for x, y in zip(xs, ys))
    return LineFit(a, b, tuple(y - (a + b * x) for x, y in zip(xs, ys)))


def medians_by_x(xs: Sequence[float], ys: Sequence[float]) -> list[tuple[float, float]]:
    """(x, median y) per distinct x, ascending."""
    groups: dict[float, list[float]] = {}
    for x, y in zip(xs, ys):
        groups.setdefault(x, []).append(y)
    return [(x, statistics.median(groups[x])) for x in sorted(groups)]


def segment_slopes(points: Sequence[tuple[float, float]]) -> list[float]:
    return [(y1 - y0) / (x1 - x0) for (x0, y0), (x1, y1) in zip(points, points[1:])]


@dataclass(frozen=True)
class Linearity:
    shape: str          # "linear" | "sublinear" | "superlinear" | "unknown" (fewer than 3 lengths)
    why: str = ""


def linearity(fit: LineFit, points: Sequence[tuple[float, float]],
              predicted_segment_cost: Sequence[float] | None = None) -> Linearity:
    """Is TTFT growing the way prefill does (the limits above; docs/roofline.md#linearity)?  ``points``:
    (n, median TTFT) ascending; ``predicted_segment_cost``: FLOPs per token of each segment, or None."""
    slack = max(SUBLINEAR_SHARE * points[0][1], 3.0 * fit.residual_mad)
    negative = fit.intercept < -slack
    at_zero = f"TTFT extrapolates to {fit.intercept:.3g} ms at 0 prompt tokens (below -{slack:.3g} ms)"
    if len(points) < 3:
        if negative:
            return Linearity("unknown", f"{at_zero}: either part of each prompt was not prefilled (a cache) or "
                             "TTFT grows faster than linear; sweep 3 or more lengths to tell")
        return Linearity("unknown")
    seg = segment_slopes(points)
    cost = list(predicted_segment_cost) if predicted_segment_cost else [1.0] * len(seg)
    predicted = cost[-1] / cost[0]
    ratio = seg[-1] / seg[0] if seg[0] > 0 else None
    if ratio is not None and ratio > SUPERLINEAR_RATIO * predicted:
        return Linearity("superlinear", f"TTFT per token between the longest prompts is {ratio:.2f}x that between "
                         f"the shortest, over {SUPERLINEAR_RATIO:g}x the {predicted:.2f}x the attention model "
                         "predicts: quadratic blow-up (attention without a fused kernel, e.g. an eager fallback)")
    if negative:
        return Linearity("sublinear", f"{at_zero}: it grows more slowly than the prompt, so part of each prompt was "
                         "not prefilled (a prefix cache or a warm path); these figures are not prefill")
    if ratio is None:
        return Linearity("unknown", "TTFT did not grow between the two shortest prompts")
    if ratio < SUBLINEAR_RATIO * predicted:
        return Linearity("sublinear", f"TTFT per token between the longest prompts is {ratio:.2f}x that between "
                         f"the shortest (expected {predicted:.2f}x): it grows sublinearly, so a cache or a warm path "
                         "is at work and these figures are not prefill")
    return Linearity("linear")
