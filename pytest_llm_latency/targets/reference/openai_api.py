"""``/v1/completions`` and ``/v1/chat/completions`` in vLLM's shapes, streamed (SSE) or not, tool calls
included.  The request fields honoured and the stream's shape: docs/servers.md#what-its-apis-honour.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from . import tokenizer
from .answer import Answer, reasoning_budget
from .faults import context_length_message, openai_error
from .streaming import Result


class ApiError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.message, self.err_type = status, message, err_type

    def body(self) -> bytes:
        return openai_error(self.message, self.err_type, self.status)


@dataclass
class OpenAIRequest:
    chat: bool
    prompt_ids: list[int]
    max_tokens: int
    ignore_eos: bool
    min_tokens: int
    seed: int | None
    stream: bool
    include_usage: bool
    continuous_usage: bool
    stream_interval: int | None
    tool_names: tuple[str, ...] = ()   # tool-calling output mode: the functions offered (``tools``)
    reasoning_tokens: int = 0          # reasoning asked for: the first N generated tokens (answer.py)
    schema: dict | None = None         # structured output: the answer is JSON valid against it


def _int(body: dict, key: str, default: int | None, minimum: int) -> int | None:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ApiError(400, f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def check_model(body: dict, served: str) -> None:
    name = body.get("model")
    if name is not None and name != served:
        raise ApiError(404, f"The model `{name}` does not exist.", "NotFoundError")


def tools_of(body: dict) -> list:
    """The request's ``tools`` array (OpenAI function tools), [] when absent or ``tool_choice: none``."""
    tools = body.get("tools")
    if tools is None or body.get("tool_choice") == "none":
        return []
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("function"), dict)
                                              and isinstance(t["function"].get("name"), str) for t in tools):
        raise ApiError(400, "tools must be a list of {type: function, function: {name, parameters}}")
    return tools


def prompt_ids_of(body: dict, chat: bool, encode=tokenizer.encode, *, rewrite_tool_history: bool = False) -> list[int]:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list")
        try:
            return encode(tokenizer.render_chat(messages, tools_of(body) if body.get("tools") else None,
                                                rewrite_tool_history=rewrite_tool_history))
        except TypeError as e:
            raise ApiError(400, str(e)) from None
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        ids = encode(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                     for t in prompt):
        ids = list(prompt)
    else:
        raise ApiError(400, "prompt must be a string, a list of one string, or a list of token ids")
    if not ids:
        raise ApiError(400, "The prompt is empty: the reference tokenizer found no words.")
    return ids


