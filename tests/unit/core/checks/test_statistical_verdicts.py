"""Budget verdicts at a confidence (core.measure.verdict via core.result.result.evaluate), the workload keys
(samples: auto, min/max_samples, confidence, inconclusive) and the runner's sequential rounds."""
import math
import random
import threading

import pytest

from pytest_llm_latency.client.runner import send_samples, stop_info
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.checks import evaluate, judge
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.result.sample_size import check_min_samples
from pytest_llm_latency.core.spec.workload import make_workload, with_statistics
from tests.helpers.records import record

MS = 1_000_000


def rec(ttft_ms: float, gap_ms: float = 10.0, tokens: int = 4):
    return record(ttft_ms, gap_ms=gap_ms, tokens=tokens)


def wl(**kw):
    spec = {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "slo": {"ttft_p95": "500ms"}}
    spec.update(kw)
    return make_workload("w", spec)


def ttfts(rng, n, mu=400.0, sd=20.0):
    return [rec(max(1.0, rng.gauss(mu, sd))) for _ in range(n)]


# ------------------------------------------------------------------ workload keys
def test_samples_auto_defaults_to_95_percent_and_max_200():
    w = wl(samples="auto")
    assert (w.sequential, w.confidence, w.min_samples, w.samples, w.inconclusive) == (True, 0.95, 10, 200, "fail")
    assert wl(samples=20).confidence == 0.95  # fixed samples are judged at the default confidence too
    assert wl(samples=20, confidence=None).confidence is None  # the point estimate, asked for
    w = wl()  # no samples given: a closed loop defaults to auto at 95%
    assert (w.sequential, w.confidence, w.samples) == (True, 0.95, 200)
    w = wl(confidence=None)  # ... and to the fixed 20 of the point estimate when confidence is null
    assert (w.sequential, w.confidence, w.samples) == (False, None, 20)
    w = with_statistics(wl(), {"confidence": "null"}, lambda p: "cli")  # the same from a run-wide override
    assert (w.sequential, w.confidence, w.samples) == (False, None, 20)
    w = wl(slo={"ttft_p95": None})  # nothing to decide (no budget, or only max/ITL): the fixed 20, not 10
    assert (w.sequential, w.samples) == (False, 20)
    assert wl(slo={"ttft_p95": None, "itl_p95": "50ms", "e2e_max": "2s"}).samples == 20
    assert wl(baseline_target="http://b:1").samples == 20  # A/B in one run: fixed arms
    w = wl(rate=2.0, requests=30)  # an open-loop load run: samples are coupled by the queue -> point estimate
    assert (w.sequential, w.confidence, w.samples) == (False, None, 30)
    assert wl(rate=2.0, requests=30, confidence=0.9).confidence == 0.9
    w = wl(samples="auto", min_samples=30, max_samples=500, confidence=0.9, inconclusive="warn")
    assert (w.min_samples, w.samples, w.confidence, w.inconclusive) == (30, 500, 0.9, "warn")


@pytest.mark.parametrize("kw, text", [
    ({"samples": "auto", "confidence": None}, "samples: auto decides at a confidence"),
    ({"samples": 20, "confidence": 1.0}, "expected a confidence level in [0.5, 1)"),
    ({"samples": 20, "confidence": "high"}, "expected a confidence level"),
    ({"samples": "auto", "inconclusive": "maybe"}, "expected one of fail, warn, pass"),
    ({"samples": "auto", "min_samples": 50, "max_samples": 20}, "min_samples (50) must not exceed max_samples (20)"),
    ({"samples": 20, "max_samples": 50}, "apply to samples: auto only"),
    ({"samples": "many"}, "expected an integer >= 1"),
])
def test_bad_statistics_keys_are_config_errors_naming_the_key(kw, text):
    with pytest.raises(ConfigError, match=None) as e:
        wl(**kw)
    assert text in str(e.value)


