"""Failed requests are misses in every percentile (censored at +inf), and the verdict
per failure kind: the server failing is a fail, a run that cannot be judged an error."""
import math

import numpy as np
import pytest

from pytest_llm_latency.core.errors import EmptySampleError, MeasurementError
from pytest_llm_latency.core.checks import evaluate, judge
from pytest_llm_latency.core.result.result import Failure, is_server_fault
from pytest_llm_latency.core.measure.stats import PERCENTILE_METHOD, summarize
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record

MS = 1_000_000
INF = math.inf


def rec(ttft_ms=100.0, gap_ms=10.0, tokens=4, expected=4):
    return record(ttft_ms, gap_ms=gap_ms, tokens=tokens, expected=expected)


def wl(rate=0.0, samples=20, confidence=0.95, **slo):
    return make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": samples,
                               "max_error_rate": rate, "confidence": confidence, "slo": slo})


# ------------------------------------------------------------------ statistics
def test_percentiles_match_numpy_on_finite_samples():
    vals = [5.0, 1.0, 3.0, 9.0, 7.0, 2.5, 11.0]
    s = summarize(vals)
    for stat, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
        assert s.get(stat) == pytest.approx(np.percentile(vals, q, method=PERCENTILE_METHOD))
    assert s.censored == 0 and s.mean == pytest.approx(np.mean(vals))


def test_a_miss_makes_a_percentile_infinite_only_where_its_rank_falls():
    s = summarize([1.0, 2.0, 3.0, INF])
    assert s.p50 == 2.5 and s.p90 == INF and s.max == INF and s.mean == INF and s.censored == 1
    # 21 values, one miss: p95's rank is exactly the 20th value (finite), p99 interpolates towards the miss
    s = summarize([float(v) for v in range(1, 21)] + [INF])
    assert s.p95 == 20.0 and s.p99 == INF
    with pytest.raises(EmptySampleError):
        summarize([])
    with pytest.raises(EmptySampleError):
        summarize([1.0, float("nan")])


# ------------------------------------------------------------------ censoring
def test_a_failed_request_makes_p95_worse_never_better():
    """Old code left failures out: 19 x 100 ms gave p95 100 ms although one request timed out.
    The point estimate (``confidence: None``) shows the censored statistic itself; at the default
    confidence the same run cannot pass either (below)."""
    res = evaluate(wl(rate=0.1, confidence=None, ttft_p95=500, e2e_p95=10_000), [rec()] * 19,
                   [Failure("idle_timeout", "stall: no bytes")])
    assert res.summaries["ttft"].p95 == INF and res.summaries["ttft"].n == 20
    assert res.summaries["ttft"].censored == 1 and res.summaries["e2e"].p95 == INF
    assert res.verdict == "fail"
    assert {v.budget.key for v in res.violations} == {"ttft_p95", "e2e_p95"}
    assert "TTFT p95 inf ms > budget 500 ms (n=20, 1 failed counted as misses" in res.failure_message()
    assert res.completed["ttft"].p95 == 100.0  # decode physics (roofline) still sees completed requests
    res = evaluate(wl(rate=0.1, ttft_p95=500), [rec()] * 19, [Failure("idle_timeout", "stall: no bytes")])
    (v,) = res.verdicts
    assert v.upper == INF and v.status != "pass" and res.verdict == "fail"  # the miss keeps the bound at +inf


def test_a_failure_after_the_first_token_keeps_its_ttft_and_misses_the_rest():
    partial = rec(ttft_ms=80, gap_ms=10, tokens=2, expected=4)  # 2 of 4 tokens, then the stream broke
    exc = MeasurementError("reset", "closed mid-stream after 2 tokens")
    exc.partial = partial
    f = Failure.from_error(exc)
    assert (f.kind, f.ttft_ms, f.itl_ms) == ("reset", 80.0, (10.0,))
    res = evaluate(wl(rate=1.0), [rec()], [f])
    assert sorted(res.summaries["ttft"].__dict__[k] for k in ("min", "max")) == [80.0, 100.0]
    assert res.summaries["tpot"].censored == 1 and res.summaries["tpot"].max == INF
    # ITL: 3 measured gaps of the completed request + 1 measured + 2 owed (+inf) of the failed one
    assert res.summaries["itl"].n == 6 and res.summaries["itl"].censored == 2
    assert res.summaries["output_tps"].min == 0.0 and res.summaries["output_tps"].censored == 1


