"""Ollama native streaming client: ``/api/generate`` (``raw: true``) and ``/api/chat`` (NDJSON);
which API, ``keep_alive`` and cold starts: docs/servers.md#ollama.

The final object's nanosecond counters are kept as the server-reported prefill and decode
(omitted zero fields default to 0), ``load_duration`` as ``load_ms`` (``core.measure.coldstart``).
A final object without ``prompt_eval_count`` means the whole prompt came from Ollama's prompt
cache (omitempty: nothing was evaluated): it is marked ``server_timings["prompt_cached"]``,
never read as "no usage".
"""
from __future__ import annotations

import time
from typing import Any, Callable

import httpx

from ...core.errors import MeasurementError, ProtocolError
from ...core.measure.record import Clock, RecordBuilder, RequestRecord
from ..transport.http import (CONTEXT_LENGTH_HINTS, Redactor, StreamingPost, Timeouts, bounded_request,
    map_transport_error)
from ..transport.ndjson import NDJSONDecoder
from ..transport.clock import MEASUREMENT_CLOCK

NDJSON_TYPES = ("application/x-ndjson", "application/json")
#: sent with every request: the model stays loaded between the requests of a run (Ollama's default is 5m)
KEEP_ALIVE = "10m"
UNLOAD_WAIT_S = 30.0  # bounded wait for /api/ps to stop listing the model after an unload


def ollama_timings(final: dict) -> dict:
    def ns(k: str) -> int:  # omitempty: absent means 0
        v = final.get(k) or 0
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ProtocolError(f"Ollama final object: {k} is not a duration in ns ({v!r})")
        return int(v)

    out: dict[str, Any] = {"prefill_ms": ns("prompt_eval_duration") / 1e6, "decode_ms": ns("eval_duration") / 1e6,
           "load_ms": ns("load_duration") / 1e6, "total_ms": ns("total_duration") / 1e6,
           "prompt_n": ns("prompt_eval_count"), "predicted_n": ns("eval_count"), "source": "ollama"}
    if out["predicted_n"] and ns("eval_duration"):
        out["predicted_per_token_ms"] = out["decode_ms"] / out["predicted_n"]
    return out


