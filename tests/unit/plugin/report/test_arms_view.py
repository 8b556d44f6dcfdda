"""A server sweep's arms as rendered (``plugin/report/arms_view.py``) from a result entry's JSON: the table
(a ``stall p99`` column only where an arm measured stalls), the notes under it, the chart (stall p99 on its
y axis where every arm has one, else ITL p99) and the flat JUnit properties; a malformed row draws what it can."""
from __future__ import annotations

from pytest_llm_latency.plugin.report.arms_view import arm_notes, arm_rows, columns, sweep_chart, sweep_lines
from pytest_llm_latency.plugin.report.entry import ResultEntry
from pytest_llm_latency.plugin.report.properties import junit_properties


def entry(stall: bool = False, **extra) -> dict:
    rows = [{"name": "mnbt-512", "flags": "--max-num-batched-tokens 512", "requests": 20, "failed": 0,
             "verdict": "fail", "ttft_p95_ms": 910.0, "itl_p99_ms": 31.0, "tpot_p95_ms": 22.5,
             "why": "TTFT p95 910.0 ms > budget 800 ms"},
            {"name": "mnbt-2048", "flags": "--max-num-batched-tokens 2048", "requests": 20, "failed": 1,
             "verdict": "pass", "ttft_p95_ms": 640.0, "itl_p99_ms": 44.0, "tpot_p95_ms": 24.0, "headroom": 1.25,
             "tightest": "TTFT p95 640.0 ms vs 800 ms",
             "classes": [{"name": "chat", "verdict": "pass", "requests": 18, "failed": 1,
                          "stats": {"ttft_p95_ms": 120.0, "itl_p99_ms": 41.0, "tpot_p95_ms": 20.0}},
                         {"name": "summ", "verdict": "fail", "why": "x", "requests": 2, "failed": 0,
                          "stats": {"ttft_p95_ms": 1900.0}}]},
            {"name": "plain", "flags": "", "verdict": "error", "ttft_p95_ms": None}]
    if stall:
        for k, r in enumerate(rows):
            r["stall"] = {"stalls_per_min": 2.0, "itl_stall_p99_ms": 50.0 + k}
    return {"nodeid": "s.slo.yaml::mix", "verdict": "pass", "budgets": {"ttft_p95_ms": 800.0},
            "arms": {"mode": "flags", "blocks": 2, "block_size": 10, "arms": rows, "meeting": ["mnbt-2048"],
                     "recommended": "mnbt-2048", "recommendation": "mnbt-2048: the only setting meeting TTFT p95 <= "
                                                                   "800 ms", "reported": "mnbt-2048"}, **extra}


def test_the_table_its_notes_and_no_stall_column_without_stalls():
    e = entry()
    assert columns(e) == ("arm", "setting", "requests", "failed", "TTFT p95", "ITL p99", "TPOT p95", "verdict")
    assert arm_rows(e) == [
        ("mnbt-512", "--max-num-batched-tokens 512", "20", "0", "910.0", "31.00", "22.50", "FAIL"),
        ("mnbt-2048", "--max-num-batched-tokens 2048", "20", "1", "640.0", "44.00", "24.00", "PASS (recommended)"),
        ("  [chat]", "", "18", "1", "120.0", "41.00", "20.00", "PASS"),   # a mix: each class's own figures
        ("  [summ]", "", "2", "0", "1900.0", "-", "-", "FAIL"),
        ("plain", "(no extra flags)", "-", "-", "-", "-", "-", "ERROR")]
    assert arm_notes(e) == ["mnbt-2048: the only setting meeting TTFT p95 <= 800 ms",
                            "mnbt-512: TTFT p95 910.0 ms > budget 800 ms",
                            "mnbt-2048 [summ]: x",
                            "[class] rows: the class's own figures in that arm, which its budgets are judged on; an "
                            "arm's row pools its classes",
                            "the test's own figures are arm mnbt-2048's"]
    lines = sweep_lines([e])
    assert lines[0].startswith("server sweep") and "3 arms (one managed server, restarted per arm" in lines[1]


