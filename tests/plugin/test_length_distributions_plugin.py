"""Length distributions and shared-prefix groups end to end on the reference target (issue 27):
the server saw each request's drawn prompt and output length, and declared shared prefixes are
expected cache hits on a prefix-caching server (the run is judged, not refused as cache-faked)."""
import json

import pytest

from pytest_llm_latency.core.spec.lengths import draw_lengths, parse_length
from pytest_llm_latency.targets.reference.launch import start_reference

PROMPT = {"distribution": "lognormal", "mean": 300, "stdev": 120, "min": 64, "max": 900}
OUTPUT = {"distribution": "uniform", "min": 2, "max": 9}
SLO = """
workloads:
  mixed:
    class: custom
    prompt_tokens: {distribution: lognormal, mean: 300, stdev: 120, min: 64, max: 900}
    output_tokens: {distribution: uniform, min: 2, max: 9}
    samples: 12
    warmup: 1
    confidence: null
    slo: {ttft_p50: 10s}
"""
GROUPS = """
workloads:
  rag:
    class: custom
    prompt_tokens: {distribution: uniform, min: 600, max: 800}
    output_tokens: 4
    shared_prefix_groups: {groups: 2, tokens: 512}
    samples: 8
    warmup: 2
    confidence: null
    slo: {ttft_p50: 10s}
"""


@pytest.fixture(scope="module")
def cached_server():
    with start_reference("reference://h100-sxm/llama-3.1-8b?prefix_caching=1&time_scale=0.2",
                         mode="subprocess") as handle:
        yield handle.url


def run(pytester, url, slo, *args):
    pytester.makefile(".slo.yaml", lengths=slo)
    r = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", f"--llm-latency-url={url}",
                           "--llm-latency-json=r.json", *args)
    return r, json.loads((pytester.path / "r.json").read_text())["results"][0]


def test_the_server_saw_each_requests_drawn_prompt_and_output_length(pytester, cached_server):
    r, res = run(pytester, cached_server, SLO, "--llm-latency-seed=5")
    assert res["verdict"] == "pass", r.stdout.str()
    n = 1 + 12  # the warm-up request draws first, then the samples in send order
    prompts = draw_lengths(parse_length(PROMPT, "p"), n, seed=5, key="prompt_tokens")[1:]
    outputs = draw_lengths(parse_length(OUTPUT, "o"), n, seed=5, key="output_tokens")[1:]
    rows = res["requests"]
    assert [q["prompt_tokens"] for q in rows] == prompts  # as the server counted them
    assert [q["output_tokens"] for q in rows] == outputs
    assert len(set(prompts)) > 6 and len(set(outputs)) > 3  # the lengths did vary
    assert res["measurement"]["prompt_exact_requests"] == 12
    # another seed, other lengths
    _, res7 = run(pytester, cached_server, SLO, "--llm-latency-seed=7")
    assert [q["prompt_tokens"] for q in res7["requests"]] != prompts


def test_shared_prefix_groups_are_expected_cache_hits_and_the_run_is_judged(pytester, cached_server):
    r, res = run(pytester, cached_server, GROUPS, "--llm-latency-seed=3")
    assert res["verdict"] == "pass", r.stdout.str()
    assert res["prefix_cache"]["expected_cached_tokens"] == 8 * 512  # 512 is whole 16-token blocks
    hits = res["prefix_cache"]["cached_tokens"]
    assert hits >= 8 * 496, res["prefix_cache"]  # the warm-up filled both groups: every sample hit its prefix
    assert any("expected: shared_prefix_groups declares up to 4096 cached tokens" in n for n in res["notes"])
    assert all(q["cached_tokens"] >= 496 for q in res["requests"])
    prompts = draw_lengths(parse_length({"distribution": "uniform", "min": 600, "max": 800}, "p"), 10, seed=3,
                           key="prompt_tokens")[2:]
    assert [q["prompt_tokens"] for q in res["requests"]] == prompts
    # a second run shares no prefix with the first: the nonce salts the groups (the warm-up refills them)
    r2, res2 = run(pytester, cached_server, GROUPS, "--llm-latency-seed=3")
    assert res2["verdict"] == "pass", r2.stdout.str()


MARKED = '''
import pytest

@pytest.mark.llm_slo("custom", prompt_tokens={"distribution": "uniform", "min": 40, "max": 200},
                     output_tokens={"distribution": "fixed", "value": 3}, samples=6, warmup=0, confidence=None,
                     ttft_p50="10s")
def test_marked(llm_latency):
    pass

@pytest.mark.llm_slo("custom", prompt_tokens=64, output_tokens=2, samples=4, warmup=0, confidence=None,
                     ttft_p50="10s")
def test_measured(llm_latency):
    r = llm_latency.measure(output_tokens={"distribution": "uniform", "min": 2, "max": 6})
    assert [rec.output_tokens for rec in r.records] == [rec.expected_output_tokens for rec in r.records]
'''
BAD = '''
import pytest

@pytest.mark.llm_slo("custom", prompt_tokens={"distribution": "gaussian", "mean": 64, "stdev": 8},
                     output_tokens=2, ttft_p50="10s")
def test_bad(llm_latency):
    pass
'''


def test_marker_and_fixture_take_distributions_and_a_bad_one_names_the_key(pytester):
    pytester.makepyfile(test_marked=MARKED)
    r = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--llm-latency-json=r.json",
                           "--llm-latency-url=reference://h100-sxm/llama-3.1-8b?time_scale=0")
    r.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "r.json").read_text())
    results = {x["nodeid"].rsplit("::", 1)[-1]: x for x in doc["results"]}
    marked = results["test_marked"]["requests"]
    assert [q["output_tokens"] for q in marked] == [3] * 6 and len({q["prompt_tokens"] for q in marked}) > 2
    assert {q["output_tokens"] for q in results["test_measured"]["requests"]} <= set(range(2, 7))
    pytester.makepyfile(test_marked=BAD)
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://h:1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: test_marked.py::test_bad @llm_slo prompt_tokens.distribution: expected one of "
                            "uniform, normal, lognormal, fixed, got 'gaussian' -- e.g. {distribution: lognormal*"])


CLIPPED = """
workloads:
  long:
    class: custom
    prompt_tokens: {distribution: uniform, min: 200, max: 3000}
    output_tokens: 8
    samples: 10
    warmup: 0
    confidence: null
    slo: {ttft_p50: 10s}
"""


def test_drawn_lengths_are_clipped_to_the_context_the_server_lists(pytester):
    r, res = run(pytester, "reference://h100-sxm/llama-3.1-8b?time_scale=0&max_model_len=1024", CLIPPED,
                 "--llm-latency-seed=2")
    assert res["verdict"] == "pass", r.stdout.str()  # no request was rejected as over-long
    drawn = draw_lengths(parse_length({"distribution": "uniform", "min": 200, "max": 3000}, "p"), 10, seed=2,
                         key="prompt_tokens")
    assert sum(1 for d in drawn if d > 1016) >= 5  # most draws were beyond the context
    assert [q["prompt_tokens"] for q in res["requests"]] == [min(d, 1024 - 8) for d in drawn]
