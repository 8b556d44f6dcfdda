"""OpenAI-compatible streaming client (vLLM, SGLang, llama.cpp, TGI, LM Studio, Ollama /v1).

Takes an injected ``httpx.Client`` (``make_http_client``, or an ``httpx.MockTransport`` in tests);
one ``stream()`` call is one measured request.  The protocol facts it relies on:

* TTFT is the first chunk with non-empty ``text`` / ``delta.content`` / ``delta.reasoning``
  (``reasoning_content``) / ``delta.tool_calls``; a role-only chunk only sets "first byte".
* usage is taken from a ``choices: []`` chunk or the final chunk (Ollama /v1 zero-fills usage on
  every chunk), with ``completion_tokens_details.reasoning_tokens`` where the server counts
  reasoning (``core.measure.reasoning``); a running, increasing ``usage.completion_tokens`` (vLLM
  ``continuous_usage_stats``) gives exact per-chunk token counts.
* every event is checked for a top-level ``error`` before ``choices``; a stream without
  ``data: [DONE]`` is a failed request.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import httpx

from ...core.errors import MeasurementError, ProtocolError
from ...core.measure.record import Clock, RecordBuilder, RequestRecord
from ..transport.failures import PROXY_TIMEOUT_HINT, content_type, error_text, proxy_page, proxy_page_error
from ..transport.http import (CONTEXT_LENGTH_HINTS, Redactor, SmallResponse, StreamingPost, Timeouts,
    bounded_request, map_transport_error)
from ..transport.sse import SSEDecoder
from ..transport.clock import MEASUREMENT_CLOCK
from .. import APIS

SSE_TYPES = ("text/event-stream",)
_decode_json = json.JSONDecoder().decode  # json.loads without its per-call type checks (the read path)


def _count(v, what: str, data: str) -> int | None:
    """A token count from usage: a non-negative int, or None when absent."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ProtocolError(f"usage.{what} is not a token count ({v!r}) in SSE event: {data[:120]!r}")
    return v


def event_json(data: str, redact: Redactor) -> dict:
    """One SSE event's ``data`` as a JSON object; anything else is a ``ProtocolError`` quoting it."""
    try:
        obj = _decode_json(data)
    except json.JSONDecodeError as exc:
        raise ProtocolError(redact(f"malformed JSON in SSE event ({exc.msg}): {data[:120]!r}")) from None
    except (ValueError, RecursionError) as exc:  # 5000-digit ints, absurd nesting
        raise ProtocolError(redact(f"unreadable JSON in SSE event ({type(exc).__name__}): {data[:120]!r}")) from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"SSE event is not a JSON object: {data[:120]!r}")
    return obj


def _nonempty(v) -> bool:
    return bool(v) if not isinstance(v, str) else v != ""


def ch_finish(choices: list) -> bool:
    """The (first) choice carries a finish_reason: the final chunk."""
    return isinstance(choices[0], dict) and choices[0].get("finish_reason") is not None


def llamacpp_timings(t: dict) -> dict:
    """llama.cpp ``timings`` → normalized server timings (ms)."""
    out = {"prefill_ms": t.get("prompt_ms"), "decode_ms": t.get("predicted_ms"), "prompt_n": t.get("prompt_n"),
           "predicted_n": t.get("predicted_n"), "cache_n": t.get("cache_n"),
           "predicted_per_token_ms": t.get("predicted_per_token_ms"), "source": "llama.cpp timings",
           # speculative decoding (core.measure.spec_decode); llama.cpp leaves both out when nothing was drafted
           "draft_n": t.get("draft_n"), "draft_n_accepted": t.get("draft_n_accepted")}
    return {k: v for k, v in out.items() if v is not None}


