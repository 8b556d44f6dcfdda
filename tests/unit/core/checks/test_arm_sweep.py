"""A server sweep's judgement (``core.checks.arm_sweep``) and its recommendation rule
(``core.result.arm_ranking``): the recommended arm meets every budget and has the most headroom on its
tightest budget; the sweep passes when one arm meets every budget, fails naming each arm's first violation
when none does, and is an error when none does and an arm could not be judged.  Records with explicit times
(``tests.helpers.records``), judged by the real checks."""
from __future__ import annotations

import math

import pytest

from pytest_llm_latency.core.checks import evaluate, judge
from pytest_llm_latency.core.result.arm_ranking import Arm, Headroom, arm_row, budgets_text, headroom, recommend
from pytest_llm_latency.core.result.facts import ServerSweepRun
from pytest_llm_latency.core.result.result import Failure, measured
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record

SPEC = {"class": "custom", "prompt_tokens": 64, "output_tokens": 5, "samples": 4, "warmup": 0,
        "slo": {"ttft_p50": "500ms", "tpot_p50": "10ms"},
        "server_sweep": {"flags": {"a": "--x 1", "b": "--x 2", "c": "--x 3"}}}
W = make_workload("w", SPEC)
ARMS = W.server_sweep.arms


def arm(ttft_ms: float, tpot_ms: float, workload=W):
    """An arm's judged measurement: 4 requests with this TTFT and TPOT."""
    return evaluate(workload, [record(ttft_ms, gap_ms=tpot_ms, tokens=5) for _ in range(4)], [])


def sweep_result(*judged, reported: int = 0):
    """The test's result as the driver returns it: the reported arm's measurement with every arm in its facts."""
    base = judged[reported]
    res = measured(W, base.records, base.failures)
    res.facts.server_sweep = ServerSweepRun(W.server_sweep, tuple(zip(ARMS, judged)), ARMS[reported].name, 2, 2)
    return judge(res)


def test_headroom_is_the_tightest_budgets_margin():
    h = headroom(arm(100, 8))           # TTFT 500/100 = 5x, TPOT 10/8 = 1.25x: the tightest is TPOT
    assert h is not None and h.ratio == pytest.approx(1.25) and h.tightest == "TPOT p50 8.0 ms vs 10 ms"
    assert headroom(arm(400, 5)).ratio == pytest.approx(1.25)   # TTFT 1.25x, TPOT 2x
    assert headroom(arm(600, 5)).ratio == pytest.approx(500 / 600)  # over a budget: below 1


def test_a_floor_budget_counts_observed_over_budget():
    w = make_workload("w", {**SPEC, "slo": {"output_tps_min": 50}})
    h = headroom(arm(10, 10, w))     # 5 tokens in 50 ms: 100 tok/s against a floor of 50
    assert h.ratio == pytest.approx(2.0) and h.tightest.startswith("output tok/s min 100")


def test_no_budget_no_headroom():
    assert headroom(arm(100, 8, make_workload("w", {**SPEC, "slo": {"ttft_p50": None, "tpot_p50": None}}))) is None


def test_the_recommended_arm_has_the_most_headroom_on_its_tightest_budget_not_its_best():
    # a: TTFT 5x but TPOT 1.25x; b: TTFT 1.25x, TPOT 2x -> b's tightest (1.25) ties a's: the first of equals
    # c: TTFT 1.67x, TPOT 2x -> c's tightest is 1.67: the most headroom
    arms = [Arm("a", "pass", Headroom(1.25, "TPOT")), Arm("b", "pass", Headroom(1.25, "TTFT")),
            Arm("c", "pass", Headroom(5 / 3, "TTFT p50 300.0 ms vs 500 ms")), Arm("d", "fail", Headroom(0.5, "x"))]
    meeting, best, why = recommend(arms, "TTFT p50 <= 500 ms and TPOT p50 <= 10 ms")
    assert meeting == ["a", "b", "c"] and best == "c"
    assert why == ("3 of 4 arms meet every budget; recommended c: most headroom (1.67x on its tightest budget, "
                   "TTFT p50 300.0 ms vs 500 ms)")
    assert recommend(arms[:2], "")[1] == "a"  # equal margins: the arm listed first


def test_an_arm_that_misses_a_budget_is_never_recommended_whatever_its_margin_elsewhere():
    arms = [Arm("fast", "fail", Headroom(math.inf, "x")), Arm("ok", "pass", Headroom(1.01, "TPOT p50 9.9 ms vs 10 ms"))]
    assert recommend(arms, "TPOT p50 <= 10 ms") == (["ok"], "ok", "ok: the only setting meeting TPOT p50 <= 10 ms")
    assert recommend([Arm("a", "fail"), Arm("b", "error")], "B") == ([], None, "no arm meets every budget (B)")
    assert recommend([Arm("a", "pass"), Arm("b", "pass")], "no budgets")[1] is None


def test_budgets_in_words():
    assert budgets_text(arm(1, 1)) == "TTFT p50 <= 500 ms and TPOT p50 <= 10 ms"


def test_the_sweep_passes_when_one_arm_meets_every_budget_and_names_it():
    res = sweep_result(arm(100, 12), arm(300, 6), arm(100, 30), reported=1)
    assert res.verdict == "pass", res.failure_message()
    part = res.arms
    assert part.meeting == ["b"] and part.recommended == "b" and part.reported == "b"
    assert part.recommendation == "b: the only setting meeting TTFT p50 <= 500 ms and TPOT p50 <= 10 ms"
    rows = {r["name"]: r for r in part.arms}
    assert rows["a"]["verdict"] == "fail" and rows["a"]["why"].startswith("TPOT p50 12.0 ms > budget 10 ms")
    assert rows["b"]["flags"] == "--x 2" and rows["b"]["requests"] == 4 and rows["b"]["failed"] == 0
    assert rows["b"]["tpot_p95_ms"] == pytest.approx(6.0) and rows["b"]["headroom"] == pytest.approx(500 / 300, 1e-3)


