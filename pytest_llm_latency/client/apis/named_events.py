"""What the OpenAI Responses and Anthropic Messages adapters share: their SSE streams name every
event (``event: <type>``, the same as the JSON ``type``) and end on a closing event, not on
``data: [DONE]``; their tool calls arrive as a start (id, name) and argument fragments, kept in the
record in chat's ``delta.tool_calls`` shape so that one assembly (``core.measure.tool_calls``) times
every API's calls.  The wire facts: docs/servers.md#openai-responses-and-anthropic-messages."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ...core.errors import MeasurementError
from ...core.measure.record import RecordBuilder
from ..transport.failures import PROXY_TIMEOUT_HINT
from ..transport.http import Redactor
from ..transport.sse import SSEDecoder
from .openai import OpenAIClient, _count, event_json


@dataclass
class StreamState:
    """One stream's progress: the closing event seen, the finish reason, the tool calls by the
    server's key (item id or block index) → chat's ``index``, and whether output was kept."""

    done: bool = False
    finish: str | None = None
    calls: dict[Any, int] = field(default_factory=dict)
    names: dict[Any, str] = field(default_factory=dict)
    #: what streamed so far per text, reasoning or argument key, for a closing event's tail (``tail``)
    streamed: dict[Any, list[str]] = field(default_factory=dict)


class TypedEvents(Protocol):
    """An adapter of a named-event stream (``ResponsesClient``, ``MessagesClient``)."""

    redact: Redactor
    #: the event that ends a complete stream
    CLOSING: str

    def _typed(self, b: RecordBuilder, t: int, kind: str, obj: dict, state: StreamState) -> None: ...


def as_dict(v: Any) -> dict:
    """``v`` when it is a JSON object, else an empty one (a field missing or of the wrong type)."""
    return v if isinstance(v, dict) else {}


def error_message(obj: dict) -> str:
    """The message of an error object in any of its shapes: Anthropic's ``{"type": "error", "error":
    {"type", "message"}}``, OpenAI's ``{"type": "error", "code", "message"}``, llama.cpp's
    ``{"error": {"code", "message", "type"}}``, a failed response's ``response.error``."""
    err = obj.get("error", obj)
    if not isinstance(err, dict):
        return str(err)
    kind = err.get("type") if err.get("type") not in (None, "error") else err.get("code")
    msg = err.get("message", err)
    return f"{kind}: {msg}" if kind else str(msg)


def tool_start(b: RecordBuilder, t: int, state: StreamState, key: Any, call_id: Any, name: Any) -> None:
    """A tool call begins (its name is known): a token-bearing chunk, as chat's first
    ``delta.tool_calls`` entry is, and the call's chat-shaped start.  A start repeated for a call
    already started (llama.cpp's final Messages event starts again every call whose arguments it
    still sends) is no new token."""
    if key in state.calls:
        return
    index = state.calls.setdefault(key, len(state.calls))
    entry: dict = {"index": index, "type": "function", "function": {"name": str(name or ""), "arguments": ""}}
    if isinstance(call_id, str) and call_id:
        entry["id"] = call_id
    state.names[key] = str(name or "")
    b.token_chunk(t)
    b.record.tool_deltas.append((t, [entry]))


def tool_arguments(b: RecordBuilder, t: int, state: StreamState, key: Any, fragment: Any) -> None:
    """A fragment of a call's JSON arguments (one token-bearing chunk)."""
    if not isinstance(fragment, str) or not fragment:
        return
    index = state.calls.setdefault(key, len(state.calls))
    state.streamed.setdefault(("args", key), []).append(fragment)
    b.token_chunk(t)
    b.record.tool_deltas.append((t, [{"index": index, "function": {"arguments": fragment}}]))