class OllamaClient:
    def __init__(self, http: httpx.Client, base_url: str, model: str | None, api: str = "generate", *,
                 clock: Clock = MEASUREMENT_CLOCK, timeouts: Timeouts = Timeouts(),
                 redact: Redactor = Redactor(), sleep: Callable[[float], None] = time.sleep):
        if api not in ("generate", "chat"):
            raise ValueError(f"api must be 'generate' or 'chat', not {api!r}")
        self.http, self.base_url, self.model, self.api = http, base_url.rstrip("/"), model, api
        self.clock, self.timeouts, self.redact = clock, timeouts, redact
        self._post = StreamingPost(http, timeouts, clock, redact, sleep)
        self.sleep = sleep

    def __repr__(self) -> str:
        return f"OllamaClient({self.base_url!r}, model={self.model!r}, api={self.api!r})"

    @property
    def api_name(self) -> str:
        """The target's ``api:`` name (``client.apis.target.Target``) this client speaks."""
        return "ollama" if self.api == "generate" else "ollama-chat"

    def models(self) -> list[dict]:
        """Local models from ``/api/tags``; a transport failure raises (it is the real problem)."""
        url = f"{self.base_url}/api/tags"
        try:
            r = bounded_request(self.http, "GET", url, total_s=self.timeouts.connect_s + 5)
            return [{"id": m.get("name")} for m in r.json().get("models", [])] if r.status_code == 200 else []
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, url, self.timeouts, self.redact) from None
        except (ValueError, AttributeError):
            return []

    def check_model(self) -> str | None:
        """The configured model must be one ``/api/tags`` lists (``name`` matches ``name:latest``,
        Ollama's implicit tag), else Ollama answers every request 404: an error naming the local
        models, with close matches first.  None when listed, not configured or nothing listed."""
        if not self.model:
            return None
        names = [str(m["id"]) for m in self.models() if m.get("id")]
        if not names or self.model in names or f"{self.model}:latest" in names or \
                (self.model.endswith(":latest") and self.model[:-len(":latest")] in names):
            return None
        import difflib

        bases = {n.split(":", 1)[0]: n for n in names}
        close = difflib.get_close_matches(self.model, names, n=3, cutoff=0.5)
        close += [bases[b] for b in difflib.get_close_matches(self.model.split(":", 1)[0], list(bases), n=3,
                                                              cutoff=0.5) if bases[b] not in close]
        hint = f"; did you mean {' or '.join(repr(c) for c in close[:3])}?" if close else ""
        raise MeasurementError("unknown_model", self.redact(
            f"model {self.model!r} is not available at {self.base_url} (/api/tags lists {', '.join(names)}){hint} "
            f"-- `ollama pull {self.model}` or set --llm-latency-model"))

    def unload(self) -> None:
        """Unload the model (``keep_alive: 0`` with no prompt) and wait, bounded, until
        ``/api/ps`` no longer lists it, so the next request is a cold start."""
        url = f"{self.base_url}/api/generate"
        body = {"model": self.resolve_model(), "keep_alive": 0, "stream": False}
        try:
            r = bounded_request(self.http, "POST", url, json=body, total_s=self.timeouts.total_s)
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, url, self.timeouts, self.redact) from None
        if r.status_code != 200:
            raise MeasurementError(f"http_{r.status_code}", self.redact(
                f"HTTP {r.status_code} from {url} while unloading the model: {r.text[:300]}"))
        deadline = self.clock() + int(UNLOAD_WAIT_S * 1e9)
        while self.clock() < deadline:
            try:
                ps = bounded_request(self.http, "GET", f"{self.base_url}/api/ps", total_s=self.timeouts.connect_s + 5)
                loaded = [m.get("name") for m in ps.json().get("models", [])] if ps.status_code == 200 else []
            except (httpx.HTTPError, ValueError, AttributeError):
                return  # no /api/ps: the unload answer is all there is to go by
            if not any(n in (self.model, f"{self.model}:latest") for n in loaded):
                return
            self.sleep(0.1)
        raise MeasurementError("unload", f"{self.base_url}/api/ps still lists {self.model!r} {UNLOAD_WAIT_S:g} s "
                                         f"after an unload request (keep_alive: 0)")

    def resolve_model(self) -> str:
        if not self.model:
            models = self.models()
            if not models:
                raise MeasurementError("no_model", f"no model configured and {self.base_url}/api/tags lists none; "
                                       f"set --llm-latency-model")
            self.model = str(models[0]["id"])
        return self.model

    def request_body(self, system: str, user: str, max_tokens: int, *, extra: dict | None = None) -> dict:
        opts = {"num_predict": max_tokens, "temperature": 0.0}
        body: dict = {"model": self.resolve_model(), "stream": True, "options": opts, "keep_alive": KEEP_ALIVE}
        if self.api == "generate":
            body.update(prompt=system + user, raw=True)
        else:
            body["messages"] = ([{"role": "system", "content": system}] if system else []) + \
                [{"role": "user", "content": user}]
        if extra:
            body.update(extra)
        return body

    def _describe(self, code: int, msg: str) -> MeasurementError | None:
        low = msg.lower()
        if code == 404 and "model" in low:
            served = [str(m["id"]) for m in self.models()]
            return MeasurementError("unknown_model", self.redact(
                f"HTTP 404: model {self.model!r} is not available at {self.base_url}; local models: "
                f"{', '.join(served) or '(none)'} — `ollama pull` it or set --llm-latency-model. Server said: {msg}"))
        if code == 400 and any(h in low for h in CONTEXT_LENGTH_HINTS):
            return MeasurementError("context_length", self.redact(f"prompt too long for the context: {msg}"))
        return None

    def stream(self, system: str, user: str, max_tokens: int, *, expected_prompt_tokens: int | None = None,
               extra: dict | None = None) -> RequestRecord:
        url = f"{self.base_url}/api/{self.api}"
        body = self.request_body(system, user, max_tokens, extra=extra)
        builder = self._post.run(
            url, body,
            lambda: RecordBuilder(self.clock, expected_prompt_tokens=expected_prompt_tokens,
                                  expected_output_tokens=max_tokens),
            NDJSON_TYPES, self._describe, lambda b: NDJSONConsumer(self, b))
        return builder.record

    def _object(self, b: RecordBuilder, t: int, obj: dict) -> bool:
        if "error" in obj:
            raise MeasurementError("stream_error", self.redact(f"error inside a 200 stream: {obj['error']}"))
        msg = obj.get("message")
        msg = msg if isinstance(msg, dict) else {}
        content = obj.get("response") if self.api == "generate" else msg.get("content")
        thinking = obj.get("thinking") or msg.get("thinking")
        tools = msg.get("tool_calls")
        if content or thinking or tools:
            text = content if isinstance(content, str) and content else thinking if isinstance(thinking, str) else None
            b.token_chunk(t, text_len=len(content or ""), reasoning=not content and not tools, text=text)
        if obj.get("done"):
            # absent counts stay unknown (the counted tokens then stand), never 0
            counts = [obj.get("prompt_eval_count"), obj.get("eval_count")]
            if any(c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 0) for c in counts):
                raise ProtocolError(f"Ollama final object has non-integer token counts: {counts!r}")
            b.usage(*counts)
            b.record.server_timings.update(ollama_timings(obj))
            if counts[0] is None:  # omitempty: no prompt token was evaluated, the prompt cache served it all
                b.record.server_timings["prompt_cached"] = True
            b.record.finish_reason = obj.get("done_reason")
            return True
        return False


class NDJSONConsumer:
    """One streamed Ollama answer, pushed a read at a time (``client.transport.http.BodyConsumer``)."""

    def __init__(self, client: OllamaClient, builder: RecordBuilder):
        self.client, self.builder = client, builder
        self.dec = NDJSONDecoder()
        self.done = False
        self.t_last = builder.record.t_send_ns

    def feed(self, t: int, chunk: bytes) -> None:
        self.t_last = t
        b = self.builder
        for obj in self.dec.feed(chunk):
            b.event()
            self.done = self.client._object(b, t, obj) or self.done

    def close(self) -> None:
        b = self.builder
        for obj in self.dec.close():
            b.event()
            self.done = self.client._object(b, self.t_last, obj) or self.done
        if not self.done:
            raise MeasurementError("no_done", self.client.redact(
                f"NDJSON stream ended without a final 'done: true' object after {len(b.record.chunks)} tokens"))
        b.finish(self.t_last)