def test_the_sweep_fails_when_no_arm_meets_naming_each_arms_first_violation():
    res = sweep_result(arm(100, 12), arm(700, 6), arm(100, 30))
    assert res.verdict == "fail"
    text = next(t for t in res.failed_checks if t.startswith("server_sweep:"))
    lines = text.splitlines()
    assert lines[0] == "server_sweep: no arm meets every budget (TTFT p50 <= 500 ms and TPOT p50 <= 10 ms):"
    assert lines[1].startswith("  a (--x 1): TPOT p50 12.0 ms > budget 10 ms")
    assert lines[2].startswith("  b (--x 2): TTFT p50 700.0 ms > budget 500 ms")
    assert lines[3].startswith("  c (--x 3): TPOT p50 30.0 ms > budget 10 ms") and len(lines) == 4
    assert res.arms.meeting == [] and res.arms.recommended is None


def test_none_meets_and_one_arm_unjudged_is_an_error_not_a_fail():
    down = evaluate(W, [], [Failure("connect", "connection refused")])
    assert down.verdict == "error"
    res = sweep_result(arm(100, 12), down, arm(100, 30))
    assert res.verdict == "error"
    assert any("could not be judged" in e and "b" in e for e in res.errors)


def test_an_unjudged_arm_beside_a_meeting_one_is_reported_not_fatal():
    down = evaluate(W, [], [Failure("connect", "connection refused")])
    res = sweep_result(arm(100, 5), down, arm(100, 30))
    assert res.verdict == "pass" and res.arms.recommended == "a"
    assert {r["name"]: r["verdict"] for r in res.arms.arms} == {"a": "pass", "b": "error", "c": "fail"}


def test_an_arms_stall_figures_and_class_verdicts_are_carried_when_its_result_has_them():
    from pytest_llm_latency.core.result.mix_parts import MixInfo
    from pytest_llm_latency.core.result.traffic_parts import StallInfo

    judged = arm(100, 5)
    judged.stall = StallInfo(stall_ms_p99=42.5, stalls_per_min=3.0)
    judged.mix = MixInfo(classes=[  # core.checks.mix's rows
        {"name": "chat", "weight": 0.9, "status": "pass", "stats": {"ttft_p95_ms": 400.0},
         "budgets": [{"key": "ttft_p95", "limit": 450.0, "unit": "ms", "observed": 400.0, "status": "pass"}],
         "violations": [], "errors": []},
        {"name": "summ", "weight": 0.1, "status": "fail", "stats": {"tpot_p95_ms": 60.0},
         "budgets": [{"key": "tpot_p95", "limit": 50.0, "unit": "ms", "observed": 60.0, "status": "fail"}],
         "violations": ["TPOT p95 60 ms > 50 ms"], "errors": []}])
    h = headroom(judged)   # summ's TPOT budget is the tightest: 50 / 60
    assert h.ratio == pytest.approx(50 / 60) and h.tightest == "summ TPOT p95 60.0 ms vs 50 ms"
    row = arm_row("a", {"flags": ""}, judged, h)
    assert row["stall"] == {"stall_ms_p99": 42.5, "stalls_per_min": 3.0}
    assert row["classes"] == [{"name": "chat", "verdict": "pass", "stats": {"ttft_p95_ms": 400.0}},
                              {"name": "summ", "verdict": "fail", "stats": {"tpot_p95_ms": 60.0},
                               "why": "TPOT p95 60 ms > 50 ms"}]
    assert budgets_text(judged) == ("TTFT p50 <= 500 ms and TPOT p50 <= 10 ms and chat TTFT p95 <= 450 ms and summ "
                                    "TPOT p95 <= 50 ms")


def test_a_class_budget_is_named_as_its_check_names_it_with_its_unit():
    """The issue's mix (docs/sharing-a-server.md): "chat ITL stall p99 <= 60 ms", never "chat itl_stall_p99 <= 60"
    (a bare number: 60 what?), and the tightest budget the same way."""
    from pytest_llm_latency.core.result.mix_parts import MixInfo

    judged = arm(100, 5)
    judged.mix = MixInfo(classes=[
        {"name": "chat", "status": "fail", "budgets": [
            {"key": "ttft_p95", "limit": 1500.0, "unit": "ms", "observed": 936.2, "status": "pass"},
            {"key": "itl_stall_p99", "limit": 60.0, "unit": "ms", "observed": 105.2, "status": "fail"},
            {"key": "stall_max", "limit": 1000.0, "unit": "ms", "observed": 500.0, "status": "pass"}]},
        {"name": "summ", "status": "pass", "budgets": [
            {"key": "output_tps_min", "limit": 20.0, "unit": "tok/s", "observed": 40.0, "status": "pass"}]}])
    assert budgets_text(judged) == ("TTFT p50 <= 500 ms and TPOT p50 <= 10 ms and chat TTFT p95 <= 1500 ms and chat "
                                    "ITL stall p99 <= 60 ms and chat ITL stall max <= 1000 ms and summ output tok/s "
                                    "min >= 20 tok/s")
    h = headroom(judged)
    assert h.ratio == pytest.approx(60 / 105.2) and h.tightest == "chat ITL stall p99 105.2 ms vs 60 ms"


def test_without_those_parts_the_row_has_neither():
    row = arm_row("a", {"flags": ""}, arm(100, 5), None)
    assert "stall" not in row and "classes" not in row and "headroom" not in row
