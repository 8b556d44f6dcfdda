"""Agent sessions through pytest (pytester): a YAML session workload, the marker and the fixture;
budgets into JUnit ``llm.*`` properties, the JSON results (schema-valid) and the terminal; the
reuse-breaking fault failing the test with the turn named; config errors naming their source."""
import json
import xml.etree.ElementTree as ET
from importlib import resources

import jsonschema
import pytest

from pytest_llm_latency.targets.reference.launch import start_reference

SLO = """
workloads:
  tools:
    class: agent_session
    prompt_tokens: 512
    output_tokens: 8
    steps: 4
    tool_result_tokens: 24
    tool_time: 5ms
    samples: 5
    warmup: 1
    slo:
      prefix_reuse_min: 0.85
      turn_ttft_p95: 10s
      tool_call_complete_p95: 10s
      session_e2e_max: 60s
      session_e2e_p95: null
"""


@pytest.fixture(scope="module")
def servers():
    with start_reference("reference://h100-sxm/llama-3.1-8b?prefix_caching=1&time_scale=0", mode="thread") as ok, \
            start_reference("reference://h100-sxm/llama-3.1-8b?prefix_caching=1&time_scale=0"
                            "&fault=rewrite_tool_history", mode="thread") as broken:
        yield ok.url, broken.url


def props(path):
    case = ET.parse(path).getroot().find(".//testcase")
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_yaml_session_passes_with_its_figures_everywhere(pytester, servers):
    pytester.makefile(".slo.yaml", agent=SLO)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={servers[0]}",
                           "--llm-latency-json=r.json", "--junitxml=j.xml")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["agent sessions (turn 2+ prefix reuse; model time without tool pauses):",
                            "  agent.slo.yaml::tools: 5 sessions x 4 turns, prefix reuse *% (t2 *%, t3 *%, t4 *%); "
                            "turn TTFT p95 * ms, session model time p95 * ms, tool call complete p95 * ms"])
    doc = json.loads((pytester.path / "r.json").read_text())
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    jsonschema.validate(doc, schema)
    (res,) = doc["results"]
    x = res["agent"]
    turn = {t["turn"]: t for t in x["turns"]}
    assert res["n"] == 20 and x["sessions"] == 5 and x["steps"] == 4
    assert x["prefix_reuse"] >= 0.85 and x["turn1_cached_tokens_max"] == 0
    assert turn[1]["prompt_tokens_p50"] == 512  # turn 1 as the server counts it, tools included
    assert turn[2]["new_tokens_p50"] < 0.2 * turn[2]["prompt_tokens_p50"]
    assert res["budgets"]["prefix_reuse_min"] == 0.85 and res["budgets"]["turn_ttft_p95_ms"] == 10000
    p = props(pytester.path / "j.xml")
    assert float(p["llm.agent.prefix_reuse"]) == x["prefix_reuse"]
    assert p["llm.budget.tool_call_complete_p95_ms"] == "10000.0" and p["llm.budget.session_e2e_max_ms"] == "60000.0"
    assert float(p["llm.agent.tool_call_complete_ms_p95"]) > 0


def test_marker_and_fixture_on_the_reuse_breaking_server_fail_naming_the_turns(pytester, servers):
    pytester.makepyfile(test_agent="""
        import pytest

        @pytest.mark.llm_slo("agent_session", prompt_tokens=512, output_tokens=8, steps=4, tool_result_tokens=24,
                             tool_time=0, samples=3, warmup=0, prefix_reuse_min=0.9, turn_ttft_p95=None,
                             session_e2e_p95=None)
        def test_marker(llm_latency):
            llm_latency.measure().check()

        def test_fixture(llm_latency):
            res = llm_latency.measure("agent_session", prompt_tokens=512, output_tokens=8, steps=4,
                                      tool_result_tokens=24, tool_time=0, samples=3, warmup=0,
                                      prefix_reuse_min=0.9, turn_ttft_p95=None, session_e2e_p95=None)
            assert res.agent.turn(2)["reuse"] >= 0.9  # turn 2 still extends turn 1
            res.check()
    """)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={servers[1]}")
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines(["*prefix reuse *% on turns 3–4 (expected ≥ 90%*the cache stops at the first tool call "
                            "— does the chat template rewrite tool-call history?*"])


def test_agent_budget_outside_a_session_is_a_usage_error_naming_the_file(pytester, servers):
    pytester.makefile(".slo.yaml", bad="workloads:\n  chat:\n    slo:\n      prefix_reuse_min: 0.9\n")
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={servers[0]}")
    assert r.ret != 0
    r.stdout.fnmatch_lines(["*bad.slo.yaml:4 workloads.chat.slo.prefix_reuse_min: prefix_reuse_min belongs to an "
                            "agent session: set steps (e.g. steps: 5) or class: agent_session*"])
