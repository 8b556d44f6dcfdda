"""False-verdict rates and cost to verdict of statistical budget verdicts, on recorded latencies.

    .venv/bin/python benchmarks/sequential_verdicts.py [--runs 1000] [--seed 1] [--quick]

The truth is a recorded distribution (``benchmarks/data/*.json``, made by
``benchmarks/record_latency.py`` from the reference target and from real llama-server):
every simulated run draws its samples from it with replacement, so its true p95 is known
exactly (the recorded sample's p95 as a distribution: the smallest value x with
P(X <= x) >= 0.95).  For a budget at a distance d from that truth (true p95 = (1 - d) x
budget: the budget is met; = (1 + d) x budget: it is missed), each run is judged by

* ``auto``: ``samples: auto`` (min 10, max 200, checked after every sample, confidence 0.95)
  through the real ``core.measure.verdict.SequentialVerdicts``;
* ``fixed200-ci``: 200 samples, fixed-n order-statistic bounds at 0.95 (``core.measure.verdict.budget_verdict``);
* ``fixed200-point``: 200 samples, today's point estimate.

Reported per case: wrong verdicts (pass when the budget is missed, fail when it is met),
inconclusive runs, and the stopping time of ``auto`` (percentiles and histogram) against
the 200 of a fixed run.  Then, computed exactly from the distribution's true share of samples
within the budget, p = P(X <= budget) (``cost_table``): the rule's exact median stopping time
(``core.measure.confidence.crossing_times``), the previous design's (alpha spending on both sides),
and a **lower bound for any valid test**: whatever a test does with the samples, its chance to
have decided correctly by n is at most the power of the most powerful (randomized) fixed-n
binomial test of p at the same 5 % level (Neyman-Pearson; a distribution-free test must hold
its level for the distribution with the same shape below and above the budget and p at the
boundary, so it is a test of the binomial share), and its chance of a wrong verdict is at most
1 %; so no valid test, sequential or not, has a median below the first n where that power
reaches 49 %.  Wald's SPRT average sample number (alpha = beta = 5 %) is shown beside it.  Then anytime validity at the boundary (budget = the true p95, the
worst case): how often a wrong verdict is ever reached when checking after every sample,
for the sequential rule and for a naive repeated fixed-n check -- by simulation of the
count of samples below the budget (equivalent to the order-statistic check) and exactly
(``core.measure.confidence.crossing_probability``).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pytest_llm_latency.core.measure import confidence as ci  # noqa: E402
from pytest_llm_latency.core.measure.verdict import SequentialVerdicts, budget_verdict as judge  # noqa: E402
from pytest_llm_latency.core.spec.workload import Budget  # noqa: E402

CONF, MIN_N, MAX_N, FIXED_N, Q = 0.95, 10, 200, 200, 0.95


def load(metric_key: str = "ttft_ms") -> dict[str, list[float]]:
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "data", "*.json"))):
        d = json.load(open(path))
        for key in ("ttft_ms", "tpot_ms"):
            if d.get(key):
                out[f"{d['source']} {key[:-3].upper()}"] = sorted(d[key])
    return out


def true_quantile(sorted_vals: list[float], q: float) -> float:
    """The q-quantile of the empirical distribution: smallest x with F(x) >= q."""
    return sorted_vals[math.ceil(q * len(sorted_vals)) - 1]


def run_auto(draw, budget: Budget) -> tuple[str, int]:
    seq = SequentialVerdicts((budget,), CONF, MIN_N, MAX_N)
    vals: list[float] = []
    while len(vals) < MAX_N:
        vals.append(draw())
        if len(vals) >= MIN_N and seq.check({budget.metric: vals}):
            break
    v = seq.final(budget, vals)
    return v.status, len(vals)


def pct(sorted_ints: list[int], p: float) -> int:
    return sorted_ints[min(len(sorted_ints) - 1, max(0, math.ceil(p / 100 * len(sorted_ints)) - 1))]


def case(dist: list[float], distance: float, met: bool, runs: int, rng: random.Random) -> dict:
    truth = true_quantile(dist, Q)
    limit = truth / (1 - distance) if met else truth / (1 + distance)
    budget = Budget("x_p95", "ttft", "p95", limit)
    wrong = "fail" if met else "pass"
    draw = lambda: dist[rng.randrange(len(dist))]  # noqa: E731
    res = {"auto": {"pass": 0, "fail": 0, "inconclusive": 0}, "fixed200-ci": {"pass": 0, "fail": 0, "inconclusive": 0},
           "fixed200-point": {"pass": 0, "fail": 0, "inconclusive": 0}}
    stops = []
    for _ in range(runs):
        status, n = run_auto(draw, budget)
        res["auto"][status] += 1
        stops.append(n)
        sample = [draw() for _ in range(FIXED_N)]
        res["fixed200-ci"][judge("x_p95", "ttft", "p95", limit, False, sample, CONF).status] += 1
        res["fixed200-point"][judge("x_p95", "ttft", "p95", limit, False, sample, None).status] += 1
    stops.sort()
    return {"truth": truth, "limit": limit, "wrong": wrong, "res": res, "stops": stops}


def ump_power(n: int, p_true: float, met: bool, alpha: float = 1 - CONF) -> float:
    """Power at the true share of the most powerful level-alpha fixed-n test (randomized) of the
    binomial count on the deciding side: samples <= budget for a pass (null share Q), samples
    above it for a fail (null share 1 - Q)."""
    p0, p1 = (Q, p_true) if met else (1 - Q, 1 - p_true)
    c = ci.upper_rank(n, p0, alpha)  # smallest c with P0(K >= c) <= alpha
    if c is None:  # not even K = n: only the randomized share of K = n rejects
        c = n + 1
    at = ci.binom_sf(c - 1, n, p0) - ci.binom_sf(c, n, p0)
    gamma = (alpha - ci.binom_sf(c, n, p0)) / at if at > 0 else 0.0
    return ci.binom_sf(c, n, p1) + gamma * (ci.binom_sf(c - 1, n, p1) - ci.binom_sf(c, n, p1))


def floor_median(p_true: float, met: bool, wrong: float = 0.01, cap: int = 5000) -> int | None:
    """No valid test's median stopping time is below this: P(decided by n) <= power(n) + wrong."""
    for n in range(1, cap + 1):
        if ump_power(n, p_true, met) + wrong >= 0.5:
            return n
    return None