class OpenAIClient:
    #: the ``api`` values this class speaks (a subclass speaks its own: ``responses``, ``messages``)
    DIALECTS: tuple[str, ...] = ("completions", "chat")
    #: each dialect's streaming endpoint
    PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "responses": "/v1/responses",
             "messages": "/v1/messages"}

    def __init__(self, http: httpx.Client, base_url: str, model: str | None, api: str = "completions", *,
                 clock: Clock = MEASUREMENT_CLOCK, timeouts: Timeouts = Timeouts(),
                 redact: Redactor = Redactor(), sleep: Callable[[float], None] = time.sleep,
                 continuous_usage: bool = True):
        if api not in self.DIALECTS:
            raise ValueError(f"api must be one of {', '.join(self.DIALECTS)}, not {api!r}")
        self.http, self.base_url, self.model, self.api = http, base_url.rstrip("/"), model, api
        self.clock, self.timeouts, self.redact, self.continuous_usage = clock, timeouts, redact, continuous_usage
        self._post = StreamingPost(http, timeouts, clock, redact, sleep)
        self._models: list[dict] | None = None

    def __repr__(self) -> str:
        return f"OpenAIClient({self.base_url!r}, model={self.model!r}, api={self.api!r})"

    @property
    def api_name(self) -> str:
        """The target's ``api:`` name (``client.apis.target.Target``) this client speaks."""
        return f"openai-{self.api}"

    # ----------------------------------------------------------------- discovery
    def models(self) -> list[dict]:
        """``/v1/models`` entries; [] when the 200 answer lists none or is not a model list,
        or when the server has no such endpoint (404/405/501) and a model is configured.
        Any other non-200 (a proxy's 502 page, a 5xx, a 404 with no model configured) and
        a transport failure (refused, not HTTP) raise ``MeasurementError``: the real problem."""
        if self._models is None:
            url = f"{self.base_url}/v1/models"
            try:
                r = bounded_request(self.http, "GET", url, total_s=self.timeouts.connect_s + 5)
            except httpx.HTTPError as exc:
                raise map_transport_error(exc, url, self.timeouts, self.redact) from None
            if r.status_code != 200:
                if r.status_code in (404, 405, 501) and self.model:
                    # no model list here (the server has none, or a proxy exposes the completion
                    # path only): the configured model is sent as it is
                    self._models = []
                    return self._models
                raise self._models_failure(r, url)
            try:
                data = r.json().get("data", [])
                self._models = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
            except (ValueError, AttributeError):
                self._models = []
        return self._models

    def _models_failure(self, r: SmallResponse, url: str) -> MeasurementError:
        """A non-200 ``/v1/models``: status, content type and a redacted body excerpt, through
        the completion path's proxy-page detection."""
        code, ctype = r.status_code, content_type(r.headers)
        text = self.redact(error_text(r.content))
        if code in (401, 403):
            return MeasurementError("auth", self.redact(
                f"HTTP {code} from {url}: {text[:300]} — check LLM_LATENCY_API_KEY"))
        if proxy_page(ctype, text):
            return proxy_page_error(code, ctype, url, r.headers, text, self.redact)
        fix = "set --llm-latency-model (this server lists no models)" if code in (404, 405, 501) else \
            "check the server's log; it could not list its models"
        return MeasurementError(f"http_{code}", self.redact(
            f"HTTP {code} ({ctype or 'no content-type'}) from {url}: {text[:300]!r} — {fix}"))

    def resolve_model(self) -> str:
        """The configured model, else the only/first model the server serves."""
        if self.model:
            return self.model
        models = self.models()
        if not models:
            raise MeasurementError("no_model", f"no model configured and {self.base_url}/v1/models lists none; "
                                   f"set --llm-latency-model")
        self.model = str(models[0].get("id"))
        return self.model

    def check_model(self) -> str | None:
        """Is the configured model one the server lists?  llama.cpp serves any name it is sent,
        so a typo would be measured silently.  A name not listed is a warning note (returned),
        or an error (``MeasurementError``) where the server lists exactly one model, which is
        then certainly not the one meant.  None when the name is listed, none is configured
        or the server lists no models."""
        if not self.model:
            return None
        models = self.models()
        served = []
        for m in models:  # vLLM: id (the served names); llama.cpp: id and aliases
            aliases = m.get("aliases")
            aliases = aliases if isinstance(aliases, list) else []
            served += [str(n) for n in [m.get("id"), *aliases] if n is not None]
        if not served or self.model in served or f"{self.model}:latest" in served:  # Ollama's implicit tag
            return None
        ids = [str(m.get("id")) for m in models]
        if len(ids) == 1:
            raise MeasurementError("unknown_model", self.redact(
                f"model {self.model!r} is not served at {self.base_url}; served models: {ids[0]} (the only one "
                f"/v1/models lists) -- set --llm-latency-model {ids[0]}, or leave it unset to use the server's"))
        return self.redact(f"model {self.model!r} is not among the {len(ids)} models {self.base_url}/v1/models "
                           f"lists; served models: {', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''} -- the "
                           f"server may be answering with another model under that name")

    def _listed(self) -> list[dict]:
        """``models()``, or [] where listing failed: for messages about another failure."""
        try:
            return self.models()
        except MeasurementError:
            return []

    def max_model_len(self) -> int | None:
        for m in self._listed():
            meta = m.get("meta")
            meta = meta if isinstance(meta, dict) else {}
            length = m.get("max_model_len") or meta.get("n_ctx")  # vLLM | llama.cpp
            if m.get("id") == self.model and length:
                return int(length)
        return None

    # ------------------------------------------------------------------ request
    def request_body(self, system: str, user: str, max_tokens: int, *, stream: bool = True,
                     extra: dict | None = None) -> dict:
        body: dict = {"model": self.resolve_model(), "stream": stream, "temperature": 0.0,
                      "max_tokens": max_tokens, "ignore_eos": True, "min_tokens": max_tokens}
        if stream:
            body["stream_options"] = {"include_usage": True}
            if self.continuous_usage:
                body["stream_options"]["continuous_usage_stats"] = True
        if self.api == "completions":
            body["prompt"] = system + user
        else:
            msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
            body["messages"] = msgs
            body["max_completion_tokens"] = max_tokens
        if extra:
            body.update(extra)
        return body

    def _describe_status(self, prompt_tokens: int | None,
                         max_tokens: int) -> Callable[[int, str], MeasurementError | None]:
        def describe(code: int, msg: str) -> MeasurementError | None:
            low = msg.lower()
            if code == 400 and any(h in low for h in CONTEXT_LENGTH_HINTS):
                mml = self.max_model_len()
                need = (prompt_tokens or 0) + max_tokens
                return MeasurementError("context_length", self.redact(
                    f"prompt too long for max_model_len: {prompt_tokens} prompt + {max_tokens} output = {need} "
                    f"tokens > max_model_len {mml if mml else '(unknown)'} — shorten prompt_tokens/output_tokens "
                    f"or raise the server's --max-model-len. Server said: {msg}"))
            if code == 404 and "model" in low:
                served = [str(m.get("id")) for m in self._listed()]
                return MeasurementError("unknown_model", self.redact(
                    f"HTTP 404: model {self.model!r} is not served at {self.base_url}; served models: "
                    f"{', '.join(served) or '(none listed)'} — set --llm-latency-model. Server said: {msg}"))
            if code in (404, 405):  # no such route: the server does not speak this API
                others = ", ".join(a for a in APIS if a != self.api_name)
                return MeasurementError(f"http_{code}", self.redact(
                    f"HTTP {code} from {self.base_url}{self.PATHS[self.api]}: this server does not serve the "
                    f"{self.api_name} API -- set api (--llm-latency-api, LLM_LATENCY_API, the SLO file's target) "
                    f"to one it serves ({others}). Server said: {msg[:200]}"))
            return None
        return describe

    def stream(self, system: str, user: str, max_tokens: int, *, expected_prompt_tokens: int | None = None,
               extra: dict | None = None) -> RequestRecord:
        url = self.base_url + self.PATHS[self.api]
        return self._stream(url, system, user, max_tokens, expected_prompt_tokens, extra)

    def stream_messages(self, messages: list[dict], max_tokens: int, *, tools: list[dict] | None = None,
                        expected_prompt_tokens: int | None = None, extra: dict | None = None) -> RequestRecord:
        """One chat turn of an agent session: ``messages`` as given (tool calls and tool results
        included) and the real ``tools`` array; the record keeps the content text and the
        ``delta.tool_calls`` fragments with their arrival times (``core.measure.tool_calls``)."""
        if self.api != "chat":
            raise MeasurementError("config", "agent sessions send messages and tools: use --llm-latency-api "
                                             "openai-chat")
        body_extra = {"messages": messages, **({"tools": tools} if tools else {}), **(extra or {})}
        return self._stream(self.base_url + "/v1/chat/completions", "", "", max_tokens, expected_prompt_tokens,
                            body_extra, keep_output=True)

    def _stream(self, url: str, system: str, user: str, max_tokens: int, expected_prompt_tokens: int | None,
                extra: dict | None, keep_output: bool = False) -> RequestRecord:
        try:
            return self._post_once(url, system, user, max_tokens, expected_prompt_tokens, extra, keep_output)
        except MeasurementError as exc:
            # continuous_usage_stats is a vLLM/SGLang extension: a strict server rejects it once,
            # then it is left out for the rest of the run
            if self.continuous_usage and exc.kind == "http_400" and "continuous_usage" in exc.message:
                self.continuous_usage = False
                return self._post_once(url, system, user, max_tokens, expected_prompt_tokens, extra, keep_output)
            raise

    def _post_once(self, url: str, system: str, user: str, max_tokens: int, expected_prompt_tokens: int | None,
                   extra: dict | None, keep_output: bool) -> RequestRecord:
        body = self.request_body(system, user, max_tokens, extra=extra)
        builder = self._post.run(
            url, body,
            lambda: RecordBuilder(self.clock, expected_prompt_tokens=expected_prompt_tokens,
                                  expected_output_tokens=max_tokens, keep_output=keep_output),
            SSE_TYPES, self._describe_status(expected_prompt_tokens, max_tokens), self._consumer)
        return builder.record

    def _consumer(self, b: RecordBuilder) -> "SSEConsumer":
        return SSEConsumer(self, b)

    def _event(self, b: RecordBuilder, t: int, data: str, sse_error: str | None, state: dict) -> None:
        if sse_error is not None:
            raise MeasurementError("stream_error", self.redact(f"error event inside a 200 stream: {sse_error}"))
        if state["done"]:
            return
        if data[:1] != "{" and data.strip() == "[DONE]":  # no copy of every JSON event
            state["done"] = True
            return
        obj = event_json(data, self.redact)
        if "error" in obj or obj.get("object") == "error":
            err = obj.get("error", obj)
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise MeasurementError("stream_error", self.redact(f"error event inside a 200 stream: {msg}"))
        choices = obj.get("choices") or []
        if not isinstance(choices, list):
            raise ProtocolError(f"'choices' is not a list in SSE event: {data[:120]!r}")
        usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
        if usage is not None:
            details = usage.get("prompt_tokens_details")
            cached = _count(details.get("cached_tokens"), "prompt_tokens_details.cached_tokens", data) \
                if isinstance(details, dict) else None
            out_details = usage.get("completion_tokens_details")
            reasoning_n = _count(out_details.get("reasoning_tokens"), "completion_tokens_details.reasoning_tokens",
                                 data) if isinstance(out_details, dict) else None
            usage = {k: _count(usage.get(k), k, data) for k in ("prompt_tokens", "completion_tokens")}
            if cached is not None and (not choices or ch_finish(choices)):
                b.record.server_timings["cached_tokens"] = cached
            if reasoning_n is not None and (not choices or ch_finish(choices)):  # core.measure.reasoning
                b.record.server_timings["reasoning_tokens"] = reasoning_n
        timings = obj.get("timings")
        if isinstance(timings, dict):
            b.record.server_timings.update(llamacpp_timings(timings))
        finish = running = None
        if choices:
            ch = choices[0] if isinstance(choices[0], dict) else {}
            finish = ch.get("finish_reason")
            delta = ch.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            content = ch.get("text") if self.api == "completions" else delta.get("content")
            reasoning = delta.get("reasoning") or delta.get("reasoning_content")
            tools = delta.get("tool_calls")
            if usage and usage["completion_tokens"] is not None and usage["completion_tokens"] > state["running"]:
                running = usage["completion_tokens"]
            if _nonempty(content) or _nonempty(reasoning) or _nonempty(tools):
                is_reasoning = not _nonempty(content) and not _nonempty(tools)
                text = content if isinstance(content, str) and content else \
                    reasoning if isinstance(reasoning, str) and reasoning else None
                b.token_chunk(t, text_len=len(content) if isinstance(content, str) else 0, reasoning=is_reasoning,
                              running_completion_tokens=running, text=text)
                if _nonempty(tools):
                    b.record.tool_deltas.append((t, tools))
                if b.record.content_parts is not None and isinstance(content, str):
                    b.record.content_parts.append(content)
                if running is not None:
                    state["running"] = running
            if finish is not None:
                state["finish"] = finish
        if usage and (not choices or finish is not None):
            b.usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))


