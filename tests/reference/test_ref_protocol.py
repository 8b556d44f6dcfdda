"""Wire shapes of the reference server: OpenAI (vLLM flavour), Ollama, tokenize, models, metrics."""
from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.reference.refclient import stream_ollama, stream_openai, words

MODEL = "llama-3.1-8b"


def test_completions_stream_shape(fast_server, http):
    s = stream_openai(http, fast_server.url, {"model": MODEL, "prompt": words(12), "max_tokens": 9,
                                              "ignore_eos": True,
                                              "stream_options": {"include_usage": True}})
    assert s.status == 200 and s.headers["content-type"].startswith("text/event-stream")
    objs = [o for _, o in s.events]
    assert all(o["object"] == "text_completion" and o["model"] == MODEL for o in objs)
    assert [len(o["choices"]) for o in objs] == [1] * 9 + [0]
    assert [o["choices"][0]["finish_reason"] for o in objs[:-1]] == [None] * 8 + ["length"]
    assert objs[-1]["usage"] == {"prompt_tokens": 12, "total_tokens": 21, "completion_tokens": 9}
    assert s.done and s.tokens == 9 and len(s.text.split()) == 9 and s.text.isascii()
    assert len({o["id"] for o in objs}) == 1


def test_chat_stream_role_chunk_and_continuous_usage(fast_server, http):
    body = {"model": MODEL, "messages": [{"role": "user", "content": words(10)}], "max_tokens": 6,
            "ignore_eos": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    s = stream_openai(http, fast_server.url, body, path="/v1/chat/completions")
    objs = [o for _, o in s.events]
    first = objs[0]
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert first["usage"]["completion_tokens"] == 0
    running = [o["usage"]["completion_tokens"] for o in objs[1:-1]]
    assert running == [1, 2, 3, 4, 5, 6]
    assert all(o["usage"]["prompt_tokens"] == 10 + 3 for o in objs)      # 1 message: +2, +1
    assert objs[-2]["choices"][0]["finish_reason"] == "length" and objs[-1]["choices"] == []
    assert s.done


@pytest.mark.parametrize("where", ["request", "server"])
def test_several_tokens_per_chunk(where, http, serve):
    if where == "server":
        handle, extra = serve("time_scale=0&stream_interval=4", mode="thread"), {}
    else:
        handle, extra = serve("time_scale=0", mode="thread"), {"stream_interval": 4}
    body = {"prompt": words(5), "max_tokens": 10, "ignore_eos": True, **extra,
            "stream_options": {"continuous_usage_stats": True}}
    s = stream_openai(http, handle.url, body)
    assert [n for _, n in s.chunks] == [4, 4, 2]
    assert [o["usage"]["completion_tokens"] for _, o in s.events] == [4, 8, 10]
    assert [len(o["choices"][0]["text"].split()) for _, o in s.events] == [4, 4, 2]


def test_non_stream_shapes_and_tokenize_agree(fast_server, http):
    prompt = words(37, salt="salt-1")
    tok = http.post(fast_server.url + "/tokenize", json={"model": MODEL, "prompt": prompt}).json()
    assert tok["count"] == 37 and len(tok["tokens"]) == 37 and tok["max_model_len"] == 4096
    r = http.post(fast_server.url + "/v1/completions", json={"model": MODEL, "prompt": prompt,
                                                             "max_tokens": 7, "ignore_eos": True}).json()
    assert r["object"] == "text_completion" and r["usage"]["prompt_tokens"] == 37
    assert r["usage"]["completion_tokens"] == 7 == len(r["choices"][0]["text"].split())
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}]
    tok_chat = http.post(fast_server.url + "/v1/tokenize", json={"model": MODEL, "messages": msgs}).json()
    c = http.post(fast_server.url + "/v1/chat/completions",
                  json={"model": MODEL, "messages": msgs, "max_completion_tokens": 3, "ignore_eos": True}).json()
    assert c["object"] == "chat.completion" and c["choices"][0]["message"]["role"] == "assistant"
    assert c["usage"]["prompt_tokens"] == tok_chat["count"] == 2 + 37 + 2 * 2 + 1
    assert c["usage"]["completion_tokens"] == 3 and c["choices"][0]["finish_reason"] == "length"
    llama = http.post(fast_server.url + "/tokenize", json={"content": prompt}).json()
    assert llama == {"tokens": tok["tokens"]}


