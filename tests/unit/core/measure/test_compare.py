"""core.measure.compare: the seeded bootstrap ratio CI, the regression rule, tolerances, fingerprints."""
from __future__ import annotations

import math
import random

import pytest

from pytest_llm_latency.core.measure.compare import (DEFAULT_FLOORS_MS, DEFAULT_TOLERANCES, compare, compare_all,
    few_blocks_factor, fingerprint_changes, parse_tolerances, t_quantile)
from pytest_llm_latency.core.errors import ConfigError


def lognormal(n: int, median: float, sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [median * math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def test_a_real_15_percent_slowdown_is_a_regression_with_the_house_message():
    base = lognormal(100, 6.88, 0.05, 1)
    cand = [v * 1.15 for v in lognormal(100, 6.88, 0.05, 2)]
    c = compare("tpot_p50", base, cand, 0.05, seed=3)
    assert c.status == "regression"
    assert 1.10 < c.ratio < 1.20 and 1.0 < c.lower < c.ratio < c.upper
    msg = c.message()
    assert msg.startswith(f"TPOT p50 +{(c.ratio - 1) * 100:.1f}% vs baseline (")
    assert "95% CI +" in msg and msg.endswith("> tolerance 5%")
    assert "→" in msg and " ms;" in msg


def test_same_distribution_is_not_flagged_and_the_interval_covers_one():
    flagged = 0
    for rep in range(40):
        base, cand = lognormal(100, 50, 0.2, 2 * rep), lognormal(100, 50, 0.2, 2 * rep + 1)
        c = compare("ttft_p50", base, cand, 0.10, seed=rep, n_boot=400)
        flagged += c.status == "regression"
    assert flagged == 0


def test_significant_but_within_tolerance_is_ok_and_big_but_noisy_is_ok():
    base = lognormal(400, 10, 0.01, 1)
    small = [v * 1.03 for v in lognormal(400, 10, 0.01, 2)]
    c = compare("tpot_p50", base, small, 0.05, seed=0, n_boot=400)
    assert c.lower > 1 and c.status == "ok"          # real, but below the tolerance
    noisy_b, noisy_c = lognormal(5, 10, 1.0, 3), lognormal(5, 12, 1.0, 4)
    c = compare("ttft_p50", noisy_b, noisy_c, 0.05, seed=0, n_boot=400)
    assert c.lower <= 1 or c.ratio <= 1.05            # never a regression unless significant
    assert c.status != "regression" or c.lower > 1


def test_improvement_is_reported_and_output_tps_lower_is_worse():
    base = lognormal(100, 100, 0.05, 1)     # 100 ms: a 20 % change (20 ms) is far above the 5 ms floor
    faster = [v * 0.8 for v in lognormal(100, 100, 0.05, 2)]
    assert compare("e2e_p50", base, faster, 0.10, seed=1, n_boot=400).status == "improvement"
    tps_b = [10000 / v for v in base]
    tps_c = [10000 / v for v in faster]       # the faster candidate has a higher tok/s: an improvement
    c = compare("output_tps_p50", tps_b, tps_c, 0.10, seed=1, n_boot=400)
    assert c.status == "improvement" and c.ratio < 1 and "tok/s" in c.message()


def test_seeded_reproducible_and_paired_needs_equal_lengths():
    base, cand = lognormal(50, 10, 0.2, 1), lognormal(50, 11, 0.2, 2)
    a = compare("ttft_p95", base, cand, 0.1, seed=7, n_boot=300)
    b = compare("ttft_p95", base, cand, 0.1, seed=7, n_boot=300)
    c = compare("ttft_p95", base, cand, 0.1, seed=8, n_boot=300)
    assert a == b and (a.lower, a.upper) != (c.lower, c.upper)
    with pytest.raises(ValueError, match="one length"):
        compare("ttft_p50", base, cand[:-1], 0.1, paired=True)
    with pytest.raises(ValueError, match="empty sample"):
        compare("ttft_p50", [], cand, 0.1)


def test_paired_design_cancels_shared_drift():
    # both arms share a slow drift much larger than the 15% effect: the paired interval is tight
    drift = [1 + 2.0 * i / 60 for i in range(60)]
    rng = random.Random(5)
    base = [10 * d * math.exp(rng.gauss(0, 0.02)) for d in drift]
    cand = [11.5 * d * math.exp(rng.gauss(0, 0.02)) for d in drift]
    paired = compare("tpot_p50", base, cand, 0.05, seed=1, n_boot=500, paired=True)
    indep = compare("tpot_p50", base, cand, 0.05, seed=1, n_boot=500)
    assert paired.status == "regression"
    assert paired.upper - paired.lower < (indep.upper - indep.lower) / 2


def test_misses_make_the_candidate_worse_never_equal():
    base = lognormal(20, 10, 0.1, 1)
    cand = lognormal(20, 10, 0.1, 1)[:10] + [math.inf] * 10
    c = compare("ttft_p95", base, cand, 0.1, seed=0, n_boot=200)
    assert c.status == "regression" and math.isinf(c.ratio)
    assert "+inf%" in c.message()


def test_tolerances_parse_from_yaml_mapping_cli_list_and_reject_typos():
    assert parse_tolerances({"ttft_p95": "10%", "tpot_p50": 0.05}, "f.yaml: regression") == {
        "ttft_p95": 0.10, "tpot_p50": 0.05}
    assert parse_tolerances("ttft_p95=10%,tpot_p50=5 %", "--llm-latency-regression") == {
        "ttft_p95": 0.10, "tpot_p50": 0.05}
    with pytest.raises(ConfigError, match=r"--x: unknown regression key 'tfft_p95'"):
        parse_tolerances("tfft_p95=10%", "--x")
    with pytest.raises(ConfigError, match="expected a percentage"):
        parse_tolerances({"ttft_p95": "ten"}, "f.yaml")
    with pytest.raises(ConfigError, match="metric_stat=tolerance"):
        parse_tolerances(["ttft_p95"], "--x")
    assert set(DEFAULT_TOLERANCES) == {"ttft_p50", "ttft_p95", "tpot_p50", "e2e_p50"}


def test_compare_all_skips_missing_metrics_with_a_reason():
    res, skipped = compare_all({"ttft": [1.0] * 10}, {"ttft": [1.0] * 10, "tpot": [1.0] * 10},
                               {"ttft_p50": 0.1, "tpot_p50": 0.05}, n_boot=50)
    assert [c.key for c in res] == ["ttft_p50"] and res[0].status == "ok"
    assert skipped == ["tpot_p50: no TPOT samples in the baseline"]


def test_fingerprint_changes_lists_what_changed_and_ignores_time():
    a = {"model": "m1", "server": {"version": "b1", "header": "llama.cpp"}, "time": "t1", "plugin_version": "1"}
    b = {"model": "m2", "server": {"version": "b2", "header": "llama.cpp"}, "time": "t2", "plugin_version": "2"}
    assert fingerprint_changes(a, b) == ["model: 'm1' -> 'm2'", "server.version: 'b1' -> 'b2'"]
    assert fingerprint_changes(a, a) == []


def test_a_change_under_the_absolute_floor_is_never_a_regression():
    # the A/A false alarm this rule exists for: a 3.5 ms TTFT p95 moved +2 ms by scheduling noise
    base = lognormal(40, 3.0, 0.05, 1)
    cand = [v + 2.0 for v in lognormal(40, 3.0, 0.05, 2)]      # +65 %, significant, but 2 ms
    c = compare("ttft_p95", base, cand, 0.15, seed=0, n_boot=400)
    assert c.lower > 1.15 and c.floor == DEFAULT_FLOORS_MS["ttft"] == 5.0
    assert c.status == "ok" and c.under_floor
    assert "under the 5 ms floor" in c.message()
    # the same change with the floor off (ttft_floor: 0) is a regression; above a floor too
    assert compare("ttft_p95", base, cand, 0.15, seed=0, n_boot=400, floor=0).status == "regression"
    assert compare("ttft_p95", base, cand, 0.15, seed=0, n_boot=400, floor=1.5).status == "regression"
    # an improvement under the floor is not reported either
    assert compare("ttft_p95", cand, base, 0.15, seed=0, n_boot=400).status == "ok"
    # a miss (+inf) is never "under the floor"
    assert compare("ttft_p95", base, cand[:-3] + [math.inf] * 3, 0.15, seed=0, n_boot=400).status == "regression"


def test_floors_are_set_like_tolerances_and_used_by_compare_all():
    tol = parse_tolerances("ttft_p95=10%,ttft_floor=1ms,tpot_floor=0.5 ms,e2e_floor=0.002s", "--x")
    assert tol == {"ttft_p95": 0.10, "ttft_floor": 1.0, "tpot_floor": 0.5, "e2e_floor": 2.0}
    assert parse_tolerances({"itl_floor": 0}, "f.yaml")["itl_floor"] == 0.0
    with pytest.raises(ConfigError, match="f.yaml: unknown regression key 'gpu_floor'.*<metric>_floor"):
        parse_tolerances({"gpu_floor": "1ms"}, "f.yaml")
    with pytest.raises(ConfigError, match="--x: regression ttft_floor: expected a duration like 5ms"):
        parse_tolerances("ttft_floor=-1ms", "--x")
    base = lognormal(40, 3.0, 0.05, 1)
    cand = [v + 2.0 for v in lognormal(40, 3.0, 0.05, 2)]
    comps, _ = compare_all({"ttft": base}, {"ttft": cand}, {"ttft_p50": 0.1, "ttft_floor": 1.0}, seed=0, n_boot=300)
    assert [(c.key, c.floor, c.status) for c in comps] == [("ttft_p50", 1.0, "regression")]
    comps, _ = compare_all({"ttft": base}, {"ttft": cand}, {"ttft_p50": 0.1}, seed=0, n_boot=300)
    assert [(c.key, c.floor, c.status) for c in comps] == [("ttft_p50", 5.0, "ok")]


def test_block_bootstrap_counts_between_block_noise_that_pairs_hide():
    # 8 blocks of 5 pairs; each block of the candidate shares one random offset (noise that lasts
    # a block, e.g. a neighbour's burst), no true difference: resampling single pairs treats the
    # 40 pairs as independent and gives a narrower interval than resampling the 8 blocks.
    rng = random.Random(5)
    base, cand = [], []
    for _ in range(8):
        shift = math.exp(rng.gauss(0, 0.15))
        base += [100 * math.exp(rng.gauss(0, 0.02)) for _ in range(5)]
        cand += [100 * shift * math.exp(rng.gauss(0, 0.02)) for _ in range(5)]
    pairs = compare("e2e_p50", base, cand, 0.05, seed=1, n_boot=600, paired=True)
    blocks = compare("e2e_p50", base, cand, 0.05, seed=1, n_boot=600, paired=True, block=5)
    assert blocks.blocks == 8 and pairs.blocks == 0
    assert blocks.upper - blocks.lower > 1.5 * (pairs.upper - pairs.lower)
    assert blocks.as_dict()["blocks"] == 8 and blocks.as_dict()["floor_ms"] == 5.0


def test_t_quantiles_match_the_table_and_few_blocks_widen_the_interval():
    for df, table in ((1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042)):
        assert t_quantile(0.975, df) == pytest.approx(table, rel=0.01)
    f = [few_blocks_factor(k, 0.95) for k in (2, 4, 8, 16)]
    assert f[0] > 9 and 1.8 < f[1] < 1.9 and 1.25 < f[2] < 1.35 and f == sorted(f, reverse=True)
    assert few_blocks_factor(1, 0.95) == 1.0


def test_two_blocks_cannot_make_a_burst_significant(monkeypatch):
    # the false alarm of an alternating A/A run on a loaded machine: 2 blocks of 10 per arm, the
    # candidate's blocks caught stalls (+12 ms; one in its first block, four in its second), the
    # baseline's none.  The 3 distinct block resamples all put the ratio above 1; 2 blocks that
    # disagree this much are no evidence of a systematic change, and the correction says so.
    import pytest_llm_latency.core.measure.compare as mod

    rng = random.Random(3)
    base = [10 * math.exp(rng.gauss(0, 0.1)) for _ in range(20)]
    cand = [10 * math.exp(rng.gauss(0, 0.1)) + (12 if i in (3, 11, 13, 15, 17) else 0) for i in range(20)]
    c = compare("ttft_p95", base, cand, 0.15, seed=0, n_boot=600, paired=True, block=10)
    assert c.blocks == 2 and c.ratio > 1.5 and c.cand - c.base > 5
    assert c.lower < 1 and c.status == "ok"
    monkeypatch.setattr(mod, "few_blocks_factor", lambda k, conf: 1.0)   # the raw block bootstrap
    raw = compare("ttft_p95", base, cand, 0.15, seed=0, n_boot=600, paired=True, block=10)
    assert raw.lower > 1 and raw.status == "regression"


def test_a_tail_is_compared_only_with_two_values_beyond_it():
    # a p95 of 20 samples is the second-largest value: one stalled request moves it, and the
    # bootstrap of it calls that significant -- so a tail needs n * (1 - q) >= 2 in both samples
    base = lognormal(20, 50, 0.05, 1)
    cand = lognormal(20, 50, 0.05, 2)[:-2] + [90.0, 95.0]     # two stalls: p95 +80 %
    comps, skipped = compare_all({"ttft": base}, {"ttft": cand}, {"ttft_p95": 0.15, "ttft_p90": 0.15,
                                                                  "ttft_p50": 0.1}, seed=0, n_boot=300)
    assert [c.key for c in comps] == ["ttft_p90", "ttft_p50"]
    assert skipped == ["ttft_p95: 20 samples put 1 beyond the p95, too few to compare a tail; it needs 40"]
    comps, skipped = compare_all({"ttft": base * 2}, {"ttft": cand * 2}, {"ttft_p95": 0.15}, seed=0, n_boot=300)
    assert [c.key for c in comps] == ["ttft_p95"] and not skipped


def test_a_resampled_baseline_percentile_of_zero_is_an_infinite_upper_bound_written_as_null():
    """TPOTs of 0 (every token of a request in one read) in the baseline: a resample whose p50 is 0
    makes that ratio +inf, so the upper bound is +inf -- null in JSON, +inf% in the message."""
    base = [0.0] * 9 + [0.2] * 11
    cand = [0.2] * 20
    c = compare("tpot_p50", base, cand, 0.05, seed=1, floor=0)
    assert math.isinf(c.upper) and math.isfinite(c.ratio)
    d = c.as_dict()
    assert d["upper"] is None and d["lower"] is not None and d["lower"] <= d["ratio"]
    assert "..+inf%)" in d["message"]
