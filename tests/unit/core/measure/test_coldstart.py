"""Cold model loads (core.measure.coldstart), their workload keys, and the plan correction's body
resize (core.prompts.synthesis.resized) -- pure, no server."""
import math

import pytest

from pytest_llm_latency.core.measure import coldstart
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.prompts.synthesis import build_prompts, linear_counter, resized
from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.spec.workload import make_workload, with_budgets
from tests.helpers.records import record


def rec(load_ms=None, ttft_ms=10.0):
    return record(ttft_ms, [5.0], expected=None, prompt_tokens=8,
                  server_timings=None if load_ms is None else {"load_ms": load_ms})


def test_a_request_is_cold_when_its_reported_load_exceeds_the_threshold():
    assert [coldstart.is_cold(rec(x)) for x in (None, 0.0, 4.2, 100.0, 100.5, 2400.0)] == \
        [False, False, False, False, True, True]
    numbers, cold = coldstart.split([rec(3), rec(900), rec(3), rec(1500)])
    assert numbers == [2, 4] and [coldstart.load_ms(r) for r in cold] == [900, 1500]


@pytest.mark.parametrize("mode, words", [("exclude", "excluded from the statistics (cold_starts: exclude)"),
                                         ("include", "kept in the statistics (cold_starts: include)"),
                                         ("fail", "the workload allows none (cold_starts: fail)")])
def test_the_note_counts_and_names_the_cold_samples(mode, words):
    cold = [rec(900 + i) for i in range(7)]
    text = coldstart.describe(list(range(3, 10)), cold, 20, mode)
    assert text.startswith("7 of 20 samples were cold starts") and words in text
    assert "#3 900 ms, #4 901 ms, #5 902 ms, #6 903 ms, #7 904 ms and 2 more" in text


def test_the_cold_ttft_request_is_judged_only_when_it_was_cold():
    assert coldstart.cold_request_outcome(rec(900, 950), 950.0, 2000) == (None, None)
    failed, error = coldstart.cold_request_outcome(rec(900, 950), 950.0, 500)
    assert error is None and failed.startswith("cold-start TTFT 950.0 ms > budget cold_ttft_max 500 ms")
    failed, error = coldstart.cold_request_outcome(rec(3), 12.0, 500)
    assert failed is None and "was not a cold start (load_duration 3 ms" in error
    assert "no load_duration" in coldstart.cold_request_outcome(rec(None), 12.0, 500)[1]


def test_workload_keys_and_errors():
    w = make_workload("w", {"class": "custom", "prompt_tokens": 8, "output_tokens": 2,
                            "slo": {"ttft_p50": "1s", "cold_ttft_max": "8s"}, "cold_starts": "include"})
    assert w.cold_starts == "include" and w.cold_budget.limit == 8000 and w.cold_budget.metric == "cold_ttft"
    assert make_workload("chat", {}).cold_starts == "exclude" and make_workload("chat", {}).cold_budget is None
    with pytest.raises(ConfigError, match=r"x.cold_starts: expected one of exclude, include, fail, got 'exlude'; "
                                          r"did you mean 'exclude'"):
        make_workload("w", {"class": "chat", "cold_starts": "exlude"}, lambda p: "x." + ".".join(p))
    with pytest.raises(ConfigError, match="cold_ttft_max: a budget must be a positive duration"):
        with_budgets(w, {"cold_ttft_max": "0s"}, "marker")


def test_the_samples_verdict_ignores_the_cold_budget_the_runner_judges_it():
    w = make_workload("w", {"class": "custom", "prompt_tokens": 8, "output_tokens": 2, "samples": 1,
                            "slo": {"ttft_max": "1s", "cold_ttft_max": "1ms"}})
    res = evaluate(w, [rec(None, 50.0)], [])
    assert res.verdict == "pass" and not res.errors


# ------------------------------------------------------------------ resized bodies
COUNTS = {"word": lambda t: len(t.split()), "chars3": lambda t: math.ceil(len(t) / 3)}


@pytest.mark.parametrize("rule", list(COUNTS))
@pytest.mark.parametrize("system", [0, 40])
def test_a_resized_body_moves_the_count_one_token_at_a_time(rule, system):
    count = COUNTS[rule]
    est = linear_counter(1.0, 1 / 6)  # a chars-per-token estimate that counts neither rule right
    p = build_prompts(est, n=1, prompt_tokens=200, seed=3, nonce="n", system_prompt_tokens=system)[0]
    base = count(p.text)
    seen = [count(resized(p, d, seed=3).text) for d in range(-600, 600)]
    assert all(0 <= b - a <= 1 for a, b in zip(seen, seen[1:]))  # monotone, unit steps: any count is reachable
    assert seen[600] == base and seen[0] < base - 50 and seen[-1] > base + 50
    short = resized(p, -10**6, seed=3)
    assert short.user == p.user[:p.body_start + 1] and short.system == p.system  # never cuts into the salt
    assert resized(p, 37, seed=3).user == resized(p, 37, seed=3).user  # deterministic
