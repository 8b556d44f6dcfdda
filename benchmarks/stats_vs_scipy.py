"""Hand-written statistics (``core/measure/confidence.py``) vs SciPy: agreement, import cost, speed.

    python3 benchmarks/stats_vs_scipy.py      # any interpreter that has scipy

The evidence behind not depending on SciPy (README "Statistical verdicts"): the plugin loads
in every pytest run and ``core/`` stays pure, so a dependency must buy accuracy or speed.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def import_ms(module: str, repeat: int = 5) -> float:
    """Median wall time of a fresh interpreter importing ``module`` minus one importing nothing."""
    def run(code: str) -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        return time.perf_counter() - t
    base = sorted(run("pass") for _ in range(repeat))[repeat // 2]
    return (sorted(run(f"import {module}") for _ in range(repeat))[repeat // 2] - base) * 1000


def main() -> None:
    from scipy.stats import binom, t as tdist
    import scipy

    from pytest_llm_latency.core.measure import confidence as ci

    rng = random.Random(0)
    worst = 0.0
    for _ in range(3000):
        n, p = rng.randint(1, 1000), rng.choice([0.5, 0.9, 0.95, 0.99])
        k = rng.randint(0, n)
        a, b = ci.binom_cdf(k, n, p), float(binom.cdf(k, n, p))
        worst = max(worst, abs(a - b) / b if b > 1e-12 else abs(a - b))
    tworst = max(abs(ci.t_ppf(pr, df) - float(tdist.ppf(pr, df)))
                 for pr in (0.9, 0.95, 0.975, 0.99, 0.995) for df in (1, 2, 3, 5, 10, 30, 100, 1000))
    ci.upper_rank.cache_clear()
    t0 = time.perf_counter()
    ours = [ci.upper_rank(n, 0.95, 0.05) for n in range(59, 1001)]
    t1 = time.perf_counter()
    theirs = [int(binom.ppf(0.95, n, 0.95)) + 1 for n in range(59, 1001)]  # smallest u: P(B >= u) <= 5%
    t2 = time.perf_counter()
    mismatch = sum(1 for a, b in zip(ours, theirs) if a != b)
    print(f"scipy {scipy.__version__}, Python {sys.version.split()[0]}")
    print(f"binom_cdf vs scipy.stats.binom.cdf: max relative difference {worst:.1e} (3000 cases, n <= 1000)")
    print(f"t_ppf vs scipy.stats.t.ppf: max absolute difference {tworst:.1e}")
    print(f"upper ranks n = 59..1000: ours {t1 - t0:.3f} s, scipy binom.ppf {t2 - t1:.3f} s, {mismatch} differ")
    print(f"import: scipy.stats {import_ms('scipy.stats'):.0f} ms, "
          f"pytest_llm_latency.core.measure.confidence {import_ms('pytest_llm_latency.core.measure.confidence'):.0f} ms")


if __name__ == "__main__":
    main()