def test_eos_is_deterministic_and_forcible(fast_server, http):
    url = fast_server.url + "/v1/completions"
    lengths = {}
    for i in range(30):
        body = {"prompt": words(20, salt=f"p{i}"), "max_tokens": 200}
        a = http.post(url, json=body).json()
        b = http.post(url, json=body).json()
        assert a["choices"][0]["text"] == b["choices"][0]["text"]           # deterministic
        n, reason = a["usage"]["completion_tokens"], a["choices"][0]["finish_reason"]
        assert (reason == "stop") == (n < 200)
        lengths[i] = n
        forced = http.post(url, json={**body, "ignore_eos": True}).json()
        assert forced["usage"]["completion_tokens"] == 200 and forced["choices"][0]["finish_reason"] == "length"
        floor = http.post(url, json={**body, "min_tokens": 200}).json()
        assert floor["usage"]["completion_tokens"] == 200
    assert sum(n < 200 for n in lengths.values()) >= 15                        # early stops are common
    assert len(set(lengths.values())) > 5


def test_context_length_and_unknown_model_errors(fast_server, http):
    r = http.post(fast_server.url + "/v1/completions", json={"prompt": words(100), "max_tokens": 4000})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == (
        "This model's maximum context length is 4096 tokens. However, you requested 4100 tokens "
        "(100 in the messages, 4000 in the completion). Please reduce the length of the messages "
        "or completion.")
    r = http.post(fast_server.url + "/v1/chat/completions",
                  json={"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 404 and r.json()["error"]["message"] == "The model `gpt-4` does not exist."
    assert "llama" not in r.text
    assert http.post(fast_server.url + "/v1/completions", content=b"{nope").status_code == 400
    assert http.post(fast_server.url + "/v1/completions", json={"prompt": " "}).status_code == 400
    assert http.get(fast_server.url + "/nope").status_code == 404
    assert http.get(fast_server.url + "/v1/completions").status_code == 405


def test_models_and_health(fast_server, http):
    models = http.get(fast_server.url + "/v1/models").json()
    assert [m["id"] for m in models["data"]] == [MODEL] and models["data"][0]["max_model_len"] == 4096
    assert http.get(fast_server.url + "/health").status_code == 200


def test_served_model_name(serve, http):
    h = serve("time_scale=0&served_model_name=meta-llama/Llama-3.1-8B-Instruct", mode="thread")
    assert http.get(h.url + "/v1/models").json()["data"][0]["id"] == "meta-llama/Llama-3.1-8B-Instruct"
    ok = http.post(h.url + "/v1/completions", json={"model": "meta-llama/Llama-3.1-8B-Instruct", "prompt": "a"})
    assert ok.status_code == 200
    assert http.post(h.url + "/v1/completions", json={"model": MODEL, "prompt": "a"}).status_code == 404


def test_ollama_generate_stream_and_final_object(fast_server, http):
    s = stream_ollama(http, fast_server.url, {"model": MODEL, "prompt": words(25),
                                              "options": {"num_predict": 12}})
    assert s.status == 200 and s.headers["content-type"] == "application/x-ndjson"
    f = s.final
    assert s.done and f["done_reason"] in ("stop", "length")
    assert f["eval_count"] == s.tokens <= 12 and f["prompt_eval_count"] == 25
    for key in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration"):
        assert isinstance(f[key], int) and f[key] >= 0
    chat = stream_ollama(http, fast_server.url, {"model": MODEL + ":latest", "messages": [
        {"role": "user", "content": "hello"}], "options": {"num_predict": 3}}, path="/api/chat")
    assert chat.final["message"] == {"role": "assistant", "content": ""}
    assert chat.final["prompt_eval_count"] == 1 + 3
    assert all("message" in o for _, o in chat.events)


def test_ollama_non_stream_and_errors(fast_server, http):
    r = http.post(fast_server.url + "/api/generate", json={"model": MODEL, "prompt": "a b c", "stream": False,
                                                           "options": {"num_predict": 2000}}).json()
    assert r["done"] is True and r["eval_count"] == len(r["response"].split())
    assert (r["done_reason"] == "length") == (r["eval_count"] == 2000)
    missing = http.post(fast_server.url + "/api/generate", json={"model": "llama3.2", "prompt": "x"})
    assert missing.status_code == 404 and "not found" in missing.json()["error"]
    assert http.get(fast_server.url + "/api/tags").json()["models"][0]["name"] == MODEL + ":latest"


def test_metrics_parse_with_vllm_names_and_types(fast_server, http):
    http.post(fast_server.url + "/v1/completions", json={"prompt": "a b", "max_tokens": 3, "ignore_eos": True})
    text = http.get(fast_server.url + "/metrics").text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    expected = {"vllm:time_to_first_token_seconds": "histogram", "vllm:inter_token_latency_seconds": "histogram",
                "vllm:e2e_request_latency_seconds": "histogram", "vllm:request_queue_time_seconds": "histogram",
                "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
                "vllm:kv_cache_usage_perc": "gauge", "vllm:prefix_cache_queries": "counter",
                "vllm:prefix_cache_hits": "counter"}
    for name, kind in expected.items():
        assert fams[name].type == kind, name
        assert all(s.labels.get("model_name") == MODEL for s in fams[name].samples if "le" not in s.labels)
    assert "vllm:prefix_cache_queries_total{" in text and "vllm:prefix_cache_hits_total{" in text
    count = [s.value for s in fams["vllm:time_to_first_token_seconds"].samples
             if s.name.endswith("_count")][0]
    assert count >= 1


def test_keep_alive_reuses_one_connection(serve):
    h = serve("time_scale=0", mode="thread")
    with httpx.Client(limits=httpx.Limits(max_keepalive_connections=1)) as client:
        for _ in range(20):
            s = stream_openai(client, h.url, {"prompt": "a b c", "max_tokens": 3, "ignore_eos": True})
            assert s.done
            assert client.post(h.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code == 200
    assert h.server.connections_accepted == 1
    assert json.loads(httpx.get(h.url + "/health", headers={"connection": "close"}).text) == {"status": "ok"}


def test_disconnected_clients_free_their_slot(serve, http):
    h = serve("time_scale=1&max_num_seqs=1", mode="thread")
    url = h.url + "/v1/completions"
    with httpx.Client() as gone:                         # streams 2 tokens of ~2000, then leaves
        with gone.stream("POST", url, json={"prompt": "a", "max_tokens": 2000, "ignore_eos": True,
                                            "stream": True}) as resp:
            next(resp.iter_raw())
    with httpx.Client() as waiting:                      # queued behind nothing now
        s = stream_openai(waiting, h.url, {"prompt": "b", "max_tokens": 3, "ignore_eos": True})
    assert s.done and s.ttft_s < 1.0
    # a non-streamed request that is still queued when its client times out is dropped too
    blocker = threading.Thread(target=lambda: httpx.post(url, json={"prompt": "c", "max_tokens": 60,
                                                                    "ignore_eos": True}, timeout=10))
    blocker.start()
    time.sleep(0.05)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url, json={"prompt": "d", "max_tokens": 5000, "ignore_eos": True}, timeout=0.2)
    blocker.join(10)
    deadline = time.monotonic() + 5
    while h.server.engine.has_work() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not h.server.engine.has_work()


def test_expect_100_continue_is_answered(fast_server):
    import socket
    port = int(fast_server.url.rsplit(":", 1)[1])
    body = json.dumps({"prompt": "a b", "max_tokens": 2}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\n"
                  b"content-length: %d\r\n\r\n" % len(body))
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(65536)
        assert got.split(b"\r\n")[0] == b"HTTP/1.1 200 OK"