def schema_of(body: dict) -> dict | None:
    """The JSON schema of ``response_format`` (``json_schema``; ``json_object``: any object), else None."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    spec = fmt.get("json_schema") if kind == "json_schema" else None
    if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
        raise ApiError(400, "response_format must be {type: text | json_object | json_schema, "
                            "json_schema: {name, schema}}")
    return spec.get("schema", {})


def reasoning_of(body: dict, thinking_tokens: int) -> int:
    """Reasoning tokens a chat request asks for: ``reasoning_effort`` (answer.EFFORTS), or
    ``chat_template_kwargs.enable_thinking: true`` (medium); 0 when it asks for none."""
    effort = body.get("reasoning_effort")
    kwargs = body.get("chat_template_kwargs")
    if effort is None:
        if not (isinstance(kwargs, dict) and kwargs.get("enable_thinking") is True):
            return 0
        effort = "medium"
    try:
        return reasoning_budget(thinking_tokens, effort)
    except ValueError as e:
        raise ApiError(400, str(e)) from None


def parse(body: dict, *, chat: bool, served: str, max_model_len: int, encode=tokenizer.encode,
          rewrite_tool_history: bool = False, thinking_tokens: int = 0) -> OpenAIRequest:
    check_model(body, served)
    ids = prompt_ids_of(body, chat, encode, rewrite_tool_history=rewrite_tool_history)
    tools = tools_of(body) if chat else []
    choice = body.get("tool_choice")
    named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    names = tuple([named] if named else [t["function"]["name"] for t in tools])
    max_tokens = _int(body, "max_tokens", None, 1)
    if chat:
        max_tokens = _int(body, "max_completion_tokens", max_tokens, 1)
    if max_tokens is None:
        max_tokens = max(1, max_model_len - len(ids)) if chat else 16
    if len(ids) + max_tokens > max_model_len:
        raise ApiError(400, context_length_message(max_model_len, len(ids), max_tokens))
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise ApiError(400, "stream_options must be an object")
    seed = body.get("seed")
    return OpenAIRequest(
        chat=chat, prompt_ids=ids, max_tokens=max_tokens, ignore_eos=bool(body.get("ignore_eos")),
        min_tokens=min(_int(body, "min_tokens", 0, 0) or 0, max_tokens), seed=seed if isinstance(seed, int) else None,
        stream=bool(body.get("stream")), include_usage=bool(opts.get("include_usage")),
        continuous_usage=bool(opts.get("continuous_usage_stats")),
        stream_interval=_int(body, "stream_interval", None, 1), tool_names=names,
        reasoning_tokens=reasoning_of(body, thinking_tokens) if chat else 0, schema=schema_of(body) if chat else None)


class OpenAIProtocol:
    """Formats one response's SSE events and non-streamed body."""

    content_type = "text/event-stream; charset=utf-8"

    def __init__(self, req: OpenAIRequest, model: str, *, cached_details: bool, answer: Answer | None = None):
        self.req, self.model, self.cached_details = req, model, cached_details
        self.answer = answer or Answer(1)
        self.prompt_tokens = len(req.prompt_ids)
        self.created = int(time.time())
        self.id = ("chatcmpl-" if req.chat else "cmpl-") + uuid.uuid4().hex
        self.object = "chat.completion.chunk" if req.chat else "text_completion"
        head = "data: " + json.dumps({"id": self.id, "object": self.object, "created": self.created,
                                      "model": model})[:-1]
        # Fast path for the common token chunk: a pre-rendered prefix and suffix.
        if req.chat:
            self._pre = (head + ',"choices":[{"index":0,"delta":{"content":').encode()
            self._post = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self._pre = (head + ',"choices":[{"index":0,"text":').encode()
            self._post = b',"logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'

    # -- chat output modes (answer.py): reasoning, then text, a JSON document or a tool call -----
    @property
    def tool_mode(self) -> bool:
        return self.req.chat and self.answer.kind == "tool"

    @property
    def plain(self) -> bool:
        return not self.req.chat or (self.answer.kind == "text" and not self.answer.reasoning)

    def tool_arguments(self) -> str:
        return self.answer.document

    def _delta(self, text: str, prev: int, total: int) -> dict:
        reasoning, answer = self.answer.split(text, prev, total)
        delta: dict = {}
        if reasoning:
            delta["reasoning_content"] = reasoning
        if total > self.answer.reasoning:
            if self.tool_mode:
                entry: dict = {"index": 0, "function": {"arguments": answer}}
                if prev <= self.answer.reasoning:  # the call's first token: its id and name
                    entry = {"index": 0, "id": f"chatcmpl-tool-{self.id[-16:]}", "type": "function",
                             "function": {"name": self.answer.tool, "arguments": answer}}
                delta["tool_calls"] = [entry]
            else:
                delta["content"] = answer
        return delta

    def usage(self, completion: int, cached: int | None = None) -> dict:
        u: dict[str, int | dict[str, int]] = {
            "prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens + completion,
            "completion_tokens": completion}
        if self.cached_details and cached is not None:
            u["prompt_tokens_details"] = {"cached_tokens": cached}
        if self.answer.reasoning:
            u["completion_tokens_details"] = {"reasoning_tokens": self.answer.reasoning_count(completion)}
        return u

    def _event(self, choices: list, usage: dict | None = None, ensure_ascii: bool = True) -> bytes:
        obj = {"id": self.id, "object": self.object, "created": self.created, "model": self.model,
               "choices": choices}
        if usage is not None:
            obj["usage"] = usage
        return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=ensure_ascii).encode() + b"\n\n"

    def _choice(self, text: str, finish_reason: str | None) -> dict:
        if self.req.chat:
            return {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish_reason}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                "stop_reason": None}

    # -- StreamProtocol ---------------------------------------------------------------------
    def opening(self) -> list[bytes]:
        if not self.req.chat:
            return []
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                  "finish_reason": None}
        return [self._event([choice], self.usage(0) if self.req.continuous_usage else None)]

    def token(self, text: str, total: int, finish_reason: str | None) -> bytes:
        usage = self.usage(total) if self.req.continuous_usage else None
        if not self.plain:
            prev, self._sent = getattr(self, "_sent", 0), total
            reason = "tool_calls" if finish_reason == "stop" and self.tool_mode else finish_reason
            choice = {"index": 0, "delta": self._delta(text, prev, total), "logprobs": None, "finish_reason": reason}
            return self._event([choice], usage, ensure_ascii=False)
        if usage is None and finish_reason is None:
            return self._pre + json.dumps(text).encode() + self._post
        return self._event([self._choice(text, finish_reason)], usage)

    def closing(self, result: Result, done: bool) -> list[bytes]:
        out = []
        if self.req.include_usage:
            out.append(self._event([], self.usage(result.completion_tokens, result.state.cached_tokens)))
        if done:
            out.append(b"data: [DONE]\n\n")
        return out

    def error_event(self, message: str) -> list[bytes]:
        err = {"error": {"message": message, "type": "InternalServerError", "param": None, "code": 500}}
        return [b"data: " + json.dumps(err).encode() + b"\n\n", b"data: [DONE]\n\n"]

    def malformed(self) -> bytes:
        return self._pre + b'" trunc\n\n'      # an unterminated JSON string: not JSON

    def huge(self, size: int) -> bytes:
        pad = max(0, size - 200)
        return self._event([self._choice("", None)] , None)[:-3] + b',"pad":"' + b"x" * pad + b'"}\n\n'

    def full_body(self, result: Result) -> bytes:
        if self.req.chat:
            reasoning, answer = self.answer.split(result.text, 0, result.completion_tokens)
            calls = [{"id": f"chatcmpl-tool-{self.id[-16:]}", "type": "function", "function": {
                "name": self.answer.tool, "arguments": answer}}] if self.tool_mode else []
            message: dict = {"role": "assistant", "content": None if calls else answer, "tool_calls": calls}
            if self.answer.reasoning:
                message["reasoning_content"] = reasoning
            choice = {"index": 0, "message": message,
                      "logprobs": None, "finish_reason": result.finish_reason, "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": result.text, "logprobs": None,
                      "finish_reason": result.finish_reason, "stop_reason": None, "prompt_logprobs": None}
            obj = "text_completion"
        return json.dumps({"id": self.id, "object": obj, "created": self.created, "model": self.model,
                           "choices": [choice],
                           "usage": self.usage(result.completion_tokens, result.state.cached_tokens)}).encode()
