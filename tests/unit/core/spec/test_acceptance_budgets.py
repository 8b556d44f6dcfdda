"""The speculative-decoding budgets ``tokens_per_step_min`` / ``acceptance_rate_min``: parsing
(one spelling, clear errors), judging per request (llama.cpp timings) and on run totals (vLLM
counters, SGLang gauges), and never a pass on an undefined figure."""
import pytest

from pytest_llm_latency.core.measure import spec_decode as sd
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.spec.workload import make_workload, with_budgets
from tests.helpers.records import record


def wl(slo, samples=10, confidence=None):
    return make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 9, "samples": samples,
                               "warmup": 0, "confidence": confidence, "slo": slo})


def llama(tokens=9, draft_n=None, accepted=None):
    timings = {} if draft_n is None else {"draft_n": draft_n, "draft_n_accepted": accepted}
    return record(50, gap_ms=5, tokens=tokens, server_timings=timings)


def vllm_run(w, accepted, drafted, n=10, tokens=9):
    """A run of ``n`` requests with vLLM counter deltas as the pipeline records them."""
    recs = [record(50, gap_ms=5, tokens=tokens) for _ in range(n)]
    res = measured(w, recs, [])
    acc = sd.from_counters({}, {sd.VLLM_COUNTERS["accepted_tokens"]: accepted,
                                sd.VLLM_COUNTERS["draft_tokens"]: drafted,
                                sd.VLLM_COUNTERS["drafts"]: drafted / 4}, sd.decode_tokens(recs))
    res.spec_decode.set(**sd.as_part(acc, sd.decode_time_ms(recs)))
    return judge(res)


# ------------------------------------------------------------------------------ parsing
@pytest.mark.parametrize("slo, msg", [
    ({"tokens_per_step_min": 0.9}, "a number >= 1"), ({"tokens_per_step_min": "2"}, "a number >= 1"),
    ({"tokens_per_step_min": float("nan")}, "a number >= 1"), ({"acceptance_rate_min": 0}, r"in \(0, 1\]"),
    ({"acceptance_rate_min": 1.2}, r"in \(0, 1\]"), ({"acceptance_rate_min": True}, r"in \(0, 1\]")])
def test_bad_values_are_config_errors_naming_the_key_and_the_range(slo, msg):
    with pytest.raises(ConfigError, match=f"slo.{next(iter(slo))}: .*{msg}"):
        wl(slo)


def test_same_spelling_in_yaml_marker_and_check():
    w = wl({"tokens_per_step_min": 1, "acceptance_rate_min": 1})
    assert {b.key: (b.metric, b.is_floor, b.is_acceptance) for b in w.budgets} == {
        "tokens_per_step_min": ("tokens_per_step", True, True), "acceptance_rate_min": ("acceptance_rate", True, True)}
    w2 = with_budgets(wl({"ttft_p50": 500}), {"acceptance_rate_min": 0.5}, "check()")
    assert w2.budget_map()["acceptance_rate_min"].limit == 0.5
    with pytest.raises(ConfigError, match="did you mean 'tokens_per_step_min'"):
        wl({"tokens_per_step_mn": 2})


# ---------------------------------------------------------------------- per request (llama.cpp)
def test_per_request_floor_is_on_the_lowest_request_like_output_tps_min():
    # 8 decode tokens each: 6 accepted -> 2 steps -> 4.0 tokens/step; one request 2 accepted -> 8/6 = 1.33
    recs = [llama(9, 8, 6) for _ in range(9)] + [llama(9, 8, 2)]
    res = judge(measured(wl({"tokens_per_step_min": 2.0}), recs, []))
    assert res.verdict == "fail"
    [text] = res.failed_checks
    assert text.startswith("tokens per step min 1.33 < 2")
    assert "per request from llama.cpp timings" in text and "lowest of 10 requests" in text and "median 4.00" in text
    ok = judge(measured(wl({"tokens_per_step_min": 1.3, "acceptance_rate_min": 0.25}), recs, []))
    assert ok.verdict == "pass"


def test_per_request_acceptance_leaves_out_requests_that_drafted_nothing_and_says_so():
    recs = [llama(9, 8, 2) for _ in range(4)] + [llama(9) for _ in range(2)]  # two carried no draft_n
    res = judge(measured(wl({"acceptance_rate_min": 0.5}, samples=6), recs, []))
    [text] = res.failed_checks
    assert "acceptance rate min 0.25 < 0.5" in text and "2 requests that drafted nothing left out" in text


def test_per_request_nothing_drafted_anywhere_cannot_be_judged():
    recs = [llama(9, 0, 0) for _ in range(5)]
    res = judge(measured(wl({"acceptance_rate_min": 0.5}, samples=5), recs, []))
    assert res.verdict == "error" and "cannot be judged: every one of the 5 requests drafted nothing" in res.errors[0]


