"""Anthropic's Messages API: ``POST /v1/messages`` (SSE with ``event:`` lines, no ``[DONE]``) and
``POST /v1/messages/count_tokens``.

A request is converted to a chat-completions body (``to_chat``) and parsed by ``openai_api.parse``,
so a prompt counts the same on every API.  ``message_start`` goes out with the first token (its
usage needs the prefix-cache hit, known at admission), followed by a ``ping``.  Errors are
Anthropic-shaped.  Fields and events: docs/servers.md#what-its-apis-honour.
"""
from __future__ import annotations

import dataclasses
import json
import uuid

from .answer import Answer
from .openai_api import ApiError, OpenAIRequest, parse as parse_chat
from .scheduler import RequestState
from .streaming import Result, named_event

_PASSED = ("model", "max_tokens", "stream", "ignore_eos", "min_tokens", "seed", "stream_interval")
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                503: "overloaded_error", 529: "overloaded_error"}


def error_body(status: int, message: str) -> bytes:
    """Anthropic's error shape: ``{"type": "error", "error": {"type", "message"}}``."""
    kind = _ERROR_TYPES.get(status, "api_error")
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def _message(m: object) -> list[dict]:
    """One Messages message as chat messages: text blocks stay content parts, ``tool_use`` blocks
    become ``tool_calls`` (``input`` as JSON text), each ``tool_result`` a ``tool`` message first."""
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        raise ApiError(400, "each message needs a role and content")
    content = m.get("content")
    if isinstance(content, str):
        return [{"role": m["role"], "content": content}]
    if not isinstance(content, list):
        raise ApiError(400, "message content must be a string or a list of content blocks")
    texts, calls, results = [], [], []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(block)
        elif kind == "tool_use":
            calls.append({"id": block.get("id"), "type": "function", "function": {
                "name": block.get("name", ""), "arguments": json.dumps(block.get("input", {}))}})
        elif kind == "tool_result":
            results.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                            "content": block.get("content", "")})
    out = list(results)
    if texts or calls or not results:
        msg: dict = {"role": m["role"], "content": texts}
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out


