"""The reference target's Ollama behaviours and counting rules, on the wire: thinking output,
idle unload with a load time, explicit load/unload and /api/ps, the prompt cache's omitted
counts, the chars3 rule and a server without /tokenize."""
import math

import pytest

from tests.reference.refclient import stream_ollama, words
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.targets.reference.launch import parse_reference_url
from pytest_llm_latency.targets.reference.residency import parse_keep_alive

MODEL = "llama-3.1-8b"


def gen(http, url, prompt, n=4, path="/api/generate", **extra):
    body = {"model": MODEL, "options": {"num_predict": n}, **extra}
    body.update({"messages": [{"role": "user", "content": prompt}]} if path == "/api/chat" else {"prompt": prompt})
    return stream_ollama(http, url, body, path=path)


@pytest.mark.parametrize("path", ["/api/generate", "/api/chat"])
def test_thinking_tokens_come_first_unless_think_is_false(serve, http, path):
    h = serve("time_scale=0&thinking_tokens=3", mode="thread")
    s = gen(http, h.url, words(20, "a"), 200, path=path)
    objs = [o if path == "/api/generate" else o["message"] for _, o in s.events if not o.get("done")]
    thinking = [o for o in objs if o.get("thinking")]
    content = "response" if path == "/api/generate" else "content"
    assert len(thinking) == 3 and all(o[content] == "" for o in thinking) and objs[:3] == thinking
    assert all(o[content] and "thinking" not in o for o in objs[3:])
    assert s.final["eval_count"] == len(objs)  # thinking tokens are counted as generated
    s = gen(http, h.url, words(20, "b"), 200, path=path, think=False)
    assert not any((o.get("thinking") or (o.get("message") or {}).get("thinking")) for _, o in s.events)


def test_an_idle_unloaded_model_loads_inside_the_next_request(serve, http):
    # keep_alive=0: the model unloads as soon as a request ends (OLLAMA_KEEP_ALIVE=0); 300 ms to load
    h = serve("time_scale=1&load_time=0.3&keep_alive=0", mode="thread")
    cold = gen(http, h.url, words(50, "c1"))
    assert cold.final["load_duration"] >= 300e6
    assert (cold.chunks[0][0] - cold.t_send) / 1e6 >= 300  # the load is inside the TTFT
    kept = gen(http, h.url, words(50, "c2"), keep_alive="5m")  # also cold, then asks to stay loaded
    warm = gen(http, h.url, words(50, "c3"))
    assert kept.final["load_duration"] >= 300e6 and warm.final["load_duration"] < 50e6
    assert http.get(h.url + "/api/ps").json()["models"] == []  # warm asked nothing: unloaded again


def test_load_and_unload_requests_and_api_ps(serve, http):
    h = serve("time_scale=1&load_time=0.2", mode="thread")
    assert http.get(h.url + "/api/ps").json()["models"] == []  # nothing loaded before the first request
    r = http.post(h.url + "/api/generate", json={"model": MODEL}).json()
    assert r["done"] is True and r["done_reason"] == "load"
    assert [m["name"] for m in http.get(h.url + "/api/ps").json()["models"]] == [MODEL + ":latest"]
    assert gen(http, h.url, words(10, "u1")).final["load_duration"] < 50e6
    r = http.post(h.url + "/api/chat", json={"model": MODEL, "messages": [], "keep_alive": 0}).json()
    assert r["done_reason"] == "unload" and http.get(h.url + "/api/ps").json()["models"] == []
    assert gen(http, h.url, words(10, "u2")).final["load_duration"] >= 200e6
    bad = http.post(h.url + "/api/generate", json={"model": MODEL, "prompt": "x", "keep_alive": "5 minutes"})
    assert bad.status_code == 400 and "keep_alive" in bad.json()["error"]


def test_evict_every_unloads_after_every_nth_request(serve, http):
    h = serve("time_scale=1&load_time=0.1&evict_every=3", mode="thread")
    loads = [gen(http, h.url, words(10, f"e{i}")).final["load_duration"] >= 100e6 for i in range(7)]
    assert loads == [True, False, False, True, False, False, True]