def test_a_failure_without_partial_record_is_a_miss_everywhere():
    f = Failure.from_error(MeasurementError("http_500", "HTTP 500"))
    res = evaluate(wl(rate=1.0), [rec()], [f])
    assert res.summaries["ttft"].max == INF and res.summaries["ttfo"].max == INF


def test_short_outputs_stay_excluded_and_counted():
    res = evaluate(wl(rate=0.5), [rec(), rec(tokens=2)], [])
    assert res.summaries["tpot"].n == 1 and res.summaries["ttft"].n == 2 and res.summaries["tpot"].censored == 0
    assert res.verdict == "pass" and any("stopped before the forced 4" in n for n in res.shown_notes)


# ------------------------------------------------------------------ verdict per kind
@pytest.mark.parametrize("kind", ["idle_timeout", "total_timeout", "reset", "protocol", "stream_error", "no_done",
                                  "http_429", "http_500", "http_502", "http_503"])
def test_server_failures_beyond_max_error_rate_are_a_fail_naming_the_cause(kind):
    """Old code: "error" (an overloaded server looked like a broken test setup)."""
    res = evaluate(wl(ttft_p50=500), [rec()] * 18, [Failure(kind, f"first {kind} message")] * 2)
    assert res.verdict == "fail" and not res.errors
    assert f"server failed: 2 of 20 requests failed ({kind} x2): first {kind} message" in res.failed_checks[0]
    assert "server error rate 10.0% > max_error_rate 0.0%" in res.failed_checks[0]


@pytest.mark.parametrize("kind", ["auth", "unknown_model", "context_length", "content_type", "http_400",
                                  "http_404", "no_usage"])
def test_requests_the_server_rejects_as_malformed_are_an_error(kind):
    res = evaluate(wl(ttft_p50=500), [rec()] * 18, [Failure(kind, "why")] * 2)
    assert res.verdict == "error" and "2 of 20 requests failed" in res.errors[0]


def test_nothing_listening_at_the_start_is_an_error_but_a_server_gone_mid_run_is_a_fail():
    refused = [Failure("connect", "cannot connect to http://h:1")] * 20
    res = evaluate(wl(ttft_p50=500), [], refused)
    assert res.verdict == "error" and "nothing answered at the start" in res.errors[0]
    with pytest.raises(EmptySampleError):
        res.ttft  # noqa: B018 - nothing was measured: never an all-miss statistic
    gone = evaluate(wl(ttft_p50=500), [rec()] * 5, refused[:15])
    assert gone.verdict == "fail" and "connect x15" in gone.failed_checks[0]
    res.facts.server_failed = True  # a managed server that died: its refusals are its failure
    died = judge(res)
    assert died.verdict == "fail"
    assert is_server_fault("connect", True) and not is_server_fault("connect", False)


def test_failures_within_max_error_rate_pass_with_a_note_when_the_percentile_holds():
    res = evaluate(wl(rate=0.25, ttft_p50=500), [rec()] * 16, [Failure("http_500", "worker crashed")] * 4)
    assert res.verdict == "pass"
    assert any("4 of 20 requests failed (http_500 x4)" in n and "allowed by max_error_rate" in n
               for n in res.shown_notes)
    # ... but p90 lands on the misses: a fail, not a faster-looking server
    res = evaluate(wl(rate=0.25, ttft_p90=500), [rec()] * 16, [Failure("http_500", "worker crashed")] * 4)
    assert res.verdict == "fail" and res.violations[0].observed == INF


def test_all_requests_timing_out_is_a_fail_not_an_error():
    res = evaluate(wl(ttft_p50=500), [], [Failure("idle_timeout", "stall")] * 20)
    assert res.verdict == "fail" and res.violations and res.summaries["ttft"].p50 == INF


@pytest.mark.parametrize("kind,verdict", [("idle_timeout", "fail"), ("http_503", "fail"), ("reset", "fail"),
                                          ("stream_error", "fail"), ("connect", "error"), ("auth", "error"),
                                          ("unknown_model", "error"), ("no_usage", "error"), ("tokenize", "error")])
def test_prompt_preparation_failing_is_judged_by_kind(kind, verdict):
    """Old code: always "error", so a stalling or 5xx server looked like a broken setup."""
    from pytest_llm_latency.core.checks import preparation_failed

    res = preparation_failed(wl(ttft_p50=500), Failure(kind, "why"))
    assert res.verdict == verdict
    assert (f"could not prepare the run (a request before the first sample failed: model check, tokenize or "
            f"probe; {kind}): why") in res.failure_message()