def wald_asn(p_true: float, met: bool, alpha: float = 1 - CONF, beta: float = 1 - CONF) -> float:
    """Wald's approximation of the SPRT's average sample number at the true share, testing the
    boundary share against the true one (the SPRT minimises E[N] there: Wald-Wolfowitz)."""
    p0, p1 = (Q, p_true) if met else (1 - Q, 1 - p_true)

    def term(a: float, b: float) -> float:
        return 0.0 if a == 0 else a * math.log(a / b)
    kl = term(p1, p0) + term(1 - p1, 1 - p0)
    return ((1 - beta) * math.log((1 - beta) / alpha) + beta * math.log(beta / (1 - alpha))) / kl


def cost_table(dists: dict, distances=(0.05, 0.2, 0.5)) -> list[str]:
    rule = ci.sequential_quantile(Q, 1 - CONF, MAX_N, MIN_N)
    old_lower, _ = ci._calibrate(Q, 1 - CONF, MIN_N, MAX_N, False)  # the previous fail side
    rows = []
    for name, dist in dists.items():
        truth = true_quantile(dist, Q)
        for d in distances:
            for met in (True, False):
                limit = truth / (1 - d) if met else truth / (1 + d)
                p = sum(v <= limit for v in dist) / len(dist)
                now = ci.median_time(ci.crossing_times(p, rule.upper if met else rule.lower, met, MIN_N))
                old = ci.median_time(ci.crossing_times(p, rule.upper if met else old_lower, met, MIN_N))
                fl = floor_median(p, met)
                asn = wald_asn(p, met)
                verdict = ("reached" if now is not None and now <= FIXED_N / 3 else
                           "**no valid test can reach it**" if fl is not None and fl > FIXED_N / 3 else
                           "not reached; a valid test could")
                rows.append(f"| {name} | {'-' if met else '+'}{d:.0%} | {p:.4f} | {now or '>200'} | {old or '>200'} "
                            f"| {fl} | {asn:.0f} | {verdict if d == 0.2 else ''} |")
    return rows


