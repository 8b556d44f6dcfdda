"""Where the plugin's client spends its CPU per streamed token (the profile behind P2).

    .venv/bin/python benchmarks/hot_path.py [--tokens 2000] [--rate 1000] [--streams 1,64]

The emitter (pinned to CPU 0) streams one token per SSE event; the reader (this process,
pinned to CPU 1) reads them with one of these designs, and its own CPU per event is measured
with ``time.thread_time`` (this thread's user + system time: GIL waits of other threads are
not in it, syscalls are):

* ``plugin``: ``OpenAIClient.stream`` (httpx -> httpcore -> h11 chunked decoding ->
  ``SSEDecoder`` -> ``json.loads`` -> ``RecordBuilder``): the real path;
* ``httpx-raw``: ``httpx.Client.stream(...).iter_raw()``, counting events only: the
  transport's share;
* ``socket``: a blocking socket, ``recv`` + stamp, a minimal chunked-body and ``\\n\\n`` split
  and ``json.loads`` per event: the floor of a custom reader in pure Python.

With ``--streams N > 1`` each design runs N threads (the load engine's model) and the CPU of
all reader threads is summed.  Prints a table; ``--json`` writes it.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth import MODEL, Emitter, loadavg


def body(tokens: int, k: int) -> dict:
    return {"model": MODEL, "prompt": f"hot path {k} one two three", "max_tokens": tokens, "stream": True,
            "stream_options": {"include_usage": True}}


def plugin_reader(url: str):
    from pytest_llm_latency.client.transport.http import make_http_client
    from pytest_llm_latency.client.apis.openai import OpenAIClient

    http = make_http_client()
    client = OpenAIClient(http, url, MODEL, "completions", continuous_usage=False)

    def read(tokens: int, k: int) -> int:
        rec = client.stream("", f"hot path {k} one two three", tokens)
        return len(rec.chunks)
    return read


def httpx_reader(url: str):
    import httpx

    http = httpx.Client(timeout=60)

    def read(tokens: int, k: int) -> int:
        n = 0
        with http.stream("POST", url + "/v1/completions", json=body(tokens, k)) as r:
            for chunk in r.iter_raw():
                time.perf_counter_ns()
                n += chunk.count(b"data: {")
        return n - 1  # the usage chunk
    return read


def socket_reader(url: str):
    host, port = url.rsplit("/", 1)[-1].split(":")

    def read(tokens: int, k: int) -> int:
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = json.dumps(body(tokens, k)).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))
        buf, n, head_done, stamps = b"", 0, False, []
        while True:
            data = s.recv(65536)
            stamps.append(time.perf_counter_ns())
            if not data:
                break
            buf += data
            if not head_done:
                i = buf.find(b"\r\n\r\n")
                if i < 0:
                    continue
                buf, head_done = buf[i + 4:], True
            while True:  # chunked: size line, payload, CRLF
                j = buf.find(b"\r\n")
                if j < 0:
                    break
                size = int(buf[:j], 16)
                if len(buf) < j + 2 + size + 2:
                    break
                if size == 0:
                    s.close()
                    return n - 1
                part, buf = buf[j + 2:j + 2 + size], buf[j + 4 + size:]
                for ev in part.split(b"\n\n"):
                    if ev.startswith(b"data: {"):
                        json.loads(ev[6:])
                        n += 1
        s.close()
        return n - 1
    return read


DESIGNS = {"plugin": plugin_reader, "httpx-raw": httpx_reader, "socket": socket_reader}


def run(design: str, rate: float, tokens: int, streams: int) -> dict:
    with Emitter(tok_per_s=rate, ttft_ms=5, cpu=0) as em:
        read = DESIGNS[design](em.url)
        read(8, -1)  # warm: imports, a connection
        cpu, got = [0.0] * streams, [0] * streams

        def worker(i: int) -> None:
            c = time.thread_time()
            got[i] = read(tokens, i)
            cpu[i] = time.thread_time() - c

        mask = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {1})
        t0 = time.perf_counter()
        try:
            ts = [threading.Thread(target=worker, args=(i,)) for i in range(streams)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        finally:
            os.sched_setaffinity(0, mask)
        wall = time.perf_counter() - t0
        lateness = em.dump().summary["lateness_ns"]["p99"]
    events = sum(got)
    return {"design": design, "streams": streams, "events": events, "cpu_s": round(sum(cpu), 4),
            "us_per_event": round(sum(cpu) / events * 1e6, 1) if events else None, "wall_s": round(wall, 2),
            "emitter_lateness_ms_p99": (lateness or 0) / 1e6, "loadavg": loadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=1000.0, help="tok/s per stream")
    ap.add_argument("--streams", default="1,64")
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "hot_path.json"),
                    help="write the rows here (benchmarks/report.py reads it)")
    a = ap.parse_args()
    rows = []
    print("| design | streams | events | reader CPU µs/event | wall s | emitter lateness p99 ms | load |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for n in [int(x) for x in a.streams.split(",")]:
        for d in a.designs.split(","):
            tokens = a.tokens if n == 1 else max(64, a.tokens // n)
            r = run(d, a.rate if n == 1 else a.rate / 8, tokens, n)
            rows.append(r)
            print(f"| {d} | {n} | {r['events']} | {r['us_per_event']} | {r['wall_s']} | "
                  f"{r['emitter_lateness_ms_p99']:.2f} | {r['loadavg'][0]} |", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"benchmark": "hot_path", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
