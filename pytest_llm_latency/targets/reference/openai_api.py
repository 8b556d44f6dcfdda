"""``/v1/completions`` and ``/v1/chat/completions`` in vLLM's shapes.

Request fields honoured: ``model`` (optional; another name is a 404), ``prompt`` (string,
list with one string, or a list of token ids), ``messages``, ``max_tokens`` (chat also
``max_completion_tokens``; default 16 for completions, the rest of the context for
chat), ``ignore_eos``, ``min_tokens``, ``seed``, ``stream``, ``stream_options``
(``include_usage``, ``continuous_usage_stats``) and the extension ``stream_interval``
(tokens per chunk, overriding ``--stream-interval``).  Everything else is accepted and
ignored (temperature, top_p, ...).

Stream: chat starts with a role-only chunk ``delta: {"role": "assistant", "content": ""}``;
each token chunk carries ``text`` / ``delta.content``; the last token chunk carries the
``finish_reason``; ``include_usage`` adds a ``choices: []`` usage chunk; then
``data: [DONE]``.  ``continuous_usage_stats`` puts the running usage on every chunk.
With prefix caching on, usage has ``prompt_tokens_details.cached_tokens``.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from . import tokenizer
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


def prompt_ids_of(body: dict, chat: bool, encode=tokenizer.encode) -> list[int]:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list")
        try:
            return encode(tokenizer.render_chat(messages))
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


def parse(body: dict, *, chat: bool, served: str, max_model_len: int, encode=tokenizer.encode) -> OpenAIRequest:
    check_model(body, served)
    ids = prompt_ids_of(body, chat, encode)
    default = max(1, max_model_len - len(ids)) if chat else 16
    max_tokens = _int(body, "max_tokens", None, 1)
    if chat:
        max_tokens = _int(body, "max_completion_tokens", max_tokens, 1)
    if max_tokens is None:
        max_tokens = default
    if len(ids) + max_tokens > max_model_len:
        raise ApiError(400, context_length_message(max_model_len, len(ids), max_tokens))
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise ApiError(400, "stream_options must be an object")
    seed = body.get("seed")
    return OpenAIRequest(
        chat=chat, prompt_ids=ids, max_tokens=max_tokens, ignore_eos=bool(body.get("ignore_eos")),
        min_tokens=min(_int(body, "min_tokens", 0, 0), max_tokens), seed=seed if isinstance(seed, int) else None,
        stream=bool(body.get("stream")), include_usage=bool(opts.get("include_usage")),
        continuous_usage=bool(opts.get("continuous_usage_stats")),
        stream_interval=_int(body, "stream_interval", None, 1))


class OpenAIProtocol:
    """Formats one response's SSE events and non-streamed body."""

    content_type = "text/event-stream; charset=utf-8"

    def __init__(self, req: OpenAIRequest, model: str, *, cached_details: bool):
        self.req, self.model, self.cached_details = req, model, cached_details
        self.prompt_tokens = len(req.prompt_ids)
        self.created = int(time.time())
        self.id = ("chatcmpl-" if req.chat else "cmpl-") + uuid.uuid4().hex
        self.object = "chat.completion.chunk" if req.chat else "text_completion"
        head = json.dumps({"id": self.id, "object": self.object, "created": self.created,
                           "model": model})[:-1]
        # Fast path for the common token chunk: a pre-rendered prefix and suffix.
        if req.chat:
            self._pre = (head + ',"choices":[{"index":0,"delta":{"content":').encode()
            self._post = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self._pre = (head + ',"choices":[{"index":0,"text":').encode()
            self._post = b',"logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
        self._pre = b"data: " + self._pre

    def usage(self, completion: int, cached: int | None = None) -> dict:
        u = {"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens + completion,
             "completion_tokens": completion}
        if self.cached_details and cached is not None:
            u["prompt_tokens_details"] = {"cached_tokens": cached}
        return u

    def _event(self, choices: list, usage: dict | None = None) -> bytes:
        obj = {"id": self.id, "object": self.object, "created": self.created, "model": self.model,
               "choices": choices}
        if usage is not None:
            obj["usage"] = usage
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

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
        if finish_reason is None and not self.req.continuous_usage:
            return self._pre + json.dumps(text).encode() + self._post
        usage = self.usage(total) if self.req.continuous_usage else None
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
            choice = {"index": 0, "message": {"role": "assistant", "content": result.text, "tool_calls": []},
                      "logprobs": None, "finish_reason": result.finish_reason, "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": result.text, "logprobs": None,
                      "finish_reason": result.finish_reason, "stop_reason": None, "prompt_logprobs": None}
            obj = "text_completion"
        return json.dumps({"id": self.id, "object": obj, "created": self.created, "model": self.model,
                           "choices": [choice],
                           "usage": self.usage(result.completion_tokens, result.state.cached_tokens)}).encode()