class SSEConsumer:
    """One streamed answer's body, pushed a read at a time (``client.transport.http.BodyConsumer``): the SSE
    events of each read go to ``OpenAIClient._event`` with the read's stamp; ``close`` dispatches a
    pending event and checks the stream ended with ``data: [DONE]``."""

    def __init__(self, client: OpenAIClient, builder: RecordBuilder):
        self.client, self.builder = client, builder
        self.dec = SSEDecoder()
        self.state: dict[str, Any] = {"done": False, "finish": None, "running": 0}
        self.t_last = builder.record.t_send_ns
        self.n_bytes = 0

    def feed(self, t: int, chunk: bytes) -> None:
        self.t_last, self.n_bytes = t, self.n_bytes + len(chunk)
        b, event, state = self.builder, self.client._event, self.state
        for ev in self.dec.feed(chunk):
            b.event()
            event(b, t, ev.data, ev.error, state)

    def close(self) -> None:
        b, state, redact = self.builder, self.state, self.client.redact
        for ev in self.dec.close():
            b.event()
            self.client._event(b, self.t_last, ev.data, ev.error, state)
        if not state["done"] and not b.record.chunks:  # a close-delimited body (HTTP/1.0) cut early
            after = (b.clock() - b.record.t_send_ns) / 1e9  # the close, not the last read
            raise MeasurementError("no_done", redact(
                f"stream ended without 'data: [DONE]' and without a token ({self.n_bytes} body bytes, {after:.1f} s "
                f"after the request): the server or a proxy closed it before the first token — "
                f"{PROXY_TIMEOUT_HINT}"))
        if not state["done"]:
            raise MeasurementError("no_done", redact(
                f"stream ended without 'data: [DONE]' after {len(b.record.chunks)} token chunks: "
                f"the server closed the stream early (crash, timeout or proxy cut)"))
        b.finish(self.t_last, state["finish"])
