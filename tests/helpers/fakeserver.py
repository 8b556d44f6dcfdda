"""A scripted OpenAI-compatible server behind ``httpx.MockTransport``, on virtual time.

The stream generator advances a shared ``VirtualTime`` before yielding each
SSE event, and the plugin's clock reads that virtual time, so every stamp
equals the scripted arrival time exactly: TTFT/TPOT assertions are exact and
involve no sleeps or wall clock.  Used for adapter unit tests and, through the
``pytest_llm_latency_transport`` / ``pytest_llm_latency_clock`` hooks, for
pytester tests of the plugin.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import httpx

MS = 1_000_000


class VirtualTime:
    def __init__(self) -> None:
        self.now = 1_000 * MS

    def __call__(self) -> int:
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += int(ms * MS)


@dataclass
class Script:
    ttft_ms: float = 100.0            # send → first token
    tpot_ms: float = 20.0             # per token after the first
    tokens_per_chunk: int = 1
    role_chunk_ms: float | None = None  # chat: role-only chunk at this time (None: no role chunk)
    continuous_usage: bool = True
    include_usage: bool = True
    stop_after: int | None = None     # early stop (short output) after k tokens
    tokenize: bool = True
    count_offset: int = 1             # prompt tokens = words + offset (BOS)
    model: str = "fake-model"
    status: int = 200
    fail_every: int = 0               # >0: every k-th completion request gets HTTP 500
    timings: dict | None = None       # llama.cpp-style ``timings`` on the final chunk (e.g. draft_n)
    error_body: str = ""
    reasoning: int = 0                # chat: the first k tokens stream as delta.reasoning_content
    usage_reasoning: bool = True      # ... and the final usage counts them (completion_tokens_details)
    seen_headers: list = field(default_factory=list)
    requests: list = field(default_factory=list)
    metrics: Callable[["Script"], str] | None = None  # GET /metrics text from the requests so far (None: 404)
    # structured output (issue 36): the answer's pieces, one per token, for a request body (None: " tok" each; fewer
    # pieces than max_tokens: a stop), and the per-token time of a request carrying response_format
    answer: Callable[[dict], list[str]] | None = None
    constrained_tpot_ms: float | None = None


def count_tokens(text: str, script: Script) -> int:
    return len(text.split()) + script.count_offset


def _sse(obj) -> bytes:
    return f"data: {json.dumps(obj) if not isinstance(obj, str) else obj}\n\n".encode()


def make_transport(script: Script, vt: VirtualTime) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        script.seen_headers.append(dict(request.headers))
        path = request.url.path
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": script.model, "max_model_len": 8192}]})
        if path == "/metrics" and script.metrics is not None:
            return httpx.Response(200, text=script.metrics(script), headers={"content-type": "text/plain"})
        body = json.loads(request.content or b"{}")
        if path == "/tokenize":
            if not script.tokenize:
                return httpx.Response(404, json={"detail": "Not Found"})
            special = body.get("add_special_tokens", True)  # vLLM: False counts without BOS
            return httpx.Response(200, json={"count": count_tokens(body.get("prompt", ""), script)
                                             - (0 if special else script.count_offset)})
        if path not in ("/v1/completions", "/v1/chat/completions"):
            return httpx.Response(404, json={"detail": "Not Found"})
        script.requests.append(body)
        if script.fail_every and len(script.requests) % script.fail_every == 0:
            return httpx.Response(500, json={"error": {"message": "worker crashed"}})
        if script.status != 200:
            return httpx.Response(script.status, text=script.error_body,
                                  headers={"content-type": "application/json", "retry-after": "0"})
        chat = path.endswith("chat/completions")
        prompt = body.get("prompt") if not chat else " ".join(m["content"] for m in body["messages"])
        p_tokens = count_tokens(prompt, script) + (3 if chat else 0)
        n = int(body.get("max_tokens", 16))
        if script.stop_after is not None:
            n = min(n, script.stop_after)
        pieces = script.answer(body) if script.answer is not None else None
        if pieces is not None:
            n = min(n, len(pieces))
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=_stream(script, vt, chat, p_tokens, n, body, pieces))

    return httpx.MockTransport(handler)


def _stream(script: Script, vt: VirtualTime, chat: bool, p_tokens: int, n: int, body: dict,
            pieces: list[str] | None = None):
    t0 = vt.now
    cont = script.continuous_usage and (body.get("stream_options") or {}).get("continuous_usage_stats")
    if chat and script.role_chunk_ms is not None:
        vt.now = t0 + int(script.role_chunk_ms * MS)
        yield _sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    sent = 0
    tpot = script.constrained_tpot_ms if script.constrained_tpot_ms is not None and "response_format" in body \
        else script.tpot_ms
    stops = script.stop_after is not None or (pieces is not None and len(pieces) < int(body.get("max_tokens", 16)))
    while sent < n:
        k = min(script.tokens_per_chunk, n - sent)
        first = sent == 0
        sent += k
        # the chunk carrying token `sent` arrives at ttft + (sent-1) * tpot
        vt.now = t0 + int((script.ttft_ms + (sent - 1) * tpot) * MS)
        text = "".join(pieces[sent - k:sent]) if pieces is not None else " tok" * k
        finish = ("stop" if stops else "length") if sent == n else None
        choice = {"index": 0, "finish_reason": finish}
        if chat:
            choice["delta"] = {"reasoning_content" if sent <= script.reasoning else "content": text}
        else:
            choice["text"] = text
        obj = {"choices": [choice]}
        if cont:
            obj["usage"] = {"prompt_tokens": p_tokens, "completion_tokens": sent}
        if finish is not None and script.timings is not None:
            obj["timings"] = dict(script.timings)
        del first
        yield _sse(obj)
    if script.include_usage:
        usage = {"prompt_tokens": p_tokens, "completion_tokens": n}
        if chat and script.reasoning and script.usage_reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": min(script.reasoning, n)}
        yield _sse({"choices": [], "usage": usage})
    yield _sse("[DONE]")


class FakeServerPlugin:
    """Register with ``pytester.runpytest(plugins=[FakeServerPlugin(script)])``."""

    def __init__(self, script: Script | None = None):
        self.script = script or Script()
        self.vt = VirtualTime()

    def pytest_llm_latency_transport(self, config, url):
        return make_transport(self.script, self.vt)

    def pytest_llm_latency_clock(self, config):
        return self.vt
