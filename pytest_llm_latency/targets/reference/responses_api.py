"""OpenAI's Responses API: ``POST /v1/responses`` (SSE with ``event:`` lines, no ``[DONE]``) and
``POST /v1/responses/input_tokens``.

A request is converted to a chat-completions body (``to_chat``) and parsed by ``openai_api.parse``,
as llama.cpp does, so a prompt counts the same on every API and every chat field means the same.
The events follow OpenAI's shapes (``sequence_number``, ``output_index``, ``content_index``; a
length-cut response ends with ``response.incomplete``).  Fields and events:
docs/servers.md#what-its-apis-honour.
"""
from __future__ import annotations

import json
import time
import uuid

from .answer import Answer
from .openai_api import ApiError, OpenAIRequest, parse as parse_chat
from .streaming import Result, named_event

_PASSED = ("model", "ignore_eos", "min_tokens", "seed", "stream", "stream_interval", "response_format",
           "chat_template_kwargs", "tool_choice")


def _messages(body: dict) -> list[dict]:
    """``instructions`` + ``input`` as chat messages: message items, ``function_call`` items (tool
    calls of the assistant message before them, or of a new one), ``function_call_output`` items
    (tool messages); ``reasoning`` items are dropped."""
    msgs: list[dict] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise ApiError(400, "instructions must be a string")
        msgs.append({"role": "system", "content": instructions})
    items = body.get("input")
    if items is None:
        raise ApiError(400, "'input' is required")
    if isinstance(items, str):
        return msgs + [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise ApiError(400, "input must be a string or a non-empty list of items")
    for item in items:
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            if not isinstance(item.get("role"), str) or not isinstance(item.get("content"), (str, list)):
                raise ApiError(400, "a message item needs role and content (a string or a list of parts)")
            msgs.append({"role": item["role"], "content": item["content"]})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name", ""), "arguments": item.get("arguments", "")}}
            if msgs and msgs[-1]["role"] == "assistant":
                msgs[-1].setdefault("tool_calls", []).append(call)
            else:
                msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            msgs.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output", "")})
        elif kind != "reasoning":
            raise ApiError(400, f"unsupported input item: {kind!r}")
    return msgs


def _format(text: object) -> dict | None:
    """``text.format`` as a chat ``response_format``."""
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise ApiError(400, "text.format must be {type: text | json_object | json_schema, name, schema}")
    return {"type": "json_schema", "json_schema": {"name": fmt.get("name", "output"), "schema": fmt["schema"]}}


def to_chat(body: dict) -> dict:
    """The chat-completions body a Responses request means."""
    if body.get("previous_response_id") is not None:
        raise ApiError(400, "previous_response_id is not supported: send the whole conversation as input")
    chat: dict = {k: body[k] for k in _PASSED if k in body}
    chat["messages"] = _messages(body)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise ApiError(400, "tools must be a list of {type: function, name, parameters}")
        fns = [t for t in tools if t.get("type", "function") == "function"]
        if not all(isinstance(t.get("name"), str) for t in fns):
            raise ApiError(400, "a function tool needs a name")
        chat["tools"] = [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")
                                                            if k in t}} for t in fns]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("name"), str):
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    if "max_output_tokens" in body:
        chat["max_tokens"] = body["max_output_tokens"]
    reasoning = body.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, dict):
            raise ApiError(400, "reasoning must be an object {effort}")
        chat["reasoning_effort"] = reasoning.get("effort") or "medium"
    if "response_format" not in chat and (fmt := _format(body.get("text"))) is not None:
        chat["response_format"] = fmt
    return chat


def parse(body: dict, opts: dict) -> OpenAIRequest:
    value = body.get("max_output_tokens")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ApiError(400, f"max_output_tokens must be an integer >= 1, got {value!r}")
    return parse_chat(to_chat(body), chat=True, **opts)