def test_an_undecidable_budget_is_still_a_collection_error_but_few_samples_are_not():
    # wide bounds: can still fail, no error where inconclusive is not a fail (where it is, a sample
    # that could never pass is refused: test_fixed_sample_can_pass.py)
    check_min_samples(wl(samples=10, confidence=0.95, inconclusive="warn"), "here")
    check_min_samples(wl(samples=5, confidence=0.95, inconclusive="warn", slo={"ttft_p99": "1s"}), "here")
    with pytest.raises(ConfigError, match="10 samples can never pass a p95"):
        check_min_samples(wl(samples=10, confidence=0.95), "here")
    with pytest.raises(ConfigError, match="no sample size up to 4 can decide a p50 at 95% confidence"):
        check_min_samples(wl(samples=4, confidence=0.95, slo={"ttft_p50": "1s"}), "here")  # 0.5^4 > 5%
    with pytest.raises(ConfigError, match="raise max_samples"):  # auto must be able to pass: p99 needs 299
        check_min_samples(wl(samples="auto", max_samples=250, slo={"ttft_p99": "1s"}), "here")
    check_min_samples(wl(samples="auto", max_samples=400, slo={"ttft_p99": "1s"}), "here")
    w = wl(slo={"ttft_p99": "1s"})  # no max_samples given: the default horizon grows until a p99 can pass
    assert (w.sequential, w.samples) == (True, 300)
    check_min_samples(w, "here")
    assert wl(samples="auto", slo={"ttft_p99": "1s"}).samples == 300 and wl().samples == 200
    check_min_samples(wl(samples=10, inconclusive="pass"), "here")  # the default confidence: wide bounds
    with pytest.raises(ConfigError, match="p95 needs >= 20 samples, got 10"):  # point estimate: as before
        check_min_samples(wl(samples=10, confidence=None), "here")


def test_overrides_switch_modes():
    w = with_statistics(wl(samples=20), {}, lambda p: "cli", "auto")
    assert w.sequential and w.confidence == 0.95 and w.samples == 200
    w = with_statistics(w, {"confidence": "null"}, lambda p: "cli", 50)
    assert not w.sequential and w.confidence is None and w.samples == 50


# ------------------------------------------------------------------ verdicts
def test_clear_pass_and_clear_fail_show_the_interval():
    rng = random.Random(1)
    ok = evaluate(wl(samples=100, confidence=0.95), ttfts(rng, 100, mu=300), [])
    assert ok.verdict == "pass"
    (v,) = ok.verdicts
    assert v.status == "pass" and v.method == "order-statistic" and v.lower <= v.estimate <= v.upper <= 500
    bad = evaluate(wl(samples=100, confidence=0.95), ttfts(rng, 100, mu=700), [])
    assert bad.verdict == "fail"
    msg = bad.failure_message()
    assert "TTFT p95" in msg and "(95% bounds " in msg and "> budget 500 ms: fail at 100 samples" in msg


def test_inconclusive_fails_by_default_and_says_how_many_samples_would_decide():
    rng = random.Random(2)
    res = evaluate(wl(samples=20, confidence=0.95), ttfts(rng, 20, mu=400, sd=30), [])
    (v,) = res.verdicts
    assert v.status == "inconclusive" and v.upper == math.inf  # p95 of 20 cannot be bounded from above
    assert res.verdict == "fail"
    assert "inconclusive at 20 samples" in res.failure_message()
    assert v.would_decide is not None and 59 <= v.would_decide <= 200
    assert f"~{v.would_decide} samples would decide" in res.failure_message()


@pytest.mark.parametrize("policy, verdict", [("warn", "pass"), ("pass", "pass"), ("fail", "fail")])
def test_inconclusive_policy(policy, verdict):
    rng = random.Random(2)
    res = evaluate(wl(samples=20, confidence=0.95, inconclusive=policy), ttfts(rng, 20), [])
    assert res.verdicts[0].status == "inconclusive" and res.verdict == verdict
    assert any("inconclusive" in n for n in res.shown_notes) == (policy == "warn")


def test_point_estimate_stays_when_confidence_is_null():
    rng = random.Random(4)
    res = evaluate(wl(samples=20, confidence=None), ttfts(rng, 20), [])
    assert res.verdict == "pass" and res.verdicts == []
    res = evaluate(wl(samples=20), ttfts(rng, 20), [])  # the default 95%: 20 samples cannot show a p95 met
    assert res.verdict == "fail" and res.verdicts[0].status == "inconclusive"
    assert "inconclusive at 20 samples" in res.failure_message() and "samples would decide" in res.failure_message()


def test_mean_budget_uses_a_t_interval_and_a_miss_fails_it():
    rng = random.Random(5)
    res = evaluate(wl(samples=30, confidence=0.95, slo={"ttft_p95": None, "ttft_mean": "500ms"}), ttfts(rng, 30), [])
    (v,) = res.verdicts
    assert v.method == "t" and v.status == "pass" and v.upper < 500
    res = evaluate(wl(samples=30, confidence=0.95, slo={"ttft_p95": None, "ttft_mean": "500ms"}, max_error_rate=0.1),
                   ttfts(rng, 29), [Failure("reset", "connection reset")])
    assert res.verdicts[0].status == "fail" and res.verdict == "fail"


