"""A mixed workload judged per class (issue 37, ``core.checks.mix``): one result, every class on its own budgets
and requests, each finding named by its class, the class rows in the JSON and the JUnit properties."""
from __future__ import annotations

from dataclasses import replace

from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.checks.mix import ClassViolation
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.plugin.report.document import ResultDocument, result_entry
from pytest_llm_latency.plugin.report.properties import junit_properties
from pytest_llm_latency.plugin.report.terminal import summary_lines
from tests.helpers.records import record

MIX = {"talk": {"weight": 0.8, "prompt_tokens": 512, "output_tokens": 4},
       "summ": {"weight": 0.2, "prompt_tokens": 16000, "output_tokens": 4}}


def workload(slo=None):
    slo = slo or {"talk": {"ttft_p50": "100ms"}, "summ": {"ttft_p50": "1s"}}
    return make_workload("shared", {"mix": MIX, "requests": 10, "slo": slo, "max_error_rate": 0.5})


def tagged(cls, ttft_ms, n=1):
    return [replace(record(ttft_ms, gap_ms=10.0, tokens=4, send_ms=i * 50.0), mix_class=cls) for i in range(n)]


def test_each_class_is_judged_on_its_own_requests_and_budgets():
    # summ's 700 ms would fail talk's 100 ms budget: judged apart, both classes pass
    res = evaluate(workload(), tagged("talk", 60.0, 8) + tagged("summ", 700.0, 2), [])
    assert res.verdict == "pass", res.violations + res.errors
    rows = {r["name"]: r for r in res.mix.classes}
    assert (rows["talk"]["requests"], rows["summ"]["requests"]) == (8, 2)
    assert rows["talk"]["stats"]["ttft_p50_ms"] == 60.0 and rows["summ"]["stats"]["ttft_p50_ms"] == 700.0
    assert rows["talk"]["budgets"] == [{"key": "ttft_p50", "limit": 100.0, "unit": "ms", "observed": 60.0,
                                        "status": "pass"}]


def test_a_class_over_its_budget_fails_the_mix_named_by_the_class():
    res = evaluate(workload(), tagged("talk", 150.0, 8) + tagged("summ", 700.0, 2), [])
    assert res.verdict == "fail"
    [v] = res.violations
    assert isinstance(v, ClassViolation) and v.mix_class == "talk"
    assert v.message.startswith("talk: TTFT p50 150.0 ms > budget 100 ms (n=8")
    rows = {r["name"]: r for r in res.mix.classes}
    assert (rows["talk"]["status"], rows["summ"]["status"]) == ("fail", "pass")


def test_a_class_whose_requests_all_failed_fails_never_passes():
    fails = [replace(Failure("http_500", "boom", t_send_ns=0), mix_class="summ")] * 2
    res = evaluate(workload(), tagged("talk", 60.0, 8), fails)
    assert res.verdict == "fail"
    assert [v.message for v in res.violations] == [
        "summ: TTFT p50 inf ms > budget 1000 ms (n=2, 2 failed counted as misses, p50 inf ms, max inf ms)"]
    assert {r["name"]: r["status"] for r in res.mix.classes} == {"talk": "pass", "summ": "fail"}


def test_a_class_with_no_request_at_all_is_an_error_never_a_pass():
    res = evaluate(workload(), tagged("talk", 60.0, 8), [])
    assert res.verdict == "error"
    assert res.errors == ["summ: no successful requests out of 0: empty sample"]
    assert {r["name"]: r["status"] for r in res.mix.classes}["summ"] == "error"


def test_failed_requests_of_a_class_are_its_misses():
    fail = [replace(Failure("http_500", "boom", t_send_ns=0), mix_class="talk")]
    slo = {"talk": {"ttft_max": "100ms", }, "summ": {"ttft_p50": "1s"}}
    res = evaluate(workload(slo), tagged("talk", 60.0, 7) + tagged("summ", 700.0, 2), fail)
    assert [v.mix_class for v in res.violations] == ["talk"]
    assert "TTFT max inf ms > budget 100 ms (n=8, 1 failed counted as misses" in res.violations[0].message


