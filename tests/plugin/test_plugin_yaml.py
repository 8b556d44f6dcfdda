"""The plugin end to end through pytester, on the scripted fake server (virtual time)."""
import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script

CHAT = """
target: {url: http://fake:8000}
workloads:
  chat:
    class: chat
    prompt_tokens: 64
    output_tokens: 16
    samples: 20
    warmup: 1
    slo: {ttft_p95: 500ms, tpot_p95: 50ms}
"""


def run(pytester, script, *args):
    # constant, scripted latencies: the plugin's mechanics on the point estimate (20 samples cannot
    # show a p95 met at the default 95%; verdicts with bounds: test_statistical_verdicts_plugin.py)
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-confidence=null", *args,
                              plugins=[FakeServerPlugin(script)])


def test_passing_yaml_workload(pytester):
    pytester.makefile(".slo.yaml", chat=CHAT)
    r = run(pytester, Script(ttft_ms=120, tpot_ms=20))
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["*llm latency*", "*chat.slo.yaml::chat*20*120.0*120.0*20.00*PASS*"])


def test_failing_yaml_workload_lists_every_violated_budget(pytester):
    pytester.makefile(".slo.yaml", chat=CHAT)
    r = run(pytester, Script(ttft_ms=612.3, tpot_ms=61))
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*TTFT p95 612.3 ms > budget 500 ms (n=20, p50 612.3 ms, max 612.3 ms)*",
                            "*TPOT p95 61.0 ms > budget 50 ms (n=20*"])


def test_junit_properties_present(pytester):
    pytester.makefile(".slo.yaml", chat=CHAT)
    r = run(pytester, Script(ttft_ms=120, tpot_ms=20), "--junitxml=out.xml")
    r.assert_outcomes(passed=1)
    root = ET.parse(pytester.path / "out.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert float(props["llm.ttft_ms.p95"]) == pytest.approx(120)
    assert float(props["llm.tpot_ms.p50"]) == pytest.approx(20)
    assert float(props["llm.budget.ttft_p95_ms"]) == 500
    assert props["llm.verdict"] == "pass" and props["llm.n"] == "20"


def test_json_results_match_schema(pytester):
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    pytester.makefile(".slo.yaml", chat=CHAT)
    r = run(pytester, Script(ttft_ms=612, tpot_ms=20), "--llm-latency-json=res/out.json")
    r.assert_outcomes(failed=1)
    doc = json.loads((pytester.path / "res" / "out.json").read_text())
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    jsonschema.validate(doc, schema)
    (res,) = doc["results"]
    assert res["verdict"] == "fail" and res["ttft_ms"]["p95"] == pytest.approx(612)
    assert res["violations"] and res["short_outputs"] == 0 and res["failed_requests"] == 0
    assert doc["target"]["api"] == "openai-completions"


def test_short_outputs_reported(pytester):
    pytester.makefile(".slo.yaml", chat=CHAT)
    r = run(pytester, Script(stop_after=5), "--llm-latency-json=o.json")
    r.assert_outcomes(errors=1)  # the server never produced the forced length: the run cannot be judged
    r.stdout.fnmatch_lines(["*20 of 20 requests stopped before the forced 16 output tokens*"])
    assert json.loads((pytester.path / "o.json").read_text())["results"][0]["short_outputs"] == 20


def test_server_failing_before_any_sample_fails_never_passes(pytester):
    pytester.makefile(".slo.yaml", chat=CHAT)
    r = run(pytester, Script(status=503, error_body='{"error": {"message": "loading"}}'))
    r.assert_outcomes(failed=1)  # the server failed (5xx): a fail whichever request met it first
    r.stdout.fnmatch_lines(["*server failed before any sample: could not prepare the run*http_503*HTTP 503*loading*"])
    r.stdout.fnmatch_lines(["*chat.slo.yaml::chat*0*FAIL*"])


STREAM = """
workloads:
  s: {class: custom, prompt_tokens: 32, output_tokens: 9, samples: 20, warmup: 0, slo: {ttft_p95: 1s}}
"""


def test_role_only_first_chunk_is_not_ttft_through_the_plugin(pytester):
    pytester.makefile(".slo.yaml", s=STREAM)
    r = run(pytester, Script(ttft_ms=250, tpot_ms=10, role_chunk_ms=3), "--llm-latency-api=openai-chat",
            "--llm-latency-url=http://fake:1", "--llm-latency-json=o.json")
    r.assert_outcomes(passed=1)
    res = json.loads((pytester.path / "o.json").read_text())["results"][0]
    assert res["ttft_ms"]["p50"] == pytest.approx(250)  # not the 3 ms role-only chunk


@pytest.mark.parametrize("tokenize,rule", [(True, "tokenize"), (False, "apportioned")])
def test_three_token_chunks_without_per_chunk_usage_are_recovered_and_the_rule_named(pytester, tokenize, rule):
    """No continuous usage: the counts come from the tokenize endpoint (or, without one, from
    apportioning completion_tokens by text length); JSON, JUnit and the terminal name the rule."""
    pytester.makefile(".slo.yaml", s=STREAM.replace("slo: {ttft_p95: 1s}", "slo: {ttft_p95: 1s, itl_p50: 15ms}"))
    r = run(pytester, Script(ttft_ms=100, tpot_ms=10, tokens_per_chunk=3, continuous_usage=False, tokenize=tokenize),
            "--llm-latency-url=http://fake:1", "--llm-latency-json=o.json", "--junitxml=j.xml")
    r.assert_outcomes(passed=1)  # per-chunk gaps (30 ms) would fail itl_p50: 15ms
    res = json.loads((pytester.path / "o.json").read_text())["results"][0]
    assert res["itl_ms"]["p50"] == pytest.approx(10) and res["measurement"]["itl_token_counts"] == rule
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").getroot().iter("property")}
    assert props["llm.measurement.itl_token_counts"] == rule
    r.stdout.fnmatch_lines([f"*s.slo.yaml::s: ITL token counts per chunk: {rule}*"])
    if not tokenize:
        assert any("apportioned by text length on 20 of 20 streams (the server has no tokenize endpoint)" in n
                   for n in res["notes"]), res["notes"]


def test_three_token_chunks_count_as_three_through_the_plugin(pytester):
    pytester.makefile(".slo.yaml", s=STREAM)
    r = run(pytester, Script(ttft_ms=100, tpot_ms=10, tokens_per_chunk=3), "--llm-latency-url=http://fake:1",
            "--llm-latency-json=o.json")
    r.assert_outcomes(passed=1)
    res = json.loads((pytester.path / "o.json").read_text())["results"][0]
    # chunks carry tokens 1-3, 4-6, 7-9 at 120, 150, 180 ms: 30 ms gaps / 3 tokens each
    assert res["itl_ms"]["p50"] == pytest.approx(10) and res["itl_ms"]["n"] == 20 * 6
    assert res["tpot_ms"]["p50"] == pytest.approx((180 - 120) / 8)  # N = 9 from usage, not 3 chunks
