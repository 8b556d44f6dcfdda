"""A fixed sample that could never pass is refused before any request (issue 25, defect 1):
at a confidence with ``inconclusive: fail``, a p95 of 20 samples can only fail (its upper bound
needs 59: 0.95^59 <= 5%).  ``verdict.min_n_to_pass`` says how many values a budget needs, checked
here against the real judging; ``workload.check_min_samples`` refuses below it, naming the
minimum and the ways out; no default combination of class and mode is refused."""
import random

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.measure.verdict import budget_verdict, min_n_to_pass
from pytest_llm_latency.core.result.sample_size import check_min_samples
from pytest_llm_latency.core.spec.workload import BUILTIN_CLASSES, make_workload


@pytest.mark.parametrize("stat, floor, conf, need", [
    ("p95", False, 0.95, 59), ("p90", False, 0.95, 29), ("p99", False, 0.95, 299), ("p50", False, 0.95, 5),
    ("p95", False, 0.9, 45), ("mean", False, 0.95, 2), ("max", False, 0.95, 1), ("min", True, 0.95, 1),
    ("p95", False, None, 1),
    ("p50", True, 0.95, 5), ("p90", True, 0.95, 2),  # floors: the lower bound, (1-q)^n <= alpha
    ("p95", True, 0.95, 2),  # 0.05^1 == alpha exactly: the budget_verdict's float tails need a second sample
])
def test_min_n_to_pass_is_where_the_judge_first_can_pass(stat, floor, conf, need):
    assert min_n_to_pass(stat, "ttft", conf, floor) == need
    if conf is None:
        return
    rng = random.Random(1)
    # the most favourable sample there is: every value far on the passing side of the limit
    best = (lambda n: [rng.uniform(900.0, 1000.0) for _ in range(n)]) if floor else \
        (lambda n: [rng.uniform(1.0, 2.0) for _ in range(n)])
    assert budget_verdict("k", "ttft", stat, 100.0, floor, best(need), conf).status == "pass"
    if need > 1:
        assert budget_verdict("k", "ttft", stat, 100.0, floor, best(need - 1), conf).status == "inconclusive"


def test_itl_counts_its_gaps_so_an_itl_p95_over_20_requests_can_pass():
    assert min_n_to_pass("p95", "itl", 0.95) == 1
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 32, "samples": 20,
                            "slo": {"itl_p95": "50ms"}})
    assert w.confidence == 0.95
    check_min_samples(w, "here")  # not refused


def wl(**kw):
    spec = {"class": "chat", "samples": 20}
    spec.update(kw)
    return make_workload("chat", spec, where=lambda p: "chat.slo.yaml:3 workloads.chat." + ".".join(map(str, p)))


def test_a_p95_of_20_at_95_percent_is_refused_naming_the_minimum_and_the_ways_out():
    with pytest.raises(ConfigError) as e:
        check_min_samples(wl(), "chat.slo.yaml:3 workloads.chat.samples")
    msg = str(e.value)
    assert msg.startswith("chat.slo.yaml:3 workloads.chat.samples: budget ttft_p95 (class default): ")
    assert "20 samples can never pass a p95 at 95% confidence" in msg
    assert "needs >= 59 samples: 0.95^59 <= 0.05" in msg
    for way in ("samples: auto", "samples: 59 or more", "confidence: null", "inconclusive: warn"):
        assert way in msg
    with pytest.raises(ConfigError, match="40 samples can never pass a p95"):
        check_min_samples(wl(samples=40), "here")
    with pytest.raises(ConfigError, match="budget tpot_p99 .* needs >= 299 samples"):
        check_min_samples(wl(samples=100, slo={"ttft_p95": None, "tpot_p95": None, "tpot_p99": "50ms"}), "here")
    with pytest.raises(ConfigError, match="needs >= 45 samples: 0.95\\^45 <= 0.1"):  # 90%: fewer
        check_min_samples(wl(samples=40, confidence=0.9), "here")


