"""``tokens_per_step_min`` / ``acceptance_rate_min`` through pytest: the marker and the
fixture's ``check()``, judged per request on llama.cpp-style ``timings.draft_n*`` from the
stream (fake server), a bad value a usage error, no source "cannot be judged"."""
from pytest_llm_latency.core.measure.spec_decode import SOURCES_HINT
from tests.helpers.fakeserver import FakeServerPlugin, Script

MARKED = """
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0,
                     ttft_p95=None, tpot_p95=None, {budgets})
def test_spec():
    pass
"""

FIXTURE = """
def test_measure(llm_latency):
    r = llm_latency.measure(workload="chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0,
                            ttft_p95=None, tpot_p95=None)
    r.check({budgets})
"""

# 8 tokens: 7 decoded, 5 of 6 drafted tokens accepted -> 2 engine steps, 3.5 tokens per step
DRAFTED = {"predicted_n": 8, "draft_n": 6, "draft_n_accepted": 5}


def run(pytester, script):
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1",
                              "--llm-latency-confidence=null", plugins=[FakeServerPlugin(script)])


def test_marker_budgets_are_judged_per_request(pytester):
    pytester.makepyfile(MARKED.format(budgets="tokens_per_step_min=3.0, acceptance_rate_min=0.5"))
    run(pytester, Script(timings=DRAFTED)).assert_outcomes(passed=1)
    pytester.makepyfile(MARKED.format(budgets="tokens_per_step_min=4, acceptance_rate_min=0.9"))
    r = run(pytester, Script(timings=DRAFTED))
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*tokens per step min 3.50 < 4 (per request from llama.cpp timings (per request): "
                            "the lowest of 20 requests, median 3.50)*",
                            "*acceptance rate min 0.83 < 0.9 (per request*"])


def test_a_bad_value_is_a_usage_error_naming_the_key(pytester):
    pytester.makepyfile(MARKED.format(budgets="tokens_per_step_min=0.5"))
    r = run(pytester, Script(timings=DRAFTED))
    assert r.ret != 0
    assert "tokens_per_step_min is the tokens each engine step emits" in r.stdout.str() + r.stderr.str()


def test_fixture_check_without_any_acceptance_source_cannot_be_judged(pytester):
    pytester.makepyfile(FIXTURE.format(budgets="acceptance_rate_min=0.5"))
    r = run(pytester, Script())
    out = r.stdout.str()
    assert "passed" not in out.splitlines()[-1]
    assert "acceptance_rate_min: cannot be judged" in out and SOURCES_HINT[:60] in out