def test_a_stall_column_and_the_chart_on_stalls_where_every_arm_has_one():
    e = entry(stall=True)
    assert columns(e)[-2] == "stall p99" and [r[-2] for r in arm_rows(e)] == ["50.00", "51.00", "-", "-", "52.00"]
    svg = sweep_chart(ResultEntry.parse(e))
    assert "TTFT p95 against stall p99 per arm (classes pooled)" in svg and 'data-arm="mnbt-2048"' in svg
    assert "not drawn (a figure missing): plain" in svg and 'class="x-budget"' in svg


def test_an_arms_first_violation_is_said_once_when_it_is_a_class_s():
    e = entry()
    e["arms"]["arms"][1]["why"] = "summ: x"
    assert [n for n in arm_notes(e) if n.startswith("mnbt-2048")] == [
        "mnbt-2048: the only setting meeting TTFT p95 <= 800 ms", "mnbt-2048 [summ]: x"]


def test_the_chart_on_the_workloads_stall_budget_draws_its_statistic_and_budget_line():
    e = entry(stall=True, budgets={"ttft_p95_ms": 800.0, "itl_stall_p95_ms": 60.0})
    for k, a in enumerate(e["arms"]["arms"]):
        a["stall"]["stall_ms_p95"] = 40.0 + k
        a.pop("classes", None)
    svg = sweep_chart(ResultEntry.parse(e))
    assert "TTFT p95 against stall p95 per arm" in svg and "pooled" not in svg
    assert 'class="y-budget" data-budget="60.0"' in svg and 'data-arm="mnbt-512" data-x="910.0" data-y="40.0"' in svg


def test_a_mixs_chart_plots_the_class_carrying_the_stall_budget_with_its_budget_lines():
    e = entry()
    for k, a in enumerate(e["arms"]["arms"]):
        a["classes"] = [{"name": "summ", "verdict": "pass", "stats": {"ttft_p95_ms": 1900.0}},
                        {"name": "chat", "verdict": a["verdict"], "stats": {"ttft_p95_ms": 100.0 + k},
                         "stall": {"stall_ms_p99": 55.0 + k, "stall_ms_max": 90.0},
                         "budgets": [{"key": "ttft_p95", "limit": 300.0, "unit": "ms", "observed": 100.0,
                                      "status": "pass"},
                                     {"key": "itl_stall_p99", "limit": 60.0, "unit": "ms", "observed": 55.0,
                                      "status": "pass"}]}]
    svg = sweep_chart(ResultEntry.parse(e))
    assert "Server sweep: class chat's TTFT p95 against its stall p99 per arm (chat carries the stall budget)" in svg
    assert 'class="y-budget" data-budget="60.0"' in svg and 'class="x-budget" data-budget="300.0"' in svg
    assert 'data-arm="mnbt-2048" data-x="101.0" data-y="56.0"' in svg  # chat's figures, not the pooled 640 / 44
    assert "not drawn" not in svg  # every arm has chat's figures


def test_the_chart_on_itl_without_stalls_and_nothing_for_a_result_without_arms():
    assert "TTFT p95 against ITL p99 per arm" in sweep_chart(ResultEntry.parse(entry()))
    assert sweep_chart(ResultEntry.parse({"nodeid": "x"})) == "" and sweep_lines([{"nodeid": "x"}]) == []


def test_junit_properties_name_the_recommended_arm_and_the_arms_meeting():
    props = dict(junit_properties(entry()))
    assert props["llm.arms.recommended"] == "mnbt-2048" and props["llm.arms.meeting"] == "mnbt-2048"
    assert props["llm.arms.mnbt-512.verdict"] == "fail" and props["llm.arms.mnbt-2048.headroom"] == 1.25
    assert "llm.arms.mnbt-2048.classes" not in props  # flat scalars only


def test_a_malformed_row_draws_what_it_can():
    e = entry()
    e["arms"]["arms"] = [{"name": "a", "verdict": "pass", "ttft_p95_ms": "fast", "stall": "no"}, "junk"]
    assert arm_rows(e) == [("a", "(no extra flags)", "-", "-", "-", "-", "-", "PASS")]
