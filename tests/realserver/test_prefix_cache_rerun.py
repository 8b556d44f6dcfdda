"""Issue 9 on a real llama-server: the same suite run twice against one long-lived server
must not pass the second time on the server's prompt cache.

llama.cpp reuses cached prompt tokens across requests (the slot's KV and its host-memory
prompt cache) and says so in every response's ``timings.cache_n``.  With a fresh nonce per
run the second run's prompts are new to it; with the nonce pinned to the first run's
(the old behaviour: salts from the seed alone) they are not, and the result must be
"not judged" (verdict error), not a pass.
"""
import json
import secrets

import pytest

pytestmark = pytest.mark.integration

# small and short: the tier's budget; budgets are generous, only the cache may change the verdict
# (3 samples: the point estimate -- no sample size up to 4 decides a p50 at the default 95%)
SLO = """
workloads:
  rerun: {class: custom, prompt_tokens: 384, output_tokens: 4, samples: 3, warmup: 1, confidence: null,
          slo: {ttft_p50: 30s}}
"""


def run(pytester, url, name, *args):
    pytester.makefile(".slo.yaml", rerun=SLO)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={url}", f"--llm-latency-json={name}", *args)
    res = json.loads((pytester.path / name).read_text())["results"][0]
    print(f"{name}: verdict {res['verdict']}, TTFT p50 {res['ttft_ms']['p50']:.1f} ms, "
          f"cached {res.get('prefix_cache', {}).get('cached_tokens')} prompt tokens")
    return r, res


def test_second_run_with_a_fresh_nonce_is_uncached(pytester, llama_tiny):
    _, first = run(pytester, llama_tiny.url, "r1.json")
    r2, second = run(pytester, llama_tiny.url, "r2.json")
    assert first["verdict"] == "pass" and second["verdict"] == "pass", r2.stdout.str()
    # BOS and the leading '▁' are shared by every salted prompt (plus chance letters)
    assert second["prefix_cache"]["cached_tokens"] <= 3 * 8


def test_second_run_with_the_nonce_pinned_is_not_judged(pytester, llama_tiny):
    nonce = secrets.token_hex(8)
    _, first = run(pytester, llama_tiny.url, "r1.json", f"--llm-latency-nonce={nonce}")
    r2, second = run(pytester, llama_tiny.url, "r2.json", f"--llm-latency-nonce={nonce}")
    assert first["verdict"] == "pass"
    assert second["verdict"] == "error" and r2.ret != 0
    assert second["prefix_cache"]["cached_tokens"] > 0.9 * 3 * 384
    r2.stdout.fnmatch_lines(["*not judged: * of 1152 prompt tokens were served from the server's prefix cache "
                             "(llama.cpp timings.cache_n*"])