@pytest.mark.parametrize("kw", [
    {"samples": 59}, {"inconclusive": "warn"}, {"inconclusive": "pass"}, {"confidence": None},
    {"samples": "auto"}, {"slo": {"ttft_p95": None, "tpot_p95": None, "ttft_max": "1s", "tpot_mean": "50ms",
                                  "output_tps_min": 10, "itl_p99": "80ms"}},
])
def test_ways_out_are_not_refused(kw):
    check_min_samples(wl(**kw), "here")


def test_run_wide_samples_and_confidence_are_checked_too():
    w = make_workload("chat", {"class": "chat", "confidence": None})  # point estimate, 20 samples
    check_min_samples(w, "here")
    from pytest_llm_latency.core.spec.workload import with_statistics

    w = with_statistics(w, {"confidence": 0.95}, lambda p: "--llm-latency-confidence")  # run-wide 0.95
    with pytest.raises(ConfigError, match="20 samples can never pass a p95 at 95%"):
        check_min_samples(w, "chat (confidence 0.95 from --llm-latency-confidence)")


def test_sessions_and_prompt_sweeps_count_every_value_a_sample_gives():
    # a session gives a value per turn: 12 sessions x 5 turns = 60 >= 59
    session = {"class": "agent_session", "steps": 5, "confidence": 0.95, "slo": {"ttft_p95": "1s"}}
    check_min_samples(make_workload("s", {**session, "samples": 12}), "here")
    with pytest.raises(ConfigError, match=r"11 samples \(55 values\) can never pass.* samples: 12 or more"):
        check_min_samples(make_workload("s", {**session, "samples": 11}), "here")
    msg = ""
    try:
        check_min_samples(make_workload("s", {**session, "samples": 11}), "here")
    except ConfigError as e:
        msg = str(e)
    assert "samples: auto" not in msg  # not offered where auto is refused


def test_an_ab_workload_judges_its_budgets_on_the_point_estimate_by_default():
    w = wl(baseline_target="http://baseline:8000")  # fixed 20 before: a class chat A/B could only fail
    assert (w.confidence, w.samples, w.sequential) == (None, 20, False)
    check_min_samples(w, "here")
    check_min_samples(wl(samples=40, baseline_target="http://b:1"), "here")  # the README's A/B example
    with pytest.raises(ConfigError, match="use samples: 59 or more, confidence: null"):  # no auto offered
        check_min_samples(wl(baseline_target="http://b:1", confidence=0.95), "here")


# ------------------------------------------------------------------ the defaults never hit the refusal
MODES = {
    "default (closed loop)": {},
    "A/B": {"baseline_target": "http://baseline:8000"},
    "load run": {"rate": 2.0},
    "load run for a duration": {"rate": 2.0, "duration": "30s"},
    "rate sweep": {"rate_sweep": {"rate_min": 1.0, "rate_max": 8.0}},
    "prompt sweep": {"prompt_sweep": [128, 512]},
}


def _cases():
    for klass in BUILTIN_CLASSES:
        for mode, extra in MODES.items():
            if klass == "agent_session" and mode != "default (closed loop)":
                continue  # a session workload has its own mode
            if klass == "agent" and mode == "prompt sweep":
                extra = {**extra, "system_prompt_tokens": 64}  # its system share scales past the lengths
            yield klass, mode, extra
        yield klass, "fixed point estimate", {"confidence": None}
    yield "chat", "agent session", {"steps": 3}


@pytest.mark.parametrize("klass, mode, extra", list(_cases()), ids=lambda v: v if isinstance(v, str) else None)
def test_no_default_class_and_mode_is_refused(klass, mode, extra):
    w = make_workload(klass, {"class": klass, **extra})
    check_min_samples(w, "here")
    if not w.sequential and w.confidence is not None and w.inconclusive == "fail":
        for b in w.budgets:  # the defaults can decide every budget they judge at a confidence
            assert w.samples >= min_n_to_pass(b.stat, b.metric, w.confidence, b.is_floor) or b.metric == "itl"
