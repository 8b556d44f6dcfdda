"""Marker and fixture forms, skip/disable switches, secrets (pytester, fake server)."""
import json

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script

MARKED = """
import json

import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0,
                     ttft_p95="500ms", tpot_p95="50ms", e2e_p95="1s")
def test_chat_slo():
    pass
"""

FIXTURE = """
def test_measure(llm_latency):
    r = llm_latency.measure(workload="chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0)
    assert r.ttft.p95 == {ttft}
    assert r.n == 20
    r.check(tpot_p95="{tpot_budget}")
"""


def run(pytester, script, *args):
    # the fake server's constant, scripted latencies test the plugin's forms and messages on the
    # point estimate (20 samples cannot show a p95 met at the default 95%: see
    # test_statistical_verdicts_plugin.py for the verdicts with bounds)
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1",
                              "--llm-latency-confidence=null", *args, plugins=[FakeServerPlugin(script)])


def test_failing_marker_lists_every_violated_budget(pytester):
    pytester.makepyfile(MARKED)
    r = run(pytester, Script(ttft_ms=700, tpot_ms=60))
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*TTFT p95 700.0 ms > budget 500 ms (n=20*",
                            "*TPOT p95 60.0 ms > budget 50 ms (n=20*",
                            "*E2E p95 1120.0 ms > budget 1000 ms (n=20*"])


def test_passing_marker_test(pytester):
    pytester.makepyfile(MARKED)
    run(pytester, Script(ttft_ms=100, tpot_ms=10)).assert_outcomes(passed=1)


def test_fixture_measure_and_check(pytester):
    pytester.makepyfile(FIXTURE.format(ttft=150.0, tpot_budget="30ms"))
    run(pytester, Script(ttft_ms=150, tpot_ms=20)).assert_outcomes(passed=1)
    pytester.makepyfile(FIXTURE.format(ttft=150.0, tpot_budget="15ms"))
    r = run(pytester, Script(ttft_ms=150, tpot_ms=20))
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*TPOT p95 20.0 ms > budget 15 ms*"])


def test_fixture_class_default_budgets_are_judged_at_test_end(pytester):
    pytester.makepyfile("""
        def test_m(llm_latency):
            llm_latency.measure(workload="chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0)
    """)
    r = run(pytester, Script(ttft_ms=900, tpot_ms=20))  # chat default TTFT p95 <= 500 ms
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*TTFT p95 900.0 ms > budget 500 ms*"])


def test_empty_sample_is_an_error_never_a_pass(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.llm_slo(workload="chat", prompt_tokens=32, output_tokens=1, samples=20, warmup=0,
                             tpot_p95="50ms")
        def test_one_token():
            pass
    """)
    r = run(pytester, Script(ttft_ms=100))  # N = 1: TPOT undefined for every request
    r.assert_outcomes(errors=1)  # could not be judged: a pytest error, as the table says
    r.stdout.fnmatch_lines(["*TPOT p95: no values to check the budget against*"])


def test_llm_latency_skip_skips_latency_tests_only(pytester):
    pytester.makepyfile(MARKED + "\n\ndef test_plain():\n    pass\n")
    r = run(pytester, Script(ttft_ms=700), "--llm-latency-skip")
    r.assert_outcomes(passed=1, skipped=1)


def test_disable_plugin(pytester):
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.makefile(".slo.yaml", chat="workloads: {chat: {class: chat}}\n")
    r = pytester.runpytest("-p", "no:llm_latency", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    assert "llm-latency" not in r.stdout.str()
    r = pytester.runpytest("-p", "no:llm_latency", "--llm-latency-url=http://x")
    assert r.ret == pytest.ExitCode.USAGE_ERROR


def test_api_key_absent_from_every_output(pytester, monkeypatch):
    secret = "sk-test-SECRET"
    monkeypatch.setenv("LLM_LATENCY_API_KEY", secret)
    pytester.makepyfile(MARKED)
    pytester.makefile(".slo.yaml", chat="workloads: {chat: {class: chat, prompt_tokens: 32, output_tokens: 8, "
                                        "samples: 20, warmup: 0}}\n")
    script = Script(ttft_ms=700, tpot_ms=60)
    r = run(pytester, script, "-vv", "--junitxml=j.xml", "--llm-latency-json=r.json", "-rA")
    r.assert_outcomes(failed=2)
    assert any(h.get("authorization") == f"Bearer {secret}" for h in script.seen_headers)  # it was sent
    text = r.stdout.str() + r.stderr.str() + (pytester.path / "j.xml").read_text() + \
        (pytester.path / "r.json").read_text()
    assert secret not in text
    err = Script(status=401, error_body=f'{{"error": {{"message": "invalid key {secret}"}}}}')
    r = run(pytester, err, "-vv")
    assert "invalid key ***" in r.stdout.str() and secret not in r.stdout.str()


def test_report_header_and_markers_help(pytester):
    r = pytester.runpytest("--markers")
    r.stdout.fnmatch_lines(["@pytest.mark.llm_slo(workload='chat', *ttft_p95=*"])
    r = pytester.runpytest("--help")
    r.stdout.fnmatch_lines(["LLM latency SLOs (pytest-llm-latency):", "*--llm-latency-url=URL*",
                            "*--llm-latency-skip*"])
    pytester.makepyfile("def test_x():\n    pass\n")
    r = pytester.runpytest("--llm-latency-url=http://h:1", "--llm-latency-seed=7", "--llm-latency-model=m")
    r.stdout.fnmatch_lines(["llm-latency: url=http://h:1 api=openai-completions model=m seed=7"])


def test_every_measure_in_a_test_is_judged_and_reported(pytester):
    pytester.makepyfile("""
        def test_two(llm_latency):
            llm_latency.measure(workload="agent", prompt_tokens=64, output_tokens=8, samples=20, warmup=0)
            llm_latency.measure(workload="chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0)
    """)
    # agent: E2E 1500 + 7 x 100 = 2200 ms > 2 s; chat: TTFT 1500 ms > 500 ms -- both judged, both reported
    r = run(pytester, Script(ttft_ms=1500, tpot_ms=100), "--llm-latency-json=r.json")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*workload 'agent'*", "*E2E p95 2200.0 ms > budget 2000 ms*", "*workload 'chat'*"])
    results = json.loads((pytester.path / "r.json").read_text())["results"]
    assert [(x["nodeid"].split("::")[-1], x["workload"], x["verdict"]) for x in results] == \
        [("test_two", "agent", "fail"), ("test_two#2", "chat", "fail")]


def test_a_failing_check_is_what_the_reports_say(pytester):
    pytester.makepyfile("""
        def test_c(llm_latency):
            r = llm_latency.measure(workload="chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0,
                                    ttft_p95="5s")
            r.check(ttft_p95="1ms")
    """)
    r = run(pytester, Script(ttft_ms=100, tpot_ms=10), "--llm-latency-json=r.json")
    r.assert_outcomes(failed=1)
    (res,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert res["verdict"] == "fail" and res["violations"][0].startswith("TTFT p95 100.0 ms > budget 1 ms")


def test_fixture_requested_but_unused_is_not_measured(pytester):
    pytester.makepyfile("def test_u(llm_latency):\n    pass\n")
    script = Script()
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1",
                           plugins=[FakeServerPlugin(script)])
    r.assert_outcomes(passed=1)
    assert script.requests == []