def test_the_classes_reach_the_json_the_table_and_junit():
    res = evaluate(workload(), tagged("talk", 150.0, 8) + tagged("summ", 700.0, 2), [])
    entry = result_entry(res, "t.py::shared")
    doc = ResultDocument("0.0", {"url": None, "api": "openai-completions", "model": None}, 0, "abc", [entry])
    [parsed] = ResultDocument.parse(doc.to_json()).entries()
    assert [(c.name, c.status) for c in parsed.classes] == [("talk", "fail"), ("summ", "pass")]
    lines = summary_lines([parsed])
    assert any(line.startswith("  [talk]") and line.rstrip().endswith("FAIL") for line in lines), lines
    assert any(line.startswith("  [summ]") and "700.0" in line for line in lines)
    props = dict(junit_properties(parsed))
    assert props["llm.mix.talk.status"] == "fail" and props["llm.mix.summ.ttft_p50_ms"] == 700.0
    assert props["llm.mix.talk.budget.ttft_p50"] == "fail"


def test_each_class_budget_has_its_own_status():
    """A failed fraction budget is that budget's fail; a too-small sample errs its own budget, not the class's
    others (``core.checks.mix._budget_of``)."""
    slo = {"talk": {"ttft_p50": "100ms", "ttft_p99": "1s", "goodput_min": 0.9}, "summ": {"ttft_p50": "1s"}}
    res = evaluate(workload(slo), tagged("talk", 60.0, 4) + tagged("talk", 150.0, 4) + tagged("summ", 700.0, 2), [])
    rows = {r["name"]: r for r in res.mix.classes}
    status = {b["key"]: b["status"] for b in rows["talk"]["budgets"]}
    assert status == {"ttft_p50": "fail", "ttft_p99": "error", "goodput_min": "fail"}, rows["talk"]
    assert rows["talk"]["status"] == "error"  # the p99 could not be judged on 8 requests
    assert any(e.startswith("talk: TTFT p99: 8 samples cannot support a p99") for e in res.errors), res.errors


def test_a_class_stall_names_streams_by_their_number_in_the_run():
    """The stall figures of one class count the run's requests, not the class's: the long request sent first
    is request 1, the stalled stream request 2."""
    from tests.helpers.records import record_at

    long = replace(record_at([700.0, 705.0, 710.0], send_ms=0.0, prompt_tokens=16000), mix_class="summ")
    stalled = [replace(record_at([50.0 + 10 * k for k in range(3)] + [720.0 + 10 * k for k in range(3)],
                                 send_ms=5.0 + i, prompt_tokens=512), mix_class="talk") for i in range(8)]
    slo = {"talk": {"stall_max": "100ms"}, "summ": {"ttft_max": "10s"}}
    res = evaluate(workload(slo), [long] + stalled, [])
    talk = {r["name"]: r for r in res.mix.classes}["talk"]
    assert talk["status"] == "fail" and talk["budgets"][0]["status"] == "fail", talk
    assert talk["stall"]["worst_request"] >= 2 and talk["stall"]["worst_cause_request"] == 1
    assert talk["budgets"][0]["observed"] == talk["stall"]["stall_ms_max"] > 600


def test_a_closed_loops_unmeasured_prefills_still_stall_the_measured_streams():
    """A drained long request is not a sample, but its prefill window stalls the measured streams all the same
    (``facts.unmeasured_windows``, set by the load report): its gaps are stall gaps, not clean ones."""
    from pytest_llm_latency.core.checks.stalls import split_of
    from pytest_llm_latency.core.measure.prefill_overlap import PrefillWindow
    from pytest_llm_latency.core.result.result import measured
    from tests.helpers.records import record_at

    w = make_workload("w", {"prompt_tokens": 512, "output_tokens": 6, "requests": 1, "slo": {"stall_max": "1s"}})
    stream = record_at([50.0, 60.0, 70.0, 770.0, 780.0, 790.0], send_ms=0.0, prompt_tokens=512)
    res = measured(w, [stream], [])
    assert not split_of(res).stall  # no long prefill among the samples
    res.facts.unmeasured_windows = [PrefillWindow(65 * 1_000_000, 765 * 1_000_000, 16000, "summ", 0)]
    split = split_of(res)
    assert round(max(split.stall_ms)) == 700 and 700 not in {round(x) for x in split.clean_ms}