def test_a_cached_prompt_omits_its_counts_and_skips_its_prefill(serve, http):
    h = serve("time_scale=1&prompt_cache=2", mode="thread")
    prompt = words(2000, "cache")
    first, again = gen(http, h.url, prompt, path="/api/chat"), gen(http, h.url, prompt, path="/api/chat")
    assert first.final["prompt_eval_count"] == 2000 + 3 and first.final["prompt_eval_duration"] > 30e6
    assert "prompt_eval_count" not in again.final and "prompt_eval_duration" not in again.final
    assert (again.chunks[0][0] - again.t_send) < 0.5 * (first.chunks[0][0] - first.t_send)
    for i in range(2):  # two other prompts push it out of a 2-prompt cache
        gen(http, h.url, words(20, f"other{i}"), path="/api/chat")
    assert gen(http, h.url, prompt, path="/api/chat").final["prompt_eval_count"] == 2003


def test_chars3_rule_and_no_tokenize_endpoint(serve, http):
    h = serve("time_scale=0&tokenizer=chars3", mode="thread")
    text = "one token per three characters, spaces too"
    assert http.post(h.url + "/tokenize", json={"model": MODEL, "prompt": text}).json()["count"] == \
        math.ceil(len(text) / 3)
    assert gen(http, h.url, text).final["prompt_eval_count"] == math.ceil(len(text) / 3)
    usage = http.post(h.url + "/v1/completions", json={"prompt": text, "max_tokens": 1}).json()["usage"]
    assert usage["prompt_tokens"] == math.ceil(len(text) / 3)
    off = serve("time_scale=0&tokenize_endpoint=0", mode="thread")
    for path in ("/tokenize", "/v1/tokenize"):
        assert http.post(off.url + path, json={"model": MODEL, "prompt": "a b"}).status_code == 404


@pytest.mark.parametrize("value, seconds", [(None, None), (0, 0.0), (300, 300.0), ("5m", 300.0), ("1h30m", 5400.0),
                                            ("-1", -1.0), ("-1m", -60.0), ("250ms", 0.25), ("0", 0.0)])
def test_keep_alive_durations(value, seconds):
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize("value", ["5 minutes", "m", True, [], "5x"])
def test_bad_keep_alive(value):
    with pytest.raises(ValueError):
        parse_keep_alive(value)


@pytest.mark.parametrize("query, message", [("tokenizer=bpe", "tokenizer must be one of word, chars3"),
                                            ("load_time=-1", "load_time must be >= 0"),
                                            ("prompt_cache=-2", "prompt_cache, thinking_tokens and evict_every")])
def test_bad_options_are_config_errors(query, message):
    with pytest.raises(ConfigError, match=message):
        parse_reference_url(f"reference://h100-sxm/llama-3.1-8b?{query}")


def test_samples_served_from_ollamas_prompt_cache_are_not_judged_and_named(serve, http):
    """Through the runner: a pinned nonce replayed against a caching server sends the samples
    again; Ollama omits their prompt_eval_count, which is named as its prompt cache."""
    from pytest_llm_latency.client.runner import Target, make_client, measure
    from pytest_llm_latency.core.checks import judge
    from pytest_llm_latency.core.spec.workload import make_workload

    h = serve("time_scale=0&prompt_cache=64", mode="thread")
    c = make_client(Target(h.url, "ollama"), http)
    w = make_workload("w", {"class": "custom", "prompt_tokens": 256, "output_tokens": 2, "samples": 5,
                            "warmup": 0, "max_error_rate": 0.5})
    runs = [judge(measure(c, w, nonce="pinned", counter=lambda t: len(t.split()))) for _ in range(2)]
    assert runs[0].verdict == "pass" and runs[0].measurement.prompt_exact_requests == runs[0].n
    second = runs[1]
    assert second.verdict == "error" and not any("no prompt token usage" in e for e in second.errors)
    assert any(e.startswith(f"not judged: {256 * second.n} of {256 * second.n} prompt tokens") and
               "served from Ollama's prompt cache" in e for e in second.errors), second.errors


def test_a_run_of_cold_starts_only_is_an_error_that_says_so(serve, http):
    from pytest_llm_latency.client.runner import Target, make_client, measure
    from pytest_llm_latency.core.checks import judge
    from pytest_llm_latency.core.spec.workload import make_workload

    h = serve("time_scale=1&load_time=0.15&evict_every=1", mode="thread")  # every request unloads it
    w = make_workload("w", {"class": "custom", "prompt_tokens": 64, "output_tokens": 1, "samples": 3, "warmup": 1})
    res = judge(measure(make_client(Target(h.url, "ollama"), http), w, counter=lambda t: len(t.split())))
    assert res.verdict == "error" and res.cold_start.cold_starts == 3 and res.n == 0
    assert res.errors == [e for e in res.errors if e.startswith("all 3 samples were cold starts")] != []
    with pytest.raises(Exception, match="no TTFT values were measured"):
        _ = res.ttft