def text_token(b: RecordBuilder, t: int, text: Any, *, reasoning: bool = False, state: StreamState | None = None,
               key: Any = None) -> None:
    """A text or reasoning delta: one token-bearing chunk (the answer's text kept where asked); with
    ``state``, remembered under ``key`` for a closing event's tail."""
    if not isinstance(text, str) or not text:
        return
    if state is not None:
        state.streamed.setdefault((reasoning, key), []).append(text)
    b.token_chunk(t, text_len=0 if reasoning else len(text), reasoning=reasoning, text=text)
    if not reasoning and b.record.content_parts is not None:
        b.record.content_parts.append(text)


def tail(state: StreamState, slot: Any, whole: Any) -> str:
    """The part of a closing event's whole text (``response.output_text.done``'s ``text``, a done
    call's ``arguments``) that never streamed as deltas: llama.cpp's final Responses event carries
    what its partial parser held back (a call's closing brace, the last characters) only there.
    Empty when the deltas already said it all, or when the whole does not extend them."""
    if not isinstance(whole, str):
        return ""
    said = "".join(state.streamed.get(slot, ()))
    return whole[len(said):] if len(whole) > len(said) and whole.startswith(said) else ""


class NamedEventConsumer:
    """One streamed answer's body, pushed a read at a time (``client.transport.http.BodyConsumer``):
    each event goes to the adapter's ``_typed`` with its read's stamp; an ``error`` (named, or a bare
    ``data: {"error": ...}`` as llama.cpp sends after the first token) is a server fault; ``close``
    checks that the closing event came."""

    def __init__(self, client: TypedEvents, builder: RecordBuilder):
        self.client, self.builder = client, builder
        self.dec = SSEDecoder()
        self.state = StreamState()
        self.t_last = builder.record.t_send_ns
        self.n_bytes = 0

    def feed(self, t: int, chunk: bytes) -> None:
        self.t_last, self.n_bytes = t, self.n_bytes + len(chunk)
        for ev in self.dec.feed(chunk):
            self.builder.event()
            self._one(t, ev.data, ev.event, ev.error)

    def _one(self, t: int, data: str, name: str | None, sse_error: str | None) -> None:
        redact = self.client.redact
        if sse_error is not None:
            raise MeasurementError("stream_error", redact(f"error event inside a 200 stream: {sse_error}"))
        if self.state.done:
            return
        obj = event_json(data, redact)
        kind: str = obj["type"] if isinstance(obj.get("type"), str) else name or ""
        if "error" in (name, kind) or "error" in obj and not kind:  # llama.cpp: ``event: error`` or a bare ``data:``
            raise MeasurementError("stream_error", redact(f"error event inside a 200 stream: {error_message(obj)}"))
        self.client._typed(self.builder, t, kind, obj, self.state)

    def close(self) -> None:
        b, redact, closing = self.builder, self.client.redact, self.client.CLOSING
        for ev in self.dec.close():
            b.event()
            self._one(self.t_last, ev.data, ev.event, ev.error)
        if not self.state.done:
            after = (b.clock() - b.record.t_send_ns) / 1e9
            where = (f"after {len(b.record.chunks)} token chunks: the server closed the stream early (crash, "
                     f"timeout or proxy cut)") if b.record.chunks else \
                f"and without a token ({self.n_bytes} body bytes, {after:.1f} s after the request) — " \
                f"{PROXY_TIMEOUT_HINT}"
            raise MeasurementError("no_done", redact(f"stream ended without its closing {closing!r} event {where}"))
        b.finish(self.t_last, self.state.finish)


def count(v: Any, what: str, obj: dict) -> int | None:
    """A token count from usage: a non-negative int, or None when absent (``ProtocolError`` else)."""
    return _count(v, what, str(obj)[:120])


class NamedEventClient(OpenAIClient):
    """What the Responses and Messages clients share beside the chat client's discovery and status
    errors: no ``continuous_usage_stats`` (a chat-completions extension) and this module's reader."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("continuous_usage", False)
        super().__init__(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r}, model={self.model!r})"

    def _consumer(self, b: RecordBuilder) -> NamedEventConsumer:  # type: ignore[override]
        return NamedEventConsumer(self, b)  # type: ignore[arg-type]  # each subclass defines CLOSING and _typed
