"""Ollama's native ``/api/generate`` and ``/api/chat`` (NDJSON), ``/api/tags``, ``/api/version``.

Request fields honoured: ``model`` (required; ``name`` and ``name:latest`` both match),
``prompt`` (+ optional ``system``, prepended with a space) or ``messages``, ``stream``
(default **true**, like Ollama), ``options.num_predict`` (default and ``-1``: until the
natural EOS point, capped by the context), ``options.seed``.  Ollama cannot force the
length: there is no ``ignore_eos`` here, exactly like the real server.

The final object (``done: true``) carries ``done_reason`` and nanosecond durations, all
*modelled* time x ``time_scale`` (scheduler deadlines):

* ``load_duration``        = time queued before admission (Ollama's scheduler wait);
* ``prompt_eval_duration`` = admission -> first token (the prefill step(s));
* ``eval_duration``        = first token -> last token; ``eval_count`` = all generated tokens;
* ``total_duration``       = arrival -> last token;
* ``prompt_eval_count``    = prompt tokens actually evaluated (prefix-cache hits excluded,
  as llama.cpp/Ollama report them; equal to the prompt length when caching is off).
"""
from __future__ import annotations

import json
from datetime import datetime, timezone

from . import tokenizer
from .openai_api import ApiError
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


def parse(body: dict, *, chat: bool, served: str, max_model_len: int):
    """-> (model name, prompt ids, max_tokens, seed, stream)."""
    name = check_model(body, served)
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list")
        try:
            ids = tokenizer.encode(tokenizer.render_chat(messages))
        except TypeError as e:
            raise ApiError(400, str(e)) from None
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ApiError(400, "prompt must be a string")
        system = body.get("system")
        ids = tokenizer.encode((system + " " if isinstance(system, str) else "") + prompt)
        if not ids:
            raise ApiError(400, "The prompt is empty: the reference tokenizer found no words.")
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
    stream = body.get("stream", True)
    return name, ids, max_tokens, seed if isinstance(seed, int) else None, bool(stream)


class OllamaProtocol:
    content_type = "application/x-ndjson"

    def __init__(self, model: str, prompt_tokens: int, *, chat: bool):
        self.model, self.prompt_tokens, self.chat = model, prompt_tokens, chat

    def _line(self, obj: dict) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"

    def _piece(self, text: str, done: bool) -> dict:
        obj: dict = {"model": self.model, "created_at": _now()}
        if self.chat:
            obj["message"] = {"role": "assistant", "content": text}
        else:
            obj["response"] = text
        obj["done"] = done
        return obj

    def stats(self, result: Result) -> dict:
        st = result.state
        ns = lambda s: int(round(s * 1e9))  # noqa: E731
        return {"done_reason": result.finish_reason, "total_duration": ns(st.total_s),
                "load_duration": ns(st.queue_s), "prompt_eval_count": self.prompt_tokens - st.cached_tokens,
                "prompt_eval_duration": ns(st.prefill_s), "eval_count": result.completion_tokens,
                "eval_duration": ns(st.decode_s)}

    # -- StreamProtocol ---------------------------------------------------------------------
    def opening(self) -> list[bytes]:
        return []

    def token(self, text: str, total: int, finish_reason: str | None) -> bytes:
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
        obj = self._piece(result.text, True)
        obj.update(self.stats(result))
        return self._line(obj)[:-1]


def tags(served: str, model_spec) -> bytes:
    return json.dumps({"models": [{
        "name": served + ":latest", "model": served + ":latest", "modified_at": _now(),
        "size": int(model_spec.weight_bytes), "digest": "0" * 64,
        "details": {"format": "reference", "family": "llama",
                    "parameter_size": f"{model_spec.params / 1e9:.1f}B",
                    "quantization_level": f"{int(model_spec.weight_bytes_per_param * 8)}bit"}}]}).encode()
