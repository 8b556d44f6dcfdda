"""Goodput and the fluidity index against values computed by hand on a fixed sample."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.result.goodput import fluidity, fluidity_of, goodput, meets
from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record_at

MS = 1_000_000


def rec(times_ms, send_ms=0.0):
    return record_at(times_ms, send_ms=send_ms, expected=4, prompt_tokens=None)


# budgets: first token within 100 ms, then 10 ms a token; 4 tokens a request
SPEC = {"prompt_tokens": 8, "output_tokens": 4, "slo": {"ttft_max": "100ms", "tpot_max": "10ms"}}
R1 = rec([50, 58, 66, 74])     # TTFT 50, TPOT 8: good.          deadlines 100,110,120,130: 4/4
R2 = rec([150, 155, 160, 165])  # TTFT 150: not good.            miss, reset at 150 -> 160,170,180: 3/4
R3 = rec([20, 60, 65, 70])      # TPOT 16.7: not good.           early first token leaves slack: 4/4
R4 = rec([90, 100, 140, 145])   # TPOT 18.3: not good.           140 > 120 misses, reset -> 150: 3/4
F = Failure("reset", "connection reset", ttft_ms=30.0, itl_ms=(10.0,))  # tokens at 30, 40 of 4 owed: 2/4


def test_goodput_by_hand():
    w = make_workload("w", SPEC)
    assert [meets(r, w.budgets) for r in (R1, R2, R3, R4)] == [True, False, False, False]
    g = goodput([R1, R2, R3, R4], failed=1, budgets=w.budgets, window_s=2.0)
    assert (g.good, g.total) == (1, 5)
    assert g.fraction == pytest.approx(0.2)
    assert g.per_s == pytest.approx(0.5)  # 1 good request in 2 s
    assert goodput([], 0, w.budgets, 2.0) is None  # nothing measured is not a goodput of 0


def test_fluidity_by_hand():
    w = make_workload("w", SPEC)
    assert fluidity_of(0, [int(t * MS) for t in (150, 155, 160, 165)], 100.0, 10.0) == pytest.approx(0.75)
    assert fluidity_of(0, [int(t * MS) for t in (20, 60, 65, 70)], 100.0, 10.0) == 1.0
    assert fluidity([R1, R2, R3, R4], [F], w) == pytest.approx((1 + 0.75 + 1 + 0.75 + 0.5) / 5)


def test_goodput_min_and_fluidity_min_are_budgets():
    w = make_workload("w", {**SPEC, "max_error_rate": 0.5,
                            "slo": {**SPEC["slo"], "goodput_min": 0.5, "fluidity_min": 0.9}})
    res = evaluate(w, [R1, R2, R3, R4], [F])
    assert res.verdict == "fail"
    assert "goodput 0.200 < budget 0.5 (1 of 5 requests met every per-request budget)" in res.failed_checks
    assert any(c.startswith("fluidity 0.800 < budget 0.9") for c in res.failed_checks)
    assert res.load.goodput_fraction == 0.2 and res.load.fluidity_index == 0.8
    ok = evaluate(make_workload("w", {**SPEC, "max_error_rate": 0.5, "slo": {**SPEC["slo"], "ttft_max": "200ms",
                                                                            "tpot_max": "20ms", "goodput_min": 0.8}}),
                  [R1, R2, R3, R4], [F])
    assert not any(c.startswith("goodput") for c in ok.failed_checks)  # 4 of 5 good = 0.8 meets 0.8


@pytest.mark.parametrize("slo, msg", [({"goodput_min": 1.5}, "fraction"), ({"fluidity_min": 0.9, "ttft_p95": None},
                                                                          "needs a TTFT budget")])
def test_bad_fraction_budgets_are_config_errors(slo, msg):
    with pytest.raises(ConfigError, match=msg):
        make_workload("chat", {"slo": slo})
