"""Is there a better fail side?  Two-piece SPRT boundaries against the rule in use, exactly.

    .venv/bin/python benchmarks/fail_side_variants.py

The fail side of ``samples: auto`` (a ceiling's lower bound, ``core.measure.confidence.sprt_lower``)
is one straight SPRT boundary (odds ratio 3), calibrated exactly to 5 %.  Its one case over
the cost target (``benchmarks/README.md``: the loaded membound TPOT, +20 %, 10.75 % of
samples above the budget, median 73 > 66.7) raises the question whether a boundary that
spends more alpha early does better.  This script builds two-piece boundaries -- slope
``sprt_slope(q, o1)`` and threshold t1 up to n = max_n // 3, spending a share s of alpha
there; slope ``sprt_slope(q, o2)`` and threshold t2 after, spending the rest; both
thresholds calibrated exactly (bisection on ``_crossing_counts``) -- and prints, from the
exact stopping-time law (``crossing_times``), the median and P(decided by max_n) of each
against the rule in use, over a range of shares above the budget.
"""
from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_llm_latency.core.measure import confidence as ci

ALPHA, MIN_N = 0.05, 10


def _counts(q: float, o1: float, o2: float, t1: float, t2: float, mid: int, max_n: int) -> list:
    s1, s2 = ci.sprt_slope(q, o1), ci.sprt_slope(q, o2)
    out: list = [None] * (max_n + 1)
    for n in range(MIN_N, max_n + 1):
        c = max(1, math.ceil((t1 + s1 * n if n <= mid else t2 + s2 * n) - 1e-9))
        out[n] = c if c <= n else None
    return out


def _calibrate(target: float, error) -> float:
    lo, hi = -50.0, 1000.0  # hi: never crosses
    while hi - lo > 1e-7:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if error(mid) > target else (lo, mid)
    return hi


def two_piece(q: float, o1: float, o2: float, share: float, max_n: int) -> tuple[tuple, float]:
    """Lower-bound ranks of the two-piece boundary and its exact error at the boundary."""
    mid, p_above = max_n // 3, 1.0 - q
    t1 = _calibrate(share * ALPHA, lambda t: ci._crossing_counts(
        p_above, _counts(q, o1, o2, t, 1e9, mid, max_n)[:mid + 1], MIN_N))
    t2 = _calibrate(ALPHA, lambda t: ci._crossing_counts(p_above, _counts(q, o1, o2, t1, t, mid, max_n), MIN_N))
    cs = _counts(q, o1, o2, t1, t2, mid, max_n)
    return tuple(None if c is None else n - c + 1 for n, c in enumerate(cs)), ci._crossing_counts(p_above, cs, MIN_N)


def mean_stop(times: list[float], max_n: int) -> float:
    """E[min(N, max_n)]: a run that never decides stops at max_n."""
    return math.fsum(n * x for n, x in enumerate(times)) + max_n * (1.0 - math.fsum(times))


def compare(q: float, max_n: int, ranks: tuple, shares_above: list[float]) -> list[tuple]:
    """Per share above the budget: (share, median in use, median two-piece, P(decided by
    max_n) in use, two-piece, E[N] in use, two-piece)."""
    base = ci.sequential_quantile(q, ALPHA, max_n, MIN_N).lower
    rows = []
    for a in shares_above:
        tb, tn = ci.crossing_times(1 - a, base, False, MIN_N), ci.crossing_times(1 - a, ranks, False, MIN_N)
        rows.append((a, ci.median_time(tb), ci.median_time(tn), sum(tb), sum(tn), mean_stop(tb, max_n), mean_stop(tn, max_n)))
    return rows


def main() -> None:
    q, max_n, case = 0.95, 200, 0.1075  # the loaded membound TPOT, +20 %
    base = ci.sequential_quantile(q, ALPHA, max_n, MIN_N).lower
    print(f"rule in use: median at {case:.2%} above = {ci.median_time(ci.crossing_times(1 - case, base, False, MIN_N))}")
    print("\n| odds before / after | alpha share by max_n/3 | error | median at 10.75 % above | E[N] there | median at 15 % | at 20 % | P(decided by 200) at 7 % |")
    print("|---|---|---|---|---|---|---|---|")
    for o1 in (1.5, 2.0, 2.5, 3.0):
        for o2 in (3.0, 5.0):
            for share in (0.7, 0.8, 0.9):
                ranks, err = two_piece(q, o1, o2, share, max_n)
                r = compare(q, max_n, ranks, [case, 0.15, 0.20, 0.07])
                print(f"| {o1} / {o2} | {share} | {err:.4f} | {r[0][2]} | {r[0][6]:.1f} | {r[1][2]} | {r[2][2]} | {r[3][4]:.3f} |")
    b = compare(q, max_n, base, [case, 0.15, 0.20, 0.07])
    print(f"| rule in use | - | {ci.crossing_probability(q, base, False, MIN_N):.4f} | {b[0][1]} | {b[0][5]:.1f} | {b[1][1]} "
          f"| {b[2][1]} | {b[3][3]:.3f} |")
    for o1, o2, share in ((2.0, 3.0, 0.8), (3.0, 3.0, 0.9)):
        print(f"\nTwo-piece, odds {o1} then {o2}, {share:.0%} of alpha by max_n/3, across shares and quantiles:")
        for q2, mx in ((0.95, 200), (0.95, 500), (0.9, 200), (0.99, 600), (0.5, 200)):
            ranks, err = two_piece(q2, o1, o2, share, mx)
            p0 = 1 - q2
            shares = sorted({min(0.99, p0 * m) for m in (1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.5, 3, 4, 6, 10)})
            print(f"\nq = {q2}, max_n = {mx}, error {err:.4f}")
            print("| share above | median: in use | two-piece | E[N]: in use | two-piece | P(decided by max_n): in use | two-piece |")
            print("|---|---|---|---|---|---|---|")
            for a, mb, mn, pb, pn, eb, en in compare(q2, mx, ranks, shares):
                print(f"| {a:.4f} | {mb or '>max'} | {mn or '>max'} | {eb:.1f} | {en:.1f} | {pb:.3f} | {pn:.3f} |")


if __name__ == "__main__":
    main()
