"""A minimal streaming client for the reference-server tests.

Independent of the plugin's adapters on purpose (the server is the plugin's ground
truth, so it is measured with separate code): stamps ``time.perf_counter_ns()`` when
each raw read arrives, then splits it into SSE / NDJSON events.  Token counts per chunk
come from ``continuous_usage_stats`` (exact) or, failing that, the word count of the
text (the reference tokenizer is one token per word).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx


@dataclass
class Stream:
    status: int
    headers: httpx.Headers
    t_send: int
    t_first_byte: int | None = None
    events: list = field(default_factory=list)       # (t_ns, parsed JSON | raw str)
    chunks: list = field(default_factory=list)       # (t_ns, tokens) for token-bearing events
    done: bool = False
    usage: dict | None = None
    finish_reason: str | None = None
    text: str = ""
    final: dict | None = None                         # Ollama's done object

    @property
    def tokens(self) -> int:
        return sum(n for _, n in self.chunks)

    @property
    def ttft_s(self) -> float:
        return (self.chunks[0][0] - self.t_send) / 1e9

    def tpot_s(self) -> float:
        """(last token - first token) / tokens after the first chunk."""
        (t0, n0), (t1, _) = self.chunks[0], self.chunks[-1]
        return (t1 - t0) / 1e9 / (self.tokens - n0)

    def itls_s(self) -> list[float]:
        return [(b[0] - a[0]) / 1e9 / b[1] for a, b in zip(self.chunks, self.chunks[1:])]


def _token_count(obj: dict, prev_total: int) -> tuple[int, int]:
    usage = obj.get("usage")
    if usage and obj.get("choices"):
        total = usage["completion_tokens"]
        return total - prev_total, total
    choice = obj["choices"][0]
    text = choice.get("text")
    if text is None:
        text = (choice.get("delta") or {}).get("content") or ""
    n = len(text.split())
    return n, prev_total + n


def stream_openai(client: httpx.Client, url: str, body: dict, *, path: str = "/v1/completions",
                  headers: dict | None = None, timeout: float = 60.0) -> Stream:
    body = {**body, "stream": True}
    t_send = time.perf_counter_ns()
    with client.stream("POST", url + path, json=body, headers=headers, timeout=timeout) as resp:
        out = Stream(resp.status_code, resp.headers, t_send)
        buf = b""
        total = 0
        for raw in resp.iter_raw():
            t = time.perf_counter_ns()
            if out.t_first_byte is None:
                out.t_first_byte = t
            buf += raw
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                data = event.decode()
                if not data.startswith("data: "):
                    out.events.append((t, data))
                    continue
                data = data[6:]
                if data == "[DONE]":
                    out.done = True
                    continue
                obj = json.loads(data)
                out.events.append((t, obj))
                if "error" in obj:
                    continue
                if not obj.get("choices"):
                    out.usage = obj.get("usage")
                    continue
                n, total = _token_count(obj, total)
                choice = obj["choices"][0]
                out.text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
                if n:
                    out.chunks.append((t, n))
                if choice.get("finish_reason"):
                    out.finish_reason = choice["finish_reason"]
                    if obj.get("usage"):
                        out.usage = obj["usage"]
    return out


def stream_ollama(client: httpx.Client, url: str, body: dict, *, path: str = "/api/generate",
                  timeout: float = 60.0) -> Stream:
    t_send = time.perf_counter_ns()
    with client.stream("POST", url + path, json=body, timeout=timeout) as resp:
        out = Stream(resp.status_code, resp.headers, t_send)
        buf = b""
        for raw in resp.iter_raw():
            t = time.perf_counter_ns()
            buf += raw
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                obj = json.loads(line)
                out.events.append((t, obj))
                if obj.get("done"):
                    out.final, out.done = obj, True
                    out.finish_reason = obj.get("done_reason")
                    continue
                piece = obj.get("response")
                if piece is None:
                    piece = (obj.get("message") or {}).get("content", "")
                out.text += piece
                if piece:
                    out.chunks.append((t, len(piece.split())))
    return out


def words(n: int, salt: str = "") -> str:
    """A prompt of exactly ``n`` reference tokens (``salt`` counts as the first word)."""
    base = [salt] if salt else []
    return " ".join(base + [f"w{i % 97}" for i in range(n - len(base))])


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def named_events(client: httpx.Client, url: str, path: str, body: dict, *,
                 headers: dict | None = None) -> tuple[int, list[tuple[str, dict]], bytes]:
    """A Responses / Messages stream: (status, [(event name, data object)], raw body).  Checks
    the framing: every event has an ``event:`` line equal to its data's ``type``."""
    r = client.post(url + path, json={**body, "stream": True}, headers=headers)
    events = []
    if r.status_code == 200:
        assert r.headers["content-type"].startswith("text/event-stream")
        for block in r.content.decode().split("\n\n"):
            if not block:
                continue
            head, data = block.split("\n", 1)
            assert head.startswith("event: ") and data.startswith("data: "), block
            obj = json.loads(data[6:])
            assert obj["type"] == head[7:], block
            events.append((head[7:], obj))
    return r.status_code, events, r.content
