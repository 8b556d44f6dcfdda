"""Anthropic Messages streaming client (``--llm-latency-api anthropic-messages``: ``POST /v1/messages``
with ``x-api-key`` and ``anthropic-version``; vLLM, llama.cpp's ``llama-server``).  Discovery and
status errors are chat's (``OpenAIClient``); the stream is read by ``named_events``.  The protocol
facts it relies on (docs/servers.md#openai-responses-and-anthropic-messages):

* TTFT is the first ``content_block_delta`` with text, thinking (reasoning: TTFO waits for the
  answer) or a tool call's start/``input_json_delta``; ``message_start`` is no token.
* input usage on ``message_start``: the prompt is ``input_tokens`` + ``cache_read_input_tokens`` +
  ``cache_creation_input_tokens`` (Anthropic's ``input_tokens`` leaves the cached part out); output
  usage on ``message_delta``.  No server timings (llama.cpp sends none on this API).
* the API has no ignore-EOS field (llama.cpp drops it with ``seed`` and every schema field): output
  lengths are verified, not forced (start llama-server with ``--ignore-eos``).
* ``ping`` is a keep-alive, ``error`` a server fault; the stream ends on ``message_stop``.
"""
from __future__ import annotations

import json
from typing import Any

import httpx

from ...core.measure.record import RecordBuilder, RequestRecord
from .named_events import NamedEventClient, StreamState, as_dict, count, text_token, tool_arguments, tool_start

#: the ``anthropic-version`` header sent (the API version whose event stream this reads)
ANTHROPIC_VERSION = "2023-06-01"
#: ``stop_reason`` → the finish reasons the rest of the plugin reads (chat's)
STOP_REASONS = {"max_tokens": "length", "end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls"}


class XApiKey(httpx.Auth):
    """Adds ``x-api-key`` to each request as it is sent: not a client header, since httpx masks only
    ``Authorization`` in its reprs; this object's repr shows no key either."""

    def __init__(self, key: str):
        self._key = key

    def __repr__(self) -> str:
        return "XApiKey(***)"

    def auth_flow(self, request: httpx.Request):
        request.headers["x-api-key"] = self._key
        yield request


