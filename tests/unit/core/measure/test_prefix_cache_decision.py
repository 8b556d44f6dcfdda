"""The prefix-cache decision: cached prompts are not judged (pure logic, and the runner
on a scripted llama.cpp-like server that reports ``timings.cache_n``)."""
import json

import httpx
import pytest

from tests.helpers.fakeserver import VirtualTime
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.client.server.prometheus import delta, parse_metrics
from pytest_llm_latency.client.runner import measure
from pytest_llm_latency.core.checks import judge as judge_result
from pytest_llm_latency.core.measure.prefix_cache import ALWAYS_CACHED_PER_REQUEST, CacheEvidence, evidence, decide
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers import paths

RECORDINGS = str(paths.RECORDINGS)  # copies of ../shared/recordings


def test_counters_from_each_server_are_read():
    ours = [512] * 6
    assert evidence({"vllm:prefix_cache_hits_total": 3000.0, "vllm:prefix_cache_queries_total": 3072.0}, [], ours) \
        == CacheEvidence(3000, 3072, 6, "vllm:prefix_cache_hits_total in /metrics", 3072)
    ev = evidence({"llamacpp:prompt_tokens_cached_total": 3066.0, "llamacpp:prompt_tokens_total": 6.0}, [], ours)
    assert (ev.cached_tokens, ev.seen_tokens) == (3066, 3072)
    assert evidence({"vllm:gpu_prefix_cache_hits_total": 16.0}, [], ours).cached_tokens == 16
    assert evidence({"sglang:cache_hit_rate": 0.5}, [], ours).cached_tokens == 1536
    assert evidence({"vllm:num_requests_running": 0.0}, [], ours) is None  # no cache figures: no evidence
    # per-response timings.cache_n win over counters (they are exactly our requests)
    assert evidence({"vllm:prefix_cache_hits_total": 9.0}, [500, 500], [512, 512]).cached_tokens == 1000


def test_recorded_llamacpp_scrapes_give_the_cached_counter():
    before = parse_metrics(open(f"{RECORDINGS}/metrics-llamacpp-before.txt").read())
    after = parse_metrics(open(f"{RECORDINGS}/metrics-llamacpp-after.txt").read())
    ev = evidence(delta(before, after), [], [66, 66])
    assert ev is not None and ev.cached_tokens == 39 and ev.source.startswith("llamacpp:prompt_tokens_cached_total")


def test_nearly_all_cached_is_not_judged():
    v = decide(CacheEvidence(3066, 3072, 6, "llamacpp:prompt_tokens_cached_total in /metrics", 3072))
    assert v.error.startswith("not judged: 3066 of 3072 prompt tokens were served from the server's prefix cache")
    assert "--llm-latency-nonce" in v.error and "3066 of 3072" in v.note


def test_a_template_head_and_chance_matches_are_allowed():
    n, each = 20, 512
    head_only = CacheEvidence(ALWAYS_CACHED_PER_REQUEST * n, each * n, n, "x")
    assert decide(head_only) == decide(None) and decide(head_only).error is None
    just_over = CacheEvidence(head_only.allowance + 1, each * n, n, "x")
    assert decide(just_over).error is not None


def test_shared_prefix_workloads_are_only_noted():
    v = decide(CacheEvidence(3000, 3072, 6, "x"), shared_prefix_tokens=400)
    assert v.error is None and "shares a 400-token prefix" in v.note


def test_other_clients_traffic_is_noted_not_blamed():
    v = decide(CacheEvidence(50_000, 3072, 6, "vllm:prefix_cache_hits_total in /metrics", seen_tokens=90_000))
    assert v.error is None and "other clients share the server" in v.note


# --------------------------------------------------------------- through the runner
def llamacpp_like(cache_n: int, prompt_n: int, served=("smol.gguf",)):
    """A llama.cpp-like server: serves any model name, reports timings.cache_n."""
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": s} for s in served]})
        if request.url.path != "/v1/completions":
            return httpx.Response(404)
        body = json.loads(request.content)
        n = body["max_tokens"]
        events = [{"choices": [{"text": " t", "index": 0, "finish_reason": None}]} for _ in range(n - 1)]
        events.append({"choices": [{"text": " t", "index": 0, "finish_reason": "length"}],
                       "timings": {"cache_n": cache_n, "prompt_n": prompt_n, "prompt_ms": 1.0}})
        events.append({"choices": [], "usage": {"prompt_tokens": cache_n + prompt_n, "completion_tokens": n}})
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse.encode())
    return handler


def run(cache_n, prompt_n, model="smol.gguf", served=("smol.gguf",), **spec):
    c = OpenAIClient(make_http_client(transport=httpx.MockTransport(llamacpp_like(cache_n, prompt_n, served))),
                     "http://x", model, clock=VirtualTime(), sleep=lambda s: None)
    w = make_workload("w", {"class": "custom", "prompt_tokens": cache_n + prompt_n, "output_tokens": 4,
                            "samples": 5, "warmup": 0, "slo": {"ttft_p50": "1s"}, **spec})
    return judge_result(measure(c, w, nonce="pinned", counter=lambda t: len(t.split())))


def test_cached_samples_are_an_error_not_a_pass():
    res = run(cache_n=508, prompt_n=4)
    assert res.verdict == "error"
    assert any(e.startswith("not judged: 2540 of 2560 prompt tokens") for e in res.errors)
    assert res.prefix_cache.cached_tokens == 2540 and res.measurement.nonce == "pinned"


def test_uncached_samples_pass():
    res = run(cache_n=2, prompt_n=510)  # BOS and "[": what a salted prompt shares
    assert res.verdict == "pass", res.failure_message()


def test_shared_prefix_workload_is_judged_with_a_note():
    res = run(cache_n=400, prompt_n=112, shared_prefix_tokens=400)
    assert res.verdict == "pass" and any("shares a 400-token prefix" in n for n in res.shown_notes)


# ------------------------------------------------------------------- model check
def test_wrong_model_on_a_single_model_server_is_an_error():
    res = run(cache_n=0, prompt_n=64, model="no-such-model")
    assert res.verdict == "error" and res.n == 0
    assert "model 'no-such-model' is not served at http://x; served models: smol.gguf (the only one" in res.errors[0]


def test_wrong_model_among_several_is_a_note():
    res = run(cache_n=0, prompt_n=64, model="no-such-model", served=("a", "b"))
    assert res.verdict == "pass" and res.n == 5
    assert any("model 'no-such-model' is not among the 2 models" in n for n in res.notes)


@pytest.mark.parametrize("entry", [{"id": "smol.gguf"}, {"id": "/m/smol.gguf", "aliases": ["smol.gguf"]}])
def test_a_listed_name_or_alias_is_fine(entry):
    def handler(request):
        return httpx.Response(200, json={"data": [entry]})
    c = OpenAIClient(make_http_client(transport=httpx.MockTransport(handler)), "http://x", "smol.gguf")
    assert c.check_model() is None


def test_no_model_configured_or_none_listed_is_not_checked():
    def handler(request):
        return httpx.Response(404)
    assert OpenAIClient(make_http_client(transport=httpx.MockTransport(handler)), "http://x", "m").check_model() \
        is None