def test_max_and_itl_budgets_are_not_bounded():
    rng = random.Random(6)
    res = evaluate(wl(samples=30, confidence=0.95, slo={"ttft_p95": None, "ttft_max": "500ms", "itl_p95": "20ms"}),
                   ttfts(rng, 30), [])
    assert {v.key: v.method for v in res.verdicts} == {"ttft_max": "extreme", "itl_p95": "point"}
    assert res.verdict == "pass"


# ------------------------------------------------------------------ sequential sampling in the runner
def prompts(n):
    return [Prompt(system="", user=f"u{i}", expected_tokens=10, counted_tokens=10) for i in range(n)]


def fake_one(rng, mu, barrier=None):
    def one(p):
        if barrier is not None:  # every request of a round must be in flight at once
            barrier.wait()
        return rec(max(1.0, rng.gauss(mu, 20)))
    return one


def test_auto_stops_as_soon_as_every_budget_is_decided():
    w = wl(samples="auto")
    outs, seq = send_samples(fake_one(random.Random(7), 300), prompts(w.samples), w)
    assert len(outs) == 62  # p95 can first pass at 62 samples (all below the budget)
    res = evaluate(w, outs, [], sequential=seq)
    assert res.verdict == "pass" and res.verdicts[0].n == 62
    assert res.verdicts[0].method == "sequential order-statistic"
    assert stop_info(w, seq, len(outs))["stop_reason"] == "every budget decided at 62 samples"
    # a budget far below the truth fails within a few samples
    outs, seq = send_samples(fake_one(random.Random(7), 700), prompts(w.samples), w)
    assert len(outs) == w.min_samples
    assert evaluate(w, outs, [], sequential=seq).verdict == "fail"


def test_auto_stops_at_max_samples_when_the_truth_sits_on_the_budget():
    w = wl(samples="auto", max_samples=80, slo={"ttft_p50": "400ms"})
    outs, seq = send_samples(fake_one(random.Random(8), 400, ), prompts(w.samples), w)
    res = evaluate(w, outs, [], sequential=seq)
    if res.verdicts[0].status == "inconclusive":  # the usual case; a decision is allowed (<= 5%)
        assert len(outs) == 80
        assert stop_info(w, seq, len(outs))["stop_reason"] == "max_samples reached (80) with budgets undecided"


def test_auto_with_concurrency_sends_full_rounds_in_parallel():
    w = wl(samples="auto", concurrency=4)
    barrier = threading.Barrier(4, timeout=30)  # bounded: a round that is not parallel breaks it
    outs, seq = send_samples(fake_one(random.Random(9), 300, barrier), prompts(w.samples), w)
    assert len(outs) == 64  # rounds of 4: the first round boundary after 62
    assert not barrier.broken
    res = evaluate(w, outs, [], sequential=seq)
    assert res.verdict == "pass" and res.verdicts[0].n == 64


def test_judging_again_keeps_the_sequential_decisions():
    w = wl(samples="auto")
    outs, seq = send_samples(fake_one(random.Random(10), 300), prompts(w.samples), w)
    res = evaluate(w, outs, [], sequential=seq)
    before = [(v.status, v.n) for v in res.verdicts]
    res.facts.server_failed = True  # a managed server that died: an input fact, the checks run again
    again = judge(res)
    assert [(v.status, v.n) for v in again.verdicts] == before != []


def test_a_fraction_budget_does_not_hold_samples_auto_to_max_samples():
    """goodput_min is judged once on the whole run: it must not keep auto sampling until max_samples."""
    from pytest_llm_latency.core.measure.verdict import SequentialVerdicts

    w = wl(samples="auto", slo={"ttft_p95": "500ms", "goodput_min": 0.9})
    seq = SequentialVerdicts(w.budgets, w.confidence, w.min_samples, w.samples)
    rng = random.Random(11)
    vals, done = [], False
    while not done and len(vals) < w.samples:
        vals.append(max(1.0, rng.gauss(100.0, 10.0)))
        done = len(vals) >= w.min_samples and seq.check({"ttft": vals})
    assert done and len(vals) < 70 and seq.decided["ttft_p95"].status == "pass"
