"""Ollama's native ``/api/generate`` and ``/api/chat`` (NDJSON), ``/api/tags``, ``/api/ps``, ``/api/version``.

The request fields honoured and the final object's durations (all *modelled* time x
``time_scale``): docs/servers.md#what-its-apis-honour.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from . import tokenizer
from .openai_api import ApiError
from .residency import parse_keep_alive
from .streaming import Result


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def check_model(body: dict, served: str) -> str:
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise ApiError(400, "model is required")
    if name not in (served, served + ":latest"):
        raise ApiError(404, f'model "{name}" not found, try pulling it first')
    return name


@dataclass(frozen=True)
class OllamaRequest:
    name: str
    ids: list[int]              # [] for a load/unload request (no prompt, or no messages)
    max_tokens: int
    seed: int | None
    stream: bool
    keep_alive_s: float | None  # the request's keep_alive in seconds (None: the server's default)
    think: bool                 # False only when the request sends think: false


def parse(body: dict, *, chat: bool, served: str, max_model_len: int, encode=tokenizer.encode) -> OllamaRequest:
    """A generation request, or a load/unload one: Ollama loads the model for a request with no
    prompt (no messages on /api/chat) and answers ``done_reason: "load"`` (``"unload"`` with
    ``keep_alive: 0``)."""
    name = check_model(body, served)
    try:
        keep_alive = parse_keep_alive(body.get("keep_alive"))
    except ValueError:
        raise ApiError(400, f"keep_alive must be a number of seconds or a duration like '5m', "
                            f"got {body.get('keep_alive')!r}") from None
    if chat:
        messages = body.get("messages")
        if messages is not None and not isinstance(messages, list):
            raise ApiError(400, "messages must be a list")
        try:
            ids = encode(tokenizer.render_chat(messages)) if messages else []
        except TypeError as e:
            raise ApiError(400, str(e)) from None
    else:
        prompt = body.get("prompt")
        if prompt is not None and not isinstance(prompt, str):
            raise ApiError(400, "prompt must be a string")
        system = body.get("system")
        ids = encode((system + " " if isinstance(system, str) else "") + prompt) if prompt else []
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "options must be an object")
    room = max_model_len - len(ids)
    if room < 1:
        raise ApiError(400, f"prompt of {len(ids)} tokens exceeds the context length {max_model_len}")
    num_predict = options.get("num_predict", -1)
    if isinstance(num_predict, bool) or not isinstance(num_predict, int):
        raise ApiError(400, "options.num_predict must be an integer")
    max_tokens = room if num_predict < 0 else min(max(num_predict, 1), room)
    seed = options.get("seed")
    return OllamaRequest(name, ids, max_tokens, seed if isinstance(seed, int) else None,
                         bool(body.get("stream", True)), keep_alive, body.get("think") is not False)


def load_response(name: str, *, chat: bool, unloaded: bool) -> bytes:
    """Ollama's answer to a load/unload request (one JSON object, even when streamed)."""
    obj: dict = {"model": name, "created_at": _now()}
    if chat:
        obj["message"] = {"role": "assistant", "content": ""}
    else:
        obj["response"] = ""
    obj.update(done=True, done_reason="unload" if unloaded else "load")
    return json.dumps(obj).encode()


class OllamaProtocol:
    content_type = "application/x-ndjson"

    def __init__(self, model: str, prompt_tokens: int, *, chat: bool, thinking_tokens: int = 0,
                 cached: bool = False, load_s: float = 0.0):
        self.model, self.prompt_tokens, self.chat = model, prompt_tokens, chat
        self.thinking_tokens = thinking_tokens  # the first N generated tokens are 'thinking'
        self.cached, self.load_s = cached, load_s  # prompt served from the prompt cache; seconds spent loading

    def _line(self, obj: dict) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"

    def _piece(self, text: str, done: bool, thinking: str = "") -> dict:
        obj: dict = {"model": self.model, "created_at": _now()}
        if self.chat:
            obj["message"] = {"role": "assistant", "content": text}
            if thinking:
                obj["message"]["thinking"] = thinking
        else:
            obj["response"] = text
            if thinking:
                obj["thinking"] = thinking
        obj["done"] = done
        return obj

    def stats(self, result: Result) -> dict:
        st = result.state
        ns = lambda s: int(round(s * 1e9))  # noqa: E731
        out = {"done_reason": result.finish_reason, "total_duration": ns(st.total_s + self.load_s),
               "load_duration": ns(st.queue_s + self.load_s),
               "prompt_eval_count": self.prompt_tokens - st.cached_tokens,
               "prompt_eval_duration": ns(st.prefill_s), "eval_count": result.completion_tokens,
               "eval_duration": ns(st.decode_s)}
        if self.cached:  # nothing evaluated: omitempty drops both (what Ollama sends for a cached prompt)
            del out["prompt_eval_count"], out["prompt_eval_duration"]
        return out

    # -- StreamProtocol ---------------------------------------------------------------------
    def opening(self) -> list[bytes]:
        return []

    def token(self, text: str, total: int, finish_reason: str | None) -> bytes:
        if total <= self.thinking_tokens:
            return self._line(self._piece("", False, thinking=text))
        return self._line(self._piece(text, False))

    def closing(self, result: Result, done: bool) -> list[bytes]:
        if not done:
            return []
        final = self._piece("", True)
        final.update(self.stats(result))
        return [self._line(final)]

    def error_event(self, message: str) -> list[bytes]:
        return [self._line({"error": message})]

    def malformed(self) -> bytes:
        return b'{"model":"' + self.model.encode() + b'","created_at":\n'

    def huge(self, size: int) -> bytes:
        obj = self._piece("", False)
        obj["pad"] = "x" * max(0, size - 120)
        return self._line(obj)

    def full_body(self, result: Result) -> bytes:
        words = result.text.split(" ")  # " w1 w2 ...": words[0] == ""
        k = min(self.thinking_tokens, result.completion_tokens)
        obj = self._piece("".join(" " + w for w in words[1 + k:]), True,
                          thinking="".join(" " + w for w in words[1:1 + k]))
        obj.update(self.stats(result))
        return self._line(obj)[:-1]


def ps(served: str, model_spec, expires_in_s: float | None) -> bytes:
    """``/api/ps``: the loaded model (an empty list when none is loaded: ``expires_in_s`` is False)."""
    if expires_in_s is False:
        return b'{"models":[]}'
    expires = "2318-08-08T00:00:00Z" if expires_in_s is None else \
        datetime.fromtimestamp(datetime.now(timezone.utc).timestamp() + expires_in_s, timezone.utc).isoformat()
    return json.dumps({"models": [{"name": served + ":latest", "model": served + ":latest",
                                   "size": int(model_spec.weight_bytes), "digest": "0" * 64,
                                   "expires_at": expires, "size_vram": int(model_spec.weight_bytes)}]}).encode()


def tags(served: str, model_spec) -> bytes:
    return json.dumps({"models": [{
        "name": served + ":latest", "model": served + ":latest", "modified_at": _now(),
        "size": int(model_spec.weight_bytes), "digest": "0" * 64,
        "details": {"format": "reference", "family": "llama",
                    "parameter_size": f"{model_spec.params / 1e9:.1f}B",
                    "quantization_level": f"{int(model_spec.weight_bytes_per_param * 8)}bit"}}]}).encode()
