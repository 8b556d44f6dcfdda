"""``reasoning_tokens_<stat>`` (issue 36): a ceiling on the reasoning tokens of one request, a count; judged
from injected records (explicit stamps, no clock): the server's count where it gives one, else the stream's
reasoning chunks; a failure names the measured value and the budget.  And TTFO on a reasoning stream."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.measure import metrics, reasoning
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.spec.budgets import parse_budget
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.plugin.report.document import ResultDocument, result_entry
from pytest_llm_latency.plugin.report.properties import junit_properties
from pytest_llm_latency.plugin.report.terminal import summary_lines
from tests.helpers.records import record


def thinker(k: int, tokens: int = 32, **kw):
    """``tokens`` one-token chunks 10 ms apart after a 100 ms TTFT, the first ``k`` reasoning."""
    return record(100, gap_ms=10, tokens=tokens, reasoning_chunks=k, **kw)


def wl(slo, samples=20):
    return make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 32, "samples": samples,
                               "confidence": None, "slo": slo})


def judged(records, slo, failures=()):
    res = evaluate(wl(slo, len(records) + len(failures)), records, list(failures))
    figures, notes = reasoning.totals(records)
    res.measurement.set(**figures)
    return res


def test_the_metric_is_the_server_count_else_the_streams_chunks():
    assert metrics.reasoning_tokens(thinker(8)) == 8.0
    assert metrics.reasoning_tokens(thinker(8, server_timings={reasoning.REASONING_TOKENS: 12})) == 12.0
    assert metrics.reasoning_tokens(thinker(0)) == 0.0
    assert metrics.per_request(thinker(5))["reasoning_tokens"] == 5.0


def test_the_budget_key_is_a_count_not_a_duration():
    b = parse_budget("reasoning_tokens_p95", 150, "slo.reasoning_tokens_p95")
    assert (b.metric, b.stat, b.limit, b.unit, b.is_count, b.is_floor) == ("reasoning_tokens", "p95", 150.0, "tokens",
                                                                          True, False)
    with pytest.raises(ConfigError, match=r"reasoning_tokens_p95 is a ceiling on the reasoning tokens of one "
                                          r"request, a positive number of tokens \(not a duration\)"):
        parse_budget("reasoning_tokens_p95", "150ms", "slo.reasoning_tokens_p95")
    with pytest.raises(ConfigError, match="percentile p101 is not computed"):
        parse_budget("reasoning_tokens_p101", 1, "slo")


@pytest.mark.parametrize("stat", ["mean", "p50", "p90", "p95", "p99", "max"])
def test_every_stat_is_a_budget(stat):
    assert parse_budget(f"reasoning_tokens_{stat}", 10, "slo").stat == stat


def test_within_budget_passes():
    res = judged([thinker(8)] * 20, {"reasoning_tokens_p95": 10, "ttfo_p95": "200ms"})
    assert res.verdict == "pass", res.failure_message()
    assert res.reasoning_tokens.p95 == 8.0


def test_over_budget_fails_naming_both_numbers():
    res = judged([thinker(8)] * 10 + [thinker(24)] * 10, {"reasoning_tokens_p95": 10})
    assert res.verdict == "fail"
    (v,) = res.violations
    assert v.message.startswith("reasoning tokens p95 24.0 tokens > budget 10 tokens (n=20"), v.message
    assert "budget 10 tokens" in res.failure_message()


def test_the_server_count_is_judged_where_given():
    recs = [thinker(4, server_timings={reasoning.REASONING_TOKENS: 30})] * 20  # a model that hides reasoning
    res = judged(recs, {"reasoning_tokens_max": 20})
    assert [v.message.split(" (")[0] for v in res.violations] == ["reasoning tokens max 30.0 tokens > budget 20 tokens"]


def test_a_failed_request_is_a_miss():
    res = judged([thinker(4)] * 19, {"reasoning_tokens_max": 20}, [Failure("reset", "connection reset")])
    assert res.verdict == "fail" and res.violations[0].message.startswith("reasoning tokens max inf tokens > budget 20")


def test_a_model_that_does_not_reason_passes_a_reasoning_budget():
    res = judged([thinker(0)] * 20, {"reasoning_tokens_p95": 1})
    assert res.verdict == "pass" and res.reasoning_tokens.max == 0.0


def test_ttfo_on_a_reasoning_stream_fails_naming_both_numbers():
    # TTFO = 100 ms + 24 reasoning tokens x 10 ms: the first answer token at 340 ms
    res = judged([thinker(24)] * 20, {"ttfo_p95": "200ms", "reasoning_tokens_p95": 150})
    assert res.ttfo.p95 == pytest.approx(340.0) and res.ttft.p95 == pytest.approx(100.0)
    assert [v.message.split(" (")[0] for v in res.violations] == ["TTFO p95 340.0 ms > budget 200 ms"]


def test_statistical_verdict_names_both_numbers_too():
    res = evaluate(make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 32, "samples": 40,
                                       "slo": {"reasoning_tokens_p50": 10}}), [thinker(24)] * 40, [])
    assert res.verdict == "fail"
    assert "reasoning tokens p50 24.0 tokens" in res.violations[0].message
    assert "budget 10 tokens" in res.violations[0].message


def test_json_junit_and_table_show_the_figure():
    jsonschema = pytest.importorskip("jsonschema")
    res = judged([thinker(8)] * 10 + [thinker(24)] * 10, {"reasoning_tokens_p95": 10})
    entry = result_entry(res, "t.py::w", detail=True)
    assert entry["reasoning_tokens"]["p95"] == 24.0 and entry["reasoning_tokens"]["p50"] == pytest.approx(16.0)
    assert entry["budgets"]["reasoning_tokens_p95"] == 10.0
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    doc = ResultDocument("0.0", {"url": None, "api": "openai-chat", "model": None}, 0, "abc", [entry])
    jsonschema.validate(json.loads(json.dumps(doc.to_json())), schema)
    props = dict(junit_properties(entry))
    assert props["llm.reasoning_tokens.p95"] == 24.0 and props["llm.budget.reasoning_tokens_p95"] == 10.0
    row = next(ln for ln in summary_lines([entry]) if ln.startswith("t.py::w"))
    assert "p95 24" in row and row.rstrip().endswith("FAIL")


def test_no_key_when_nothing_reasoned_and_no_budget_asks():
    entry = result_entry(judged([thinker(0)] * 3, {"ttft_p50": "1s"}), "t")
    assert "reasoning_tokens" not in entry
    assert "reasoning_tokens" in result_entry(judged([thinker(0)] * 3, {"reasoning_tokens_p50": 1}), "t")


def test_a_reasoning_count_that_cannot_be_known_is_a_miss_never_a_pass():
    """The server's count exceeds N and the stream's is not in tokens: how much it reasoned is unknown,
    so the request counts as a miss (+inf) rather than dropping out of the sample."""
    unknown = thinker(8, server_timings={reasoning.REASONING_TOKENS: 99})
    unknown.token_count_rule = "per chunk"
    assert metrics.reasoning_tokens(unknown) is None
    res = judged([thinker(2)] * 19 + [unknown], {"reasoning_tokens_max": 10})
    assert res.verdict == "fail" and res.reasoning_tokens.max == float("inf"), res.failure_message()
