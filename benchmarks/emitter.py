"""Ground-truth emitter: an OpenAI-style SSE server that streams tokens on an exact schedule and
stamps the send time of every event with ``CLOCK_MONOTONIC`` (``time.monotonic_ns``).

    python benchmarks/emitter.py --port 0 --ttft-ms 20 --tok-per-s 50 --tokens-per-chunk 1 \\
        --usage final --jitter-ms 0 --stamps out.jsonl

It prints its URL (``http://127.0.0.1:PORT``) on the first line of stdout, then serves until
SIGTERM/SIGINT, when it writes ``--stamps``.  Endpoints: ``POST /v1/completions`` and
``/v1/chat/completions`` (streamed; ``stream: false`` is refused), ``GET /v1/models``,
``POST /tokenize`` / ``/v1/tokenize`` (``{"prompt"}``, ``{"content"}`` or ``{"messages"}`` →
``{"count", "tokens"}``), ``GET /health``, ``POST /_emitter/dump`` (write the stamps file now;
answers ``{"requests", "events", "path"}``) and ``POST /_emitter/reset`` (forget all stamps).

Tokenizer: one token per whitespace word, like the reference target (``targets/reference``);
chat prompts count words + 2 per message + 1.  Each generated token is one word with a leading
space, so any client can re-count a chunk's text.

Schedule (per request, from ``start``: the kernel's arrival stamp of the request's last byte
where there is one, else ``recv``, the moment its body was read): token ``i`` (0-based) is
*generated* at ``start + ttft + i * interval`` (``interval = 1 / tok-per-s``, plus a seeded
uniform jitter in ``[-jitter, +jitter]`` per gap, never negative); a chunk is *due* when its last
token is generated, so with 4 tokens per chunk the first chunk goes out at ``ttft + 3 intervals``.
Chat streams start with a role-only chunk at ``recv``.  The last token chunk carries
``finish_reason: "length"``; the tail (usage chunk where asked, ``[DONE]``, end of the chunked
body) goes in one write right after it.  Exactly ``max_tokens`` tokens (default
``--default-tokens``) are sent: ``ignore_eos`` is implied.

Usage (``--usage``): ``none`` (no usage anywhere: llama.cpp without ``include_usage``, proxies),
``final`` (one ``choices: []`` usage chunk at the end), ``per-chunk`` (vLLM
``continuous_usage_stats``: a running ``usage`` in every chunk, plus the final one), or
``request`` (what the request's ``stream_options`` ask for).

Why it is never the bottleneck: the request threads (one per connection, blocked in ``recv``)
pre-build every event's bytes when the request arrives; one sender thread pops a heap of
``(due, ...)`` and sleeps with ``threading.Condition.wait`` (µs resolution, unlike asyncio's
millisecond epoll timeout) until the next event is due, stamps ``monotonic_ns()`` and writes.
Its lateness (``sent - due``) is in every event line, summarised in the ``meta`` line and the
dump answer: p99 lateness is the emitter's own measured headroom.

The request's own arrival: on Linux each request socket has ``SO_TIMESTAMPNS``, so the read
that completes a request carries the kernel's arrival stamp of its last byte, converted to
``CLOCK_MONOTONIC`` with ``CLOCK_REALTIME - CLOCK_MONOTONIC`` sampled around each read (an
independent implementation from the plugin's: the truth must not share the measured code).
``arrived_ns`` is that stamp (None where the kernel gives none): a TTFT's truth runs from the
request's arrival to its first token's send, so the emitter's own wake-up after the arrival is
not counted against the client.

Stamps file: format, writer and reader in ``emitter_stamps.py`` (``load_stamps`` is re-exported here).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import heapq
import itertools
import json
import os
import random
import resource
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # run as a script or loaded by path
from emitter_stamps import load_stamps, pct, write_stamps  # noqa: F401 - load_stamps re-exported
from emitter_wire import SO_TIMESTAMPNS, WORDS, chat_tokens, chunk_sizes, count_words, http_chunk
from emitter_wire import recv_arrival as _recv

MAX_BODY = 16 * 1024 * 1024


class Emitter:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.interval_ns = int(1e9 / a.tok_per_s)
        self.ttft_ns = int(a.ttft_ms * 1e6)
        self.jitter_ns = int(a.jitter_ms * 1e6)
        self.heap: list = []
        self.cv = threading.Condition()
        self.seq = itertools.count()
        self.rids = itertools.count()
        self.conns = itertools.count()
        self.requests: list[tuple] = []      # (rid, conn, path, recv_ns, prompt_tokens, max_tokens, head, sha, arrived_ns)
        self.events: list[tuple] = []        # (rid, i, tok, due, sent, wrote, text)
        self.texts: dict[int, list[str]] = {}
        self.dropped = 0
        self.stop = False
        self.cpu0 = self._cpu()

    @staticmethod
    def _cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    # ------------------------------------------------------------------ sender
    def sender(self) -> None:
        heap, cv, events = self.heap, self.cv, self.events
        now = time.monotonic_ns
        while True:
            with cv:
                while not self.stop:
                    if heap:
                        wait = heap[0][0] - now()
                        if wait <= 0:
                            break
                        cv.wait(wait / 1e9)
                    else:
                        cv.wait(0.5)
                if self.stop:
                    return
                due, _, sock, rid, i, tok, data, done = heapq.heappop(heap)
            if sock.fileno() < 0:
                continue
            sent = now()
            try:
                sock.sendall(data)
            except OSError:  # the client went away: forget the rest of its stream
                self.dropped += 1
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                continue
            wrote = now()
            events.append((rid, i, tok, due, sent, wrote))
            if done is not None:
                done.set()

    def schedule(self, items: list[tuple]) -> None:
        with self.cv:
            first = not self.heap or items[0][0] < self.heap[0][0]
            for it in items:
                heapq.heappush(self.heap, it)
            if first:
                self.cv.notify()

    # ------------------------------------------------------------------ requests
    def serve_conn(self, sock: socket.socket) -> None:
        conn = next(self.conns)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(5.0)   # a write to a client that stopped reading gives up (the sender)
        if SO_TIMESTAMPNS is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        buf = b""
        arrived = None
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    got, arrived = _recv(sock)
                    if not got:
                        return
                    buf += got
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
                n = int(headers.get("content-length", "0") or 0)
                if n > MAX_BODY:
                    return self._reply(sock, 413, {"error": {"message": "body too large"}}, close=True)
                while len(buf) < n:
                    got, arrived = _recv(sock)
                    if not got:
                        return
                    buf += got
                body, buf = buf[:n], buf[n:]
                recv = time.monotonic_ns()
                close = headers.get("connection", "").lower() == "close"
                self.route(sock, conn, method, path.split("?")[0], body, recv,
                           arrived if arrived is not None and arrived <= recv else None)
                if close:
                    return
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    def _reply(self, sock, code: int, obj, close: bool = False) -> None:
        data = json.dumps(obj).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Too Large"}.get(code, "Error")
        sock.sendall(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
                     % (code, reason.encode(), len(data), b"Connection: close\r\n" if close else b"", data))

    def route(self, sock, conn: int, method: str, path: str, body: bytes, recv: int,
              arrived: int | None = None) -> None:
        a = self.a
        if method == "GET" and path in ("/health", "/v1/health"):
            return self._reply(sock, 200, {"status": "ok"})
        if method == "GET" and path == "/v1/models":
            return self._reply(sock, 200, {"object": "list", "data": [
                {"id": a.model, "object": "model", "owned_by": "emitter", "max_model_len": a.max_model_len}]})
        try:
            req = json.loads(body) if body else {}
        except ValueError:
            return self._reply(sock, 400, {"error": {"message": "body is not JSON"}})
        if method == "POST" and path in ("/tokenize", "/v1/tokenize"):
            if "messages" in req:
                n = chat_tokens(req["messages"])
            else:
                n = count_words(req.get("prompt", req.get("content")))
            return self._reply(sock, 200, {"count": n, "tokens": list(range(n)), "max_model_len": a.max_model_len})
        if method == "POST" and path == "/_emitter/dump":
            return self._reply(sock, 200, self.dump(req.get("path") or a.stamps))
        if method == "POST" and path == "/_emitter/reset":
            self.requests.clear()
            self.events.clear()
            self.texts.clear()
            self.dropped = 0
            self.cpu0 = self._cpu()
            return self._reply(sock, 200, {"ok": True})
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            return self.stream(sock, conn, path, req, recv, arrived)
        return self._reply(sock, 404, {"error": {"message": f"no route {method} {path}"}})

    def stream(self, sock, conn: int, path: str, req: dict, recv: int, arrived: int | None = None) -> None:
        a = self.a
        chat = path.endswith("chat/completions")
        if not req.get("stream"):
            return self._reply(sock, 400, {"error": {"message": "the emitter only streams (stream: true)"}})
        if chat:
            msgs = req.get("messages") or []
            prompt_tokens = chat_tokens(msgs)
            last = msgs[-1].get("content") if msgs and isinstance(msgs[-1], dict) else ""
            head = last if isinstance(last, str) else json.dumps(last)
            full = json.dumps(msgs, sort_keys=True)
        else:
            p = req.get("prompt", "")
            p = p[0] if isinstance(p, list) and p and isinstance(p[0], str) else p
            prompt_tokens = count_words(p) if isinstance(p, str) else len(p)
            head = p if isinstance(p, str) else ""
            full = p if isinstance(p, str) else json.dumps(p)
        n_out = int(req.get("max_completion_tokens") or req.get("max_tokens") or a.default_tokens)
        so = req.get("stream_options") or {}
        mode = a.usage
        if mode == "request":
            mode = "per-chunk" if so.get("continuous_usage_stats") else "final" if so.get("include_usage") else "none"
        rid = next(self.rids)
        self.requests.append((rid, conn, path, recv, prompt_tokens, n_out, head[:120],
                              hashlib.sha1(full.encode()).hexdigest()[:16], arrived))
        rng = random.Random(a.seed * 1_000_003 + rid)
        sizes = chunk_sizes(a.tokens_per_chunk, n_out, rng)
        # generation times of every token, then each chunk is due with its last token
        # from the request's arrival where the kernel stamped it: the TTFT is the schedule's, however
        # late this thread read the request (a late read shows as the sender's lateness instead)
        gen, t = [], (recv if arrived is None else arrived) + self.ttft_ns
        for k in range(n_out):
            if k:
                g = self.interval_ns + (rng.randint(-self.jitter_ns, self.jitter_ns) if self.jitter_ns else 0)
                t += max(g, 0)
            gen.append(t)
        created = int(time.time())
        ident = f"{'chatcmpl' if chat else 'cmpl'}-em{rid}"
        obj = "chat.completion.chunk" if chat else "text_completion"
        pre = ('{"id":"%s","object":"%s","created":%d,"model":%s,"choices":[' %
               (ident, obj, created, json.dumps(a.model)))
        texts = []
        items = []
        seq = self.seq
        i = 0
        if chat:  # role-only chunk at once
            payload = (pre + '{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}')
            items.append((recv, next(seq), sock, rid, i, 0, http_chunk(b"data: " + payload.encode() + b"\n\n"), None))
            texts.append("")
            i += 1
        cum, w = 0, rid
        for size in sizes:
            words = []
            for _ in range(size):
                words.append(" " + WORDS[w % len(WORDS)])
                w += 7
            text = "".join(words)
            cum += size
            fin = '"length"' if cum == n_out else "null"
            if chat:
                choice = '{"index":0,"delta":{"content":%s},"finish_reason":%s}' % (json.dumps(text), fin)
            else:
                choice = '{"index":0,"text":%s,"logprobs":null,"finish_reason":%s}' % (json.dumps(text), fin)
            usage = ""
            if mode == "per-chunk":
                usage = ',"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}' % (
                    prompt_tokens, cum, prompt_tokens + cum)
            payload = pre + choice + "]" + usage + "}"
            items.append((gen[cum - 1], next(seq), sock, rid, i, size,
                          http_chunk(b"data: " + payload.encode() + b"\n\n"), None))
            texts.append(text)
            i += 1
        tail = b""
        if mode in ("final", "per-chunk"):
            u = ('{"id":"%s","object":"%s","created":%d,"model":%s,"choices":[],"usage":{"prompt_tokens":%d,'
                 '"completion_tokens":%d,"total_tokens":%d}}' % (ident, obj, created, json.dumps(a.model),
                                                                prompt_tokens, n_out, prompt_tokens + n_out))
            tail += http_chunk(b"data: " + u.encode() + b"\n\n")
        tail += http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        done = threading.Event()
        last_due = items[-1][0] if items else recv
        items.append((last_due, next(seq), sock, rid, i, 0, tail, done))
        texts.append("")
        self.texts[rid] = texts
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        self.schedule(items)
        # the connection's next request can only come after this stream ended
        done.wait(timeout=(last_due - time.monotonic_ns()) / 1e9 + 60)

    # ------------------------------------------------------------------ stamps
    def summary(self) -> dict:
        late = [e[4] - e[3] for e in self.events]
        return {"requests": len(self.requests), "events": len(self.events), "dropped": self.dropped,
                "lateness_ns": {"p50": pct(late, 0.5), "p99": pct(late, 0.99), "max": max(late) if late else None},
                "cpu_s": round(self._cpu() - self.cpu0, 3)}

    def dump(self, path: str | None) -> dict:
        s = self.summary()
        s["path"] = path
        if path:
            write_stamps(path, vars(self.a), s, list(self.requests), list(self.events), self.texts)
        return s


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--tok-per-s", type=float, default=50.0)
    ap.add_argument("--tokens-per-chunk", default="1", help="N, or var:LO-HI (seeded)")
    ap.add_argument("--usage", choices=("none", "final", "per-chunk", "request"), default="final")
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="emitter")
    ap.add_argument("--default-tokens", type=int, default=16)
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--cpu", type=int, default=None, help="pin the emitter to this CPU (sched_setaffinity)")
    ap.add_argument("--stamps", default=None, help="JSONL file written at exit and on POST /_emitter/dump")
    a = ap.parse_args(argv)
    if a.tokens_per_chunk.startswith("var:"):
        lo, hi = (int(x) for x in a.tokens_per_chunk[4:].split("-"))
        if not 1 <= lo <= hi:
            ap.error("--tokens-per-chunk var:LO-HI needs 1 <= LO <= HI")
    elif int(a.tokens_per_chunk) < 1:
        ap.error("--tokens-per-chunk must be >= 1")
    if a.tok_per_s <= 0:
        ap.error("--tok-per-s must be > 0")
    return a


def main(argv=None) -> None:
    a = parse_args(argv)
    sys.setswitchinterval(0.0002)   # the sender thread gets the GIL back quickly
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    em = Emitter(a)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.host, a.port))
    srv.listen(1024)
    threading.Thread(target=em.sender, name="sender", daemon=True).start()
    stopping = threading.Event()

    def on_signal(*_):
        stopping.set()
        with contextlib.suppress(OSError):
            srv.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            srv.close()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"http://{a.host}:{srv.getsockname()[1]}", flush=True)
    while not stopping.is_set():
        try:
            sock, _ = srv.accept()
        except OSError:
            break
        threading.Thread(target=em.serve_conn, args=(sock,), daemon=True).start()
    with em.cv:
        em.stop = True
        em.cv.notify()
    s = em.dump(a.stamps)
    print(json.dumps(s), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
