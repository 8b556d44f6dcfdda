"""TTFT budgets per prompt-length bucket end to end on the reference target (issue 27): the JSON
carries each bucket's figures, a too-tight bucket fails the test naming it, and the HTML report
draws TTFT against prompt length."""
import json

import pytest

from pytest_llm_latency.targets.reference.launch import start_reference

SLO = """
workloads:
  fair:
    class: custom
    prompt_tokens: {distribution: uniform, min: 64, max: 2048}
    output_tokens: 2
    samples: 10
    warmup: 1
    confidence: null
    slo:
      ttft_p50_by_prompt: [{below: 1024, budget: 10s}, {at_least: 1024, budget: 10s}]
  tight:
    class: custom
    prompt_tokens: {distribution: uniform, min: 64, max: 2048}
    output_tokens: 2
    samples: 10
    warmup: 1
    confidence: null
    slo:
      ttft_p50_by_prompt: [{below: 1024, budget: 10s}, {at_least: 1024, budget: 0.001ms}]
"""


@pytest.fixture(scope="module")
def server():
    with start_reference("reference://h100-sxm/llama-3.1-8b?time_scale=0.2", mode="subprocess") as handle:
        yield handle.url


def test_each_bucket_is_reported_and_a_too_tight_one_fails_naming_it(pytester, server):
    pytester.makefile(".slo.yaml", buckets=SLO)
    r = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", f"--llm-latency-url={server}",
                           "--llm-latency-seed=4", "--llm-latency-json=r.json", "--llm-latency-html=r.html")
    r.assert_outcomes(passed=1, failed=1)
    fair, tight = json.loads((pytester.path / "r.json").read_text())["results"]
    rows = fair["by_prompt"]["buckets"]
    assert [(b["key"], b["lo"], b["hi"], b["status"]) for b in rows] == [
        ("ttft_p50_by_prompt[<1024]", 0, 1024, "pass"), ("ttft_p50_by_prompt[>=1024]", 1024, None, "pass")]
    lengths = [q["prompt_tokens"] for q in fair["requests"]]
    assert [b["n"] for b in rows] == [sum(1 for n in lengths if n < 1024), sum(1 for n in lengths if n >= 1024)]
    assert all(b["n"] > 0 and b["estimate_ms"] > 0 for b in rows)
    assert fair["budgets"]["ttft_p50_by_prompt[<1024]_ms"] == 10000
    assert fair["by_prompt"]["length_source"] == "server count"
    assert tight["verdict"] == "fail"
    assert [b["status"] for b in tight["by_prompt"]["buckets"]] == ["pass", "fail"]
    assert tight["violations"][0].startswith("ttft_p50_by_prompt[>=1024] ([1024, inf) prompt tokens): TTFT p50 ")
    assert "> budget 0.001 ms (n=" in tight["violations"][0]
    out = r.stdout.str()
    assert "ttft_p50_by_prompt[>=1024] ([1024, inf) prompt tokens): TTFT p50" in out
    assert "TTFT by prompt length (half-open token ranges):" in out
    html = (pytester.path / "r.html").read_text()
    assert html.count("TTFT against prompt length") >= 2  # one scatter per workload