def boundary(runs: int, rng: random.Random, q: float = Q) -> dict:
    """Worst case: the true quantile at the budget, so a sample is <= budget with probability q.
    A wrong 'pass' (truth just above the budget) is the upper bound reaching below it; a wrong
    'fail' (truth at the budget) the lower bound rising above it.  Simulated as Bernoulli(q)
    counts of samples <= budget, checked after every sample from MIN_N on."""
    alpha = 1 - CONF
    rule = ci.sequential_quantile(q, alpha, MAX_N, MIN_N)
    naive_up, naive_lo = ci.naive_ranks(q, alpha, MAX_N), ci.naive_ranks(q, alpha, MAX_N, upper=False)
    hits = {"sequential pass": 0, "naive pass": 0, "sequential fail": 0, "naive fail": 0}
    for _ in range(runs):
        below, seen = 0, set()
        for n in range(1, MAX_N + 1):
            below += rng.random() < q
            if n < MIN_N:
                continue
            for name, rank, is_pass in (("sequential pass", rule.upper[n], True), ("naive pass", naive_up[n], True),
                                        ("sequential fail", rule.lower[n], False),
                                        ("naive fail", naive_lo[n], False)):
                if rank is not None and (below >= rank if is_pass else below < rank):
                    seen.add(name)
        for name in seen:
            hits[name] += 1
    exact = {"sequential pass": ci.crossing_probability(q, rule.upper, True, MIN_N),
             "naive pass": ci.crossing_probability(q, naive_up, True, MIN_N),
             "sequential fail": ci.crossing_probability(q, rule.lower, False, MIN_N),
             "naive fail": ci.crossing_probability(q, naive_lo, False, MIN_N)}
    return {"runs": runs, "hits": hits, "exact": exact}


def histogram(stops: list[int], edges=(10, 40, 60, 63, 70, 80, 100, 150, 199, 200)) -> str:
    cells, lo = [], 0
    for e in edges:
        c = sum(1 for s in stops if lo < s <= e)
        if c:
            cells.append(f"{lo + 1}-{e}: {c}" if e - lo > 1 else f"{e}: {c}")
        lo = e
    return ", ".join(cells)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="100 runs, only the 20%% cases")
    a = ap.parse_args()
    runs = 100 if a.quick else a.runs
    distances = (0.2,) if a.quick else (0.05, 0.2, 0.5)
    rng = random.Random(a.seed)
    t0 = time.time()
    print(f"# statistical verdicts on recorded latencies: {runs} runs per case, seed {a.seed}, "
          f"confidence {CONF}, auto = min {MIN_N} / max {MAX_N} checked every sample, fixed N = {FIXED_N}\n")
    print("| distribution | true p95 ms | distance | budget | wrong: auto | wrong: fixed200 CI | wrong: fixed200 point "
          "| inconclusive: auto / fixed200 CI | auto stop p5/p25/p50/p75/p95/max | median / 200 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    hists = []
    for name, dist in load().items():
        for d in distances:
            for met in (True, False):
                r = case(dist, d, met, runs, rng)
                w = r["wrong"]
                s = r["stops"]
                side = f"{'-' if met else '+'}{d:.0%}"
                print(f"| {name} | {r['truth']:.3f} | true p95 {side} vs budget | {r['limit']:.3f} "
                      f"| {r['res']['auto'][w] / runs:.1%} | {r['res']['fixed200-ci'][w] / runs:.1%} "
                      f"| {r['res']['fixed200-point'][w] / runs:.1%} "
                      f"| {r['res']['auto']['inconclusive'] / runs:.1%} / "
                      f"{r['res']['fixed200-ci']['inconclusive'] / runs:.1%} "
                      f"| {'/'.join(str(pct(s, p)) for p in (5, 25, 50, 75, 95, 100))} | {pct(s, 50) / FIXED_N:.2f} |")
                hists.append(f"- {name}, true p95 {side}: {histogram(s)}")
    print("\nStopping times of `auto` (samples: count of runs):\n")
    print("\n".join(hists))
    print("\n## cost to verdict, exact (auto's median from the rule's exact stopping-time law at the true share "
          "p = P(X <= budget); the floor no valid test can beat; Wald's SPRT ASN)\n")
    print("| distribution | true p95 vs budget | p = P(X <= budget) | auto median (exact) | previous rule median "
          "| floor: any valid test's median >= | Wald SPRT ASN (a = b = 5%) | <= 200/3 at ±20%? |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(cost_table(load(), (0.2,) if a.quick else (0.05, 0.2, 0.5))))
    b = boundary(max(runs * 20, 2000), rng)
    print(f"\n## anytime validity at the boundary (true p95 = budget, q = {Q}, checked after every sample "
          f"n = {MIN_N}..{MAX_N}, {b['runs']} simulated runs)\n")
    print("| rule | wrong verdict | ever reached (simulated) | exact | bound |")
    print("|---|---|---|---|---|")
    for name, label in (("sequential", "sequential (pass: alpha spending; fail: SPRT boundary; exact calibration)"),
                        ("naive", "naive: fixed-n bound re-checked after every sample")):
        for side in ("pass", "fail"):
            key = f"{name} {side}"
            print(f"| {label} | {side} | {b['hits'][key] / b['runs']:.2%} | {b['exact'][key]:.2%} | {1 - CONF:.0%} |")
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
