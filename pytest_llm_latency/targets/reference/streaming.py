"""Protocol-independent generation: output-length planning, streaming with faults, collecting.

The OpenAI (SSE) and Ollama (NDJSON) modules provide a ``Protocol`` object that formats
events; this module decides *when* bytes go out and applies the stream faults
(``faults.py``), so every fault behaves the same on every endpoint.

Several tokens per chunk: with ``stream_interval`` = k (server flag ``--stream-interval``
or the request field ``stream_interval``), tokens are held back and sent k per chunk,
like vLLM's ``--stream-interval`` (the final chunk may carry fewer).  Each chunk's
``usage.completion_tokens`` (``continuous_usage_stats``) counts them exactly.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Protocol

from .faults import Fault
from .http import Connection
from .scheduler import Closed, RequestState
from .tokenizer import TextGenerator, natural_length


@dataclass
class Generation:
    prompt_tokens: int
    max_tokens: int
    target: int            # tokens the model will produce
    reason: str            # finish_reason when it has: "length" or "stop"
    seed: int
    stream_interval: int = 1


def plan_output(prompt_tokens: int, max_tokens: int, *, seed: int, ignore_eos: bool = False,
                min_tokens: int = 0, fault: Fault | None = None, stream_interval: int = 1,
                reasoning: int = 0) -> Generation:
    """How many tokens the model produces and why it stops.

    * ``ignore_eos`` -> exactly ``max_tokens`` (``"length"``);
    * else the natural EOS point (``tokenizer.natural_length``; after ``reasoning`` tokens of
      reasoning asked for, the EOS falls in the answer: ``reasoning + natural_length``), raised to
      ``min_tokens``; ``"stop"`` if that is below ``max_tokens``, else ``"length"``;
    * fault ``early_stop;after=k`` -> ``min(k, max_tokens)`` tokens, ``"stop"``, always.
    """
    if fault is not None and fault.mode == "early_stop":
        target, reason = max(1, min(int(fault.get("after")), max_tokens)), "stop"
    else:
        n = max_tokens if ignore_eos else max(reasoning + natural_length(seed), min_tokens, 1)
        target, reason = (n, "stop") if n < max_tokens else (max_tokens, "length")
    return Generation(prompt_tokens, max_tokens, target, reason, seed, stream_interval)


@dataclass
class Result:
    text: str
    completion_tokens: int
    finish_reason: str
    state: RequestState


class Scheduler(Protocol):
    """What a response needs of its driver (``scheduler.Scheduler``, or a P/D pair's ``disagg.DisaggPair``)."""

    def abort(self, st: RequestState) -> None: ...


class StreamProtocol(Protocol):
    content_type: str

    def opening(self) -> list[bytes]: ...
    def token(self, text: str, total: int, finish_reason: str | None) -> bytes: ...
    def closing(self, result: Result, done: bool) -> list[bytes]: ...
    def error_event(self, message: str) -> list[bytes]: ...
    def malformed(self) -> bytes: ...
    def huge(self, size: int) -> bytes: ...
    def full_body(self, result: Result) -> bytes: ...


_STREAM_FAULTS = {"reset", "stall", "malformed_json", "error_event", "huge_line"}


async def stream(conn: Connection, sched: Scheduler, st: RequestState, gen: Generation,
                 proto: StreamProtocol, fault: Fault | None, *, no_proxy_buffering: bool = False) -> None:
    """Send a streamed response; every wait is bounded by the generation or the fault caps.
    ``no_proxy_buffering``: the ``X-Accel-Buffering: no`` header (nginx then does not buffer)."""
    content_type = proto.content_type
    if fault is not None and fault.mode == "wrong_content_type":
        if fault.get("body") == "json":
            await respond_full(conn, sched, st, gen, proto, None, content_type="application/json")
            return
        content_type = "application/json"
    if fault is not None and fault.mode == "trickle":
        conn.trickle(float(fault.get("bytes_per_s")), fault.seconds("max_seconds"), bool(fault.get("headers")))
    active = fault if fault is not None and fault.mode in _STREAM_FAULTS else None
    fire_at = min(int(active.get("after")), gen.target) if active else -1
    headers = [("content-type", content_type), ("cache-control", "no-cache")]
    await conn.start_stream(200, headers + ([("x-accel-buffering", "no")] if no_proxy_buffering else []))
    for event in proto.opening():
        await conn.write_chunk(event)
    if active is not None and fire_at == 0 and await _fire(conn, sched, st, proto, active):
        return
    words = TextGenerator(gen.seed)
    sent = chunks = pending = 0
    interval = max(1, gen.stream_interval)
    try:
        while True:
            ev = st.next_nowait() or await st.next()
            if conn.closed:
                sched.abort(st)
                return
            pending += ev.n
            if not ev.finished and pending < interval:
                continue
            sent += pending
            await conn.write_chunk(proto.token(words.next(pending), sent, ev.reason))
            pending = 0
            chunks += 1
            if active is not None and chunks == fire_at and await _fire(conn, sched, st, proto, active):
                return
            if ev.finished:
                break
    except Closed:
        conn.close()
        return
    result = Result("", sent, gen.reason, st)
    no_done = fault is not None and fault.mode == "no_done"
    for event in proto.closing(result, done=not no_done):
        await conn.write_chunk(event)
    await conn.end_stream()


def watch_disconnect(conn: Connection, sched: Scheduler, st: RequestState) -> asyncio.Task:
    """Abort the request when the client closes its end (an HTTP/1.1 client sends nothing
    while it waits for a response, so any EOF on the reader means it has gone)."""
    async def watch() -> None:
        try:
            data = await conn.reader.read(1)
        except (ConnectionError, OSError):
            data = b""
        if not data:
            sched.abort(st)

    return asyncio.get_running_loop().create_task(watch())


async def _fire(conn: Connection, sched: Scheduler, st: RequestState, proto: StreamProtocol,
                fault: Fault) -> bool:
    """Apply a mid-stream fault; True when the response is over."""
    mode = fault.mode
    if mode == "reset":
        sched.abort(st)
        conn.reset()
        return True
    if mode == "stall":
        await asyncio.sleep(fault.seconds("seconds"))
    elif mode == "malformed_json":
        await conn.write_chunk(proto.malformed())
    elif mode == "huge_line":
        await conn.write_chunk(proto.huge(int(fault.get("bytes"))))
    elif mode == "error_event":
        sched.abort(st)
        for event in proto.error_event("Injected fault: the engine failed mid-stream."):
            await conn.write_chunk(event)
        await conn.end_stream()
        return True
    return False


async def collect(st: RequestState) -> int:
    """Wait for the whole generation; returns its tokens."""
    while True:
        ev = st.next_nowait() or await st.next()
        if ev.finished:
            return ev.total


async def respond_full(conn: Connection, sched: Scheduler, st: RequestState, gen: Generation,
                       proto: StreamProtocol, fault: Fault | None, *,
                       content_type: str = "application/json") -> None:
    """A non-streamed response.  Faults: reset (RST instead of the body), stall (delayed),
    trickle (slow body); the stream-only modes do not apply."""
    if fault is not None and fault.mode == "trickle":
        conn.trickle(float(fault.get("bytes_per_s")), fault.seconds("max_seconds"), bool(fault.get("headers")))
    try:
        total = await collect(st)
    except Closed:
        conn.close()
        return
    if fault is not None and fault.mode == "reset":
        conn.reset()
        return
    if fault is not None and fault.mode == "stall":
        await asyncio.sleep(fault.seconds("seconds"))
    body = proto.full_body(Result(TextGenerator(gen.seed).next(total), total, gen.reason, st))
    await conn.send(200, [("content-type", content_type)], body)


def named_event(kind: str, obj: dict) -> bytes:
    """One SSE event with an ``event:`` line (the Responses and Messages framing: no ``[DONE]``)."""
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"