def anthropic_messages(messages: list[dict]) -> tuple[str, list[dict]]:
    """Chat-shaped messages (an agent session's transcript) → (system text, Messages' ``messages``):
    an assistant's ``tool_calls`` become ``tool_use`` blocks, ``tool`` results ``tool_result``
    blocks of one user message (consecutive results share it, as the API wants)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role == "system":
            system.append(content or "")
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id"), "content": content or ""}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list) and \
                    all(b.get("type") == "tool_result" for b in out[-1]["content"]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif role == "assistant" and m.get("tool_calls"):
            blocks: list[dict] = [{"type": "text", "text": content}] if content else []
            for call in m["tool_calls"]:
                fn = call.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                blocks.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": args})
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": role, "content": content or ""})
    return "\n".join(system), out


def anthropic_tools(tools: list[dict]) -> list[dict]:
    """Chat's ``{type: function, function: {name, description, parameters}}`` → Messages'
    ``{name, description, input_schema}``."""
    out = []
    for t in tools:
        fn = t.get("function") or {}
        out.append({"name": fn.get("name"), "description": fn.get("description", ""),
                    "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}})
    return out


class MessagesClient(NamedEventClient):
    DIALECTS = ("messages",)
    CLOSING = "message_stop"
    #: the API's prompt counter (llama.cpp, vLLM, Anthropic): ``{model, messages}`` → ``{input_tokens}``
    COUNT_ENDPOINT = ("/v1/messages/count_tokens",
                      lambda text, model: {"model": model, "messages": [{"role": "user", "content": text}]})

    def __init__(self, http: httpx.Client, *args: Any, **kwargs: Any):
        super().__init__(http, *args, **kwargs)
        # the API's own headers, on this target's client: the key (sent as Authorization: Bearer by
        # make_http_client, which llama.cpp and vLLM read) as x-api-key too, which Anthropic's clients send
        auth = http.headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and http.auth is None:
            http.auth = XApiKey(auth[len("bearer "):])
        http.headers.setdefault("anthropic-version", ANTHROPIC_VERSION)

    @property
    def api_name(self) -> str:
        return "anthropic-messages"

    def request_body(self, system: str, user: str, max_tokens: int, *, stream: bool = True,
                     extra: dict | None = None) -> dict:
        """``max_tokens`` (required by the API) is the asked length; there is no ignore-EOS field."""
        body: dict = {"model": self.resolve_model(), "stream": stream, "temperature": 0.0, "max_tokens": max_tokens,
                      "messages": [{"role": "user", "content": user}]}
        if system:
            body["system"] = system
        if extra:
            body.update(extra)
        if "thinking" in body:  # Anthropic's API refuses a temperature with extended thinking
            body.pop("temperature", None)
        return body

    def stream_messages(self, messages: list[dict], max_tokens: int, *, tools: list[dict] | None = None,
                        expected_prompt_tokens: int | None = None, extra: dict | None = None) -> RequestRecord:
        """One agent turn: the chat-shaped transcript as Messages' system and messages, tools as
        ``input_schema`` tools; results go back as ``tool_result`` blocks."""
        system, msgs = anthropic_messages(messages)
        body_extra = {"messages": msgs, **({"system": system} if system else {}),
                      **({"tools": anthropic_tools(tools)} if tools else {}), **(extra or {})}
        return self._stream(self.base_url + "/v1/messages", "", "", max_tokens, expected_prompt_tokens,
                            body_extra, keep_output=True)

    def _typed(self, b: RecordBuilder, t: int, kind: str, obj: dict, state: StreamState) -> None:
        if kind == "content_block_delta":
            delta = as_dict(obj.get("delta"))
            what = delta.get("type")
            if what == "text_delta":
                text_token(b, t, delta.get("text"))
            elif what == "thinking_delta":
                text_token(b, t, delta.get("thinking"), reasoning=True)
            elif what == "input_json_delta":
                tool_arguments(b, t, state, obj.get("index"), delta.get("partial_json"))
        elif kind == "content_block_start":
            block = as_dict(obj.get("content_block"))
            if block.get("type") == "tool_use":
                tool_start(b, t, state, obj.get("index"), block.get("id"), block.get("name"))
                if block.get("input"):  # a server that sends the input whole, not in deltas
                    tool_arguments(b, t, state, obj.get("index"), json.dumps(block["input"]))
            elif block.get("type") in ("text", "thinking"):
                text_token(b, t, block.get(block["type"]), reasoning=block["type"] == "thinking")
        elif kind == "message_start":
            msg = as_dict(obj.get("message"))
            self._usage(b, msg.get("usage"), obj)
        elif kind == "message_delta":
            delta = as_dict(obj.get("delta"))
            reason = delta.get("stop_reason")
            if isinstance(reason, str):
                state.finish = STOP_REASONS.get(reason, reason)
            self._usage(b, obj.get("usage"), obj)
        elif kind == "message_stop":
            state.done = True

    def _usage(self, b: RecordBuilder, usage: Any, obj: dict) -> None:
        """Input usage (``message_start``; some servers repeat it on ``message_delta``) and output usage."""
        if not isinstance(usage, dict):
            return
        parts = [count(usage.get(k), k, obj) for k in ("input_tokens", "cache_read_input_tokens",
                                                       "cache_creation_input_tokens")]
        if parts[0] is not None:
            b.usage(sum(p or 0 for p in parts), None)
            if parts[1] is not None:
                b.record.server_timings["cached_tokens"] = parts[1]
        out = count(usage.get("output_tokens"), "output_tokens", obj)
        if out:  # message_start's output_tokens is 0 (nothing generated yet): only message_delta's counts
            b.usage(None, out)