def test_per_request_inconsistent_timings_cannot_be_judged():
    recs = [llama(4, 8, 6) for _ in range(5)]  # 6 accepted of 3 decoded tokens
    res = judge(measured(wl({"tokens_per_step_min": 1.5}, samples=5), recs, []))
    assert res.verdict == "error" and "more accepted draft tokens than decoded tokens" in res.errors[0]


def test_per_request_at_a_confidence_is_the_same_extreme_verdict():
    recs = [llama(9, 8, 6) for _ in range(9)] + [llama(9, 8, 2)]
    res = judge(measured(wl({"tokens_per_step_min": 2.0}, confidence=0.95), recs, []))
    assert res.verdict == "fail" and res.failed_checks[0].startswith("tokens per step min 1.33")


# ---------------------------------------------------------------------- run totals (counters)
def test_run_totals_show_the_counts_and_claim_no_percentile():
    # 10 requests x 8 decode tokens = 80; 16 accepted of 160 drafted -> 80 / 64 = 1.25 tokens per step
    res = vllm_run(wl({"tokens_per_step_min": 2.5, "acceptance_rate_min": 0.5}), accepted=16, drafted=160)
    assert res.verdict == "fail"
    tps, rate = res.failed_checks
    assert tps == ("tokens per step 1.25 < 2.5 (run totals from vLLM /metrics counters: 80 decode tokens, "
                   "16 accepted of 160 drafted)")
    assert rate.startswith("acceptance rate 0.10 < 0.5 (run totals") and "p50" not in tps + rate
    assert vllm_run(wl({"tokens_per_step_min": 1.2}), accepted=16, drafted=160).verdict == "pass"


def test_run_totals_with_nothing_drafted_cannot_judge_the_rate_never_a_pass():
    res = vllm_run(wl({"acceptance_rate_min": 0.1}), accepted=0, drafted=0)
    assert res.verdict == "error" and "acceptance_rate_min: cannot be judged: nothing was drafted" in res.errors[0]


def test_run_totals_undefined_tokens_per_step_is_an_error():
    res = vllm_run(wl({"tokens_per_step_min": 1.0}), accepted=500, drafted=900)  # other clients' tokens
    assert res.verdict == "error" and "tokens_per_step_min: cannot be judged" in res.errors[0]


def test_windowed_gauges_are_an_aggregate_not_a_count():
    recs = [record(50, gap_ms=5, tokens=9) for _ in range(10)]
    res = measured(wl({"tokens_per_step_min": 2.0}), recs, [])
    acc = sd.from_sglang([{sd.SGLANG_ACCEPT_LENGTH: 1.5, sd.SGLANG_ACCEPT_RATE: 0.2}], sd.decode_tokens(recs))
    res.spec_decode.set(**sd.as_part(acc, sd.decode_time_ms(recs)))
    [text] = judge(res).failed_checks
    assert text.startswith("tokens per step 1.50 < 2 (the run's aggregate from SGLang") and "not a count" in text


def test_no_source_at_all_cannot_be_judged_and_names_the_sources():
    recs = [record(50, gap_ms=5, tokens=9) for _ in range(10)]
    res = judge(measured(wl({"tokens_per_step_min": 1.0}), recs, []))
    assert res.verdict == "error"
    assert "no speculative-decoding figures" in res.errors[0] and sd.SOURCES_HINT in res.errors[0]


# ------------------------------------------------------------- a failing TPOT budget names the acceptance
def test_failing_tpot_budget_on_a_speculating_run_names_the_acceptance():
    recs = [record(50, gap_ms=5, tokens=9) for _ in range(10)]
    res = measured(wl({"tpot_p50": "2ms"}), recs, [])
    acc = sd.from_counters({}, {sd.VLLM_COUNTERS["accepted_tokens"]: 16, sd.VLLM_COUNTERS["draft_tokens"]: 160},
                           sd.decode_tokens(recs))
    res.spec_decode.set(**sd.as_part(acc, sd.decode_time_ms(recs)))
    res.roofline.set(status="pass", step_efficiency=0.8, tokens_per_step=acc.tokens_per_step)
    judge(res)
    assert res.verdict == "fail"
    [cause] = [c for c in res.causes if "speculative decoding acceptance" in c]
    assert ("tokens per step 1.25 (acceptance 10%): each engine step emitted few tokens; the steps themselves ran "
            "at 0.80 of the ceiling (vLLM /metrics counters, run totals") in cause


def test_no_acceptance_cause_without_a_source_or_without_a_decode_failure():
    recs = [record(50, gap_ms=5, tokens=9) for _ in range(10)]
    res = judge(measured(wl({"tpot_p50": "2ms"}), recs, []))
    assert res.verdict == "fail" and not any("acceptance" in c for c in res.causes)
    ok = vllm_run(wl({"ttft_p50": "10ms"}), accepted=16, drafted=160)  # only TTFT fails
    assert ok.verdict == "fail" and not any("acceptance" in c for c in ok.causes)