class ResponsesProtocol:
    """Formats one response's events (``StreamProtocol``) and its non-streamed object."""

    content_type = "text/event-stream; charset=utf-8"

    def __init__(self, req: OpenAIRequest, answer: Answer, model: str):
        self.req, self.answer, self.model = req, answer, model
        self.created = int(time.time())
        h = uuid.uuid4().hex
        self.id, self.msg_id, self.rs_id, self.fc_id, self.call_id = (p + h for p in ("resp_", "msg_", "rs_", "fc_",
                                                                                      "call_"))
        self._seq = self._sent = 0
        self._open: str | None = None        # the output item being streamed: "reasoning" | "answer"
        self._reasoning: list[str] = []
        self._answer: list[str] = []
        self._items: list[dict] = []          # the finished output items

    # -- pieces ------------------------------------------------------------------------------
    def _sse(self, kind: str, **fields) -> bytes:
        self._seq += 1
        return named_event(kind, {"type": kind, **fields, "sequence_number": self._seq - 1})

    def usage(self, completion: int, cached: int) -> dict:
        p = len(self.req.prompt_ids)
        return {"input_tokens": p, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": self.answer.reasoning_count(completion)},
                "total_tokens": p + completion}

    def _response(self, status: str, usage: dict | None = None, **extra) -> dict:
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": list(self._items), "usage": usage, "error": None,
                "incomplete_details": None, **extra}

    def _reasoning_item(self, status: str, text: str | None) -> dict:
        return {"id": self.rs_id, "type": "reasoning", "status": status, "summary": [],
                "content": [] if text is None else [{"type": "reasoning_text", "text": text}]}

    def _answer_item(self, status: str, text: str | None) -> dict:
        if self.answer.kind == "tool":
            return {"id": self.fc_id, "type": "function_call", "status": status, "call_id": self.call_id,
                    "name": self.answer.tool, "arguments": text or ""}
        part = [] if text is None else [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
        return {"id": self.msg_id, "type": "message", "status": status, "role": "assistant", "content": part}

    @property
    def _index(self) -> int:          # the output_index of the item being opened or streamed
        return len(self._items)

    def _start(self, which: str) -> list[bytes]:
        self._open = which
        if which == "reasoning":
            return [self._sse("response.output_item.added", output_index=self._index,
                              item=self._reasoning_item("in_progress", None))]
        out = [self._sse("response.output_item.added", output_index=self._index,
                         item=self._answer_item("in_progress", None))]
        if self.answer.kind != "tool":
            out.append(self._sse("response.content_part.added", item_id=self.msg_id, output_index=self._index,
                                 content_index=0, part={"type": "output_text", "text": "", "annotations": []}))
        return out

    def _close(self, status: str) -> list[bytes]:
        """The done events of the item being streamed."""
        which, self._open, i = self._open, None, self._index
        if which == "reasoning":
            text = "".join(self._reasoning)
            item = self._reasoning_item(status, text)
            out = [self._sse("response.reasoning_text.done", item_id=self.rs_id, output_index=i, content_index=0,
                             text=text)]
        elif which == "answer":
            text = "".join(self._answer)
            item = self._answer_item(status, text)
            if self.answer.kind == "tool":
                out = [self._sse("response.function_call_arguments.done", item_id=self.fc_id, output_index=i,
                                 arguments=text)]
            else:
                part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                out = [self._sse("response.output_text.done", item_id=self.msg_id, output_index=i,
                                 content_index=0, text=text, logprobs=[]),
                       self._sse("response.content_part.done", item_id=self.msg_id, output_index=i,
                                 content_index=0, part=part)]
        else:
            return []
        self._items.append(item)
        return out + [self._sse("response.output_item.done", output_index=i, item=item)]

    # -- StreamProtocol ---------------------------------------------------------------------
    def opening(self) -> list[bytes]:
        return [self._sse("response.created", response=self._response("in_progress")),
                self._sse("response.in_progress", response=self._response("in_progress"))]

    def token(self, text: str, total: int, finish_reason: str | None) -> bytes:
        prev, self._sent = self._sent, total
        reasoning, answer = self.answer.split(text, prev, total)
        out: list[bytes] = []
        if reasoning:
            if self._open is None:
                out += self._start("reasoning")
            self._reasoning.append(reasoning)
            out.append(self._sse("response.reasoning_text.delta", item_id=self.rs_id, output_index=self._index,
                                 content_index=0, delta=reasoning))
        if total > self.answer.reasoning:
            if prev <= self.answer.reasoning:
                out += self._close("completed") + self._start("answer")
            if answer:
                self._answer.append(answer)
                if self.answer.kind == "tool":
                    out.append(self._sse("response.function_call_arguments.delta", item_id=self.fc_id,
                                         output_index=self._index, delta=answer))
                else:
                    out.append(self._sse("response.output_text.delta", item_id=self.msg_id,
                                         output_index=self._index, content_index=0, delta=answer, logprobs=[]))
        return b"".join(out)

    def _final(self, result: Result) -> tuple[str, dict]:
        """(event type, response object) of a finished response: incomplete when the length cut it."""
        usage = self.usage(result.completion_tokens, result.state.cached_tokens)
        if result.finish_reason == "length":
            return "response.incomplete", self._response("incomplete", usage,
                                                         incomplete_details={"reason": "max_output_tokens"})
        return "response.completed", self._response("completed", usage)

    def closing(self, result: Result, done: bool) -> list[bytes]:
        out = self._close("incomplete" if result.finish_reason == "length" else "completed")
        if done:  # the no_done fault: the stream ends without its terminal event
            kind, response = self._final(result)
            out.append(self._sse(kind, response=response))
        return out

    def error_event(self, message: str) -> list[bytes]:
        error = {"code": "server_error", "message": message}
        return [self._sse("error", code="server_error", message=message, param=None),
                self._sse("response.failed", response=self._response("failed", error=error))]

    def malformed(self) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":" trunc\n\n'

    def huge(self, size: int) -> bytes:
        return self._sse("response.in_progress", response=self._response("in_progress"),
                         pad="x" * max(0, size - 300))

    def full_body(self, result: Result) -> bytes:
        reasoning, answer = self.answer.split(result.text, 0, result.completion_tokens)
        status = "incomplete" if result.finish_reason == "length" else "completed"
        if reasoning:
            self._items.append(self._reasoning_item(status if result.completion_tokens <= self.answer.reasoning
                                                    else "completed", reasoning))
        if result.completion_tokens > self.answer.reasoning:
            self._items.append(self._answer_item(status, answer))
        return json.dumps(self._final(result)[1], ensure_ascii=False).encode()