def to_chat(body: dict) -> dict:
    """The chat-completions body a Messages request means (``max_tokens`` is checked by ``parse``)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: Field required (a non-empty list)")
    chat: dict = {k: body[k] for k in _PASSED if k in body}
    system = body.get("system")
    if system is not None and not isinstance(system, (str, list)):
        raise ApiError(400, "system must be a string or a list of text blocks")
    chat["messages"] = ([{"role": "system", "content": system}] if system is not None else []) + \
        [c for m in messages for c in _message(m)]
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                                  for t in tools):
            raise ApiError(400, "tools must be a list of {name, description, input_schema}")
        chat["tools"] = [{"type": "function", "function": {
            **{k: t[k] for k in ("name", "description") if k in t},
            **({"parameters": t["input_schema"]} if "input_schema" in t else {})}} for t in tools]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}} if kind == "tool" \
            else {"any": "required", "none": "none"}.get(str(kind), "auto")
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        chat["reasoning_effort"] = "medium"
    elif thinking is not None and not (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
        raise ApiError(400, "thinking must be {type: enabled, budget_tokens} or {type: disabled}")
    fmt = body.get("output_format")
    if fmt is not None:
        if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise ApiError(400, "output_format must be {type: json_schema, schema}")
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}
    return chat


def parse(body: dict, opts: dict) -> OpenAIRequest:
    """``max_tokens`` is required (Anthropic's rule); the reasoning is capped by ``budget_tokens``."""
    if "max_tokens" not in body:
        raise ApiError(400, "max_tokens: Field required")
    r = parse_chat(to_chat(body), chat=True, **opts)
    budget = (body.get("thinking") or {}).get("budget_tokens")
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ApiError(400, f"thinking.budget_tokens must be an integer >= 1, got {budget!r}")
        r = dataclasses.replace(r, reasoning_tokens=min(r.reasoning_tokens, budget))
    return r


class MessagesProtocol:
    """Formats one message's events (``StreamProtocol``) and its non-streamed object."""

    content_type = "text/event-stream; charset=utf-8"

    def __init__(self, req: OpenAIRequest, answer: Answer, model: str, state: RequestState):
        self.req, self.answer, self.model, self.state = req, answer, model, state
        h = uuid.uuid4().hex
        self.id, self.tool_id = "msg_" + h, "toolu_" + h[:24]
        self._sent = 0
        self._block: str | None = None    # the content block being streamed: "thinking" | "answer"
        self._index = 0                   # its index

    def usage(self, output: int) -> dict:
        cached = self.state.cached_tokens
        return {"input_tokens": len(self.req.prompt_ids) - cached, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached, "output_tokens": output}

    def _stop_reason(self, result: Result) -> str:
        if result.finish_reason == "length":
            return "max_tokens"
        return "tool_use" if self.answer.kind == "tool" else "end_turn"

    def _message(self, content: list, stop_reason: str | None, usage: dict) -> dict:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": stop_reason, "stop_sequence": None, "usage": usage}

    def _answer_block(self, text: str) -> dict:
        if self.answer.kind == "tool":
            return {"type": "tool_use", "id": self.tool_id, "name": self.answer.tool,
                    "input": json.loads(text) if text else {}}
        return {"type": "text", "text": text}

    def _ev(self, kind: str, **fields) -> bytes:
        return named_event(kind, {"type": kind, **fields})

    def _start(self, which: str) -> bytes:
        self._block = which
        block = {"type": "thinking", "thinking": ""} if which == "thinking" else self._answer_block("")
        return self._ev("content_block_start", index=self._index, content_block=block)

    def _stop(self) -> list[bytes]:
        if self._block is None:
            return []
        out = [self._ev("content_block_delta", index=self._index,
                        delta={"type": "signature_delta", "signature": ""})] if self._block == "thinking" else []
        out.append(self._ev("content_block_stop", index=self._index))
        self._block, self._index = None, self._index + 1
        return out

    # -- StreamProtocol ---------------------------------------------------------------------
    def opening(self) -> list[bytes]:
        return []

    def token(self, text: str, total: int, finish_reason: str | None) -> bytes:
        prev, self._sent = self._sent, total
        out: list[bytes] = []
        if prev == 0:
            out += [self._ev("message_start", message=self._message([], None, self.usage(0))), self._ev("ping")]
        reasoning, answer = self.answer.split(text, prev, total)
        if reasoning:
            if self._block is None:
                out.append(self._start("thinking"))
            out.append(self._ev("content_block_delta", index=self._index,
                                delta={"type": "thinking_delta", "thinking": reasoning}))
        if total > self.answer.reasoning:
            if prev <= self.answer.reasoning:
                out += self._stop() + [self._start("answer")]
            if answer:
                delta = {"type": "input_json_delta", "partial_json": answer} if self.answer.kind == "tool" \
                    else {"type": "text_delta", "text": answer}
                out.append(self._ev("content_block_delta", index=self._index, delta=delta))
        return b"".join(out)

    def closing(self, result: Result, done: bool) -> list[bytes]:
        out = self._stop()
        out.append(self._ev("message_delta", delta={"stop_reason": self._stop_reason(result), "stop_sequence": None},
                            usage={"output_tokens": result.completion_tokens}))
        if done:  # the no_done fault: the stream ends without message_stop
            out.append(self._ev("message_stop"))
        return out

    def error_event(self, message: str) -> list[bytes]:
        return [self._ev("error", error={"type": "api_error", "message": message})]

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"text":" trunc\n\n'

    def huge(self, size: int) -> bytes:
        return self._ev("ping", pad="x" * max(0, size - 100))

    def full_body(self, result: Result) -> bytes:
        reasoning, answer = self.answer.split(result.text, 0, result.completion_tokens)
        content = [{"type": "thinking", "thinking": reasoning, "signature": ""}] if reasoning else []
        if result.completion_tokens > self.answer.reasoning:
            content.append(self._answer_block(answer))
        return json.dumps(self._message(content, self._stop_reason(result),
                                        self.usage(result.completion_tokens)), ensure_ascii=False).encode()
