"""A prefix cache can't fake a pass across runs: the same suite run twice against one
long-lived reference server with prefix caching (a CI pipeline testing one staging server).

* fresh per-run nonce (the default): the second run's prompts are new to the cache, so its
  TTFT is as slow as the first run's and the server reports no cache hits;
* nonce pinned to one value for both runs (the old behaviour, where the salt came from the
  seed alone): the second run's prompts are all cached; the plugin reads the hits from its
  own /metrics scrape and the result is "not judged" (verdict error), never a pass.
"""
import json
import secrets

import pytest

from pytest_llm_latency.targets.reference.launch import start_reference

# 2048-token prompts: the modelled H100 prefill (~65 ms at time_scale=1) dominates TTFT, a
# cached prompt computes one token (~7 ms).  The TTFT budget is generous: the point is that
# run 2 must not pass *because of* the cache, whatever its speed.
SLO = """
workloads:
  rag: {class: custom, prompt_tokens: 2048, output_tokens: 4, samples: 5, warmup: 1, slo: {ttft_p50: 10s}}
"""


@pytest.fixture(scope="module")
def cached_server():
    with start_reference("reference://h100-sxm/llama-3.1-8b?prefix_caching=1&time_scale=1",
                         mode="subprocess") as handle:
        yield handle.url


def run(pytester, url, name, *args):
    pytester.makefile(".slo.yaml", cache=SLO)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={url}", f"--llm-latency-json={name}", *args)
    doc = json.loads((pytester.path / name).read_text())
    return r, doc, doc["results"][0]


def test_a_fresh_nonce_per_run_keeps_the_second_run_uncached(pytester, cached_server):
    r1, doc1, res1 = run(pytester, cached_server, "r1.json")
    r2, doc2, res2 = run(pytester, cached_server, "r2.json")
    assert doc1["nonce"] != doc2["nonce"] and res1["measurement"]["nonce"] == doc1["nonce"]
    r2.stdout.fnmatch_lines([f"llm-latency: nonce={doc2['nonce']} *--llm-latency-nonce {doc2['nonce']}*"])
    for r, res in ((r1, res1), (r2, res2)):
        assert res["verdict"] == "pass", r.stdout.str()
        # the server's own counter over the samples: nothing beyond block-boundary chance
        assert res["server"]["metrics"]["vllm:prefix_cache_hits_total"] <= 5 * 16
    # the same prefill work both times: run 2 is not sped up (a cached run is ~10x faster)
    assert res2["ttft_ms"]["p50"] > 0.5 * res1["ttft_ms"]["p50"]


def test_a_pinned_nonce_replayed_against_the_same_server_is_not_judged(pytester, cached_server):
    nonce = secrets.token_hex(8)  # unique to this test: run 1 is new to the server's cache
    r1, _, res1 = run(pytester, cached_server, "r1.json", f"--llm-latency-nonce={nonce}")
    assert res1["verdict"] == "pass", r1.stdout.str()
    r2, doc2, res2 = run(pytester, cached_server, "r2.json", f"--llm-latency-nonce={nonce}")
    assert doc2["nonce"] == nonce
    assert res2["verdict"] == "error" and r2.ret != 0
    assert res2["server"]["metrics"]["vllm:prefix_cache_hits_total"] > 0.9 * 5 * 2048
    assert any(e.startswith("not judged: ") and "served from the server's prefix cache" in e
               and "vllm:prefix_cache_hits_total" in e for e in res2["errors"])
    r2.stdout.fnmatch_lines(["*not judged: * of 10240 prompt tokens were served from the server's prefix cache*"])


def test_a_bad_nonce_is_a_usage_error_naming_its_source(pytester, monkeypatch):
    monkeypatch.setenv("LLM_LATENCY_NONCE", "not a nonce!")
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://h:1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*LLM_LATENCY_NONCE (environment): 'not a nonce!' is not valid for nonce: expected 1-64 *"])


def test_xdist_workers_salt_with_the_controllers_nonce(pytester):
    pytest.importorskip("xdist")
    for name in ("a", "b"):
        pytester.makefile(".slo.yaml", **{name: "workloads: {%s: {class: custom, prompt_tokens: 16, output_tokens: 4, "
                                                "samples: 3, warmup: 0}}\n" % name})
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--llm-latency-json=r.json",
                                      "--llm-latency-url=reference://h100-sxm/llama-3.1-8b?time_scale=0", timeout=120)
    r.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "r.json").read_text())
    assert [res["measurement"]["nonce"] for res in doc["results"]] == [doc["nonce"]] * 2


def test_one_workload_measured_twice_in_a_run_is_never_served_from_the_cache(pytester, cached_server):
    pytester.makepyfile(test_twice="""
        def test_twice(llm_latency):
            for _ in range(2):
                llm_latency.measure("custom", prompt_tokens=2048, output_tokens=4, samples=5, warmup=0,
                                    ttft_p50="10s")

        def test_again_elsewhere(llm_latency):
            llm_latency.measure("custom", prompt_tokens=2048, output_tokens=4, samples=5, warmup=0, ttft_p50="10s")
    """)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={cached_server}", "--llm-latency-json=r.json")
    r.assert_outcomes(passed=2)
    results = json.loads((pytester.path / "r.json").read_text())["results"]
    assert len(results) == 3
    assert all(res["server"]["metrics"]["vllm:prefix_cache_hits_total"] <= 5 * 16 for res in results), results


def test_strict_warnings_keep_an_unjudged_run_an_error(pytester, cached_server):
    """-W error::LatencyWarning makes a note fail a passing test, but the cache note of a run that
    cannot be judged must not turn that error into a failure (table and pytest must agree)."""
    nonce = secrets.token_hex(8)
    run(pytester, cached_server, "r1.json", f"--llm-latency-nonce={nonce}")
    r2, _, res2 = run(pytester, cached_server, "r2.json", f"--llm-latency-nonce={nonce}",
                      "-W", "error::pytest_llm_latency.LatencyWarning")
    assert res2["verdict"] == "error"
    r2.assert_outcomes(errors=1)
