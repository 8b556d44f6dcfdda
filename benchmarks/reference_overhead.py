"""Own overhead of the reference server: streamed tokens/s with no modelled delay, vs peers.

    .venv/bin/python benchmarks/reference_overhead.py [--tokens 2000] [--concurrency 1,8]
        [--repeat 3] [--peer-python /path/to/python-with-starlette-uvicorn]

Every server runs in its own process pinned to CPU 0 (``sched_setaffinity``); the
load generator is pinned to CPU 1 and is a raw asyncio HTTP/1.1 client that only counts
``data: {`` events, so it is never the bottleneck.  Servers, all streaming the same
~190-byte vLLM-shaped completion chunk per token over chunked HTTP/1.1 with keep-alive:

* ``reference``: ``pytest-llm-latency serve-reference --time-scale 0`` (the real thing:
  request parsing, tokenizer, engine steps, scheduler, per-token JSON, SSE framing);
* ``bare-asyncio``: asyncio streams, one pre-rendered chunk + ``json.dumps`` of the
  text per token and a ``sleep(0)`` yield per token (a token source) -- the floor of
  the stack the reference uses;
* ``http.server``: stdlib ``ThreadingHTTPServer``, one thread per connection;
* ``starlette-uvicorn`` (h11) and ``starlette-uvicorn-fast`` (httptools + uvloop):
  Starlette ``StreamingResponse`` of an async generator, run with ``--peer-python``
  (an interpreter that has starlette/uvicorn; skipped without it).

Reported: tokens/s (median of ``--repeat`` runs) and server CPU microseconds per token
(from /proc), each also as a ratio to ``bare-asyncio`` measured in the same run.  On a
shared machine tokens/s moves with the neighbours' load; CPU per token is the steadier
figure (the server's own cost), and what the stack choice was made on.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT_PRE = (b'data: {"id":"cmpl-0123456789abcdef0123456789abcdef","object":"text_completion",'
            b'"created":1700000000,"model":"llama-3.1-8b","choices":[{"index":0,"text":')
TEXT_POST = b',"logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n")


def event(i: int) -> bytes:
    return TEXT_PRE + json.dumps(" word%d" % (i % 10)).encode() + TEXT_POST


# -- peer servers (run as `--peer NAME`, print their URL, serve until killed) ------------------
async def _bare_asyncio() -> None:
    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                n = json.loads(await reader.readexactly(length))["max_tokens"]
                writer.write(HEAD)
                for i in range(n):
                    ev = event(i)
                    writer.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                    await writer.drain()
                    await asyncio.sleep(0)
                done = b"data: [DONE]\n\n"
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


def _http_server() -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            n = json.loads(self.rfile.read(int(self.headers["content-length"])))["max_tokens"]
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for i in range(n):
                ev = event(i)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
            done = b"data: [DONE]\n\n"
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
            self.wfile.flush()

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    print(f"http://127.0.0.1:{srv.server_address[1]}", flush=True)
    srv.serve_forever()


def _starlette(fast: bool) -> None:
    import socket

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def completions(request):
        n = (await request.json())["max_tokens"]

        async def gen():
            for i in range(n):
                yield event(i)
                await asyncio.sleep(0)         # a token source yields, like bare-asyncio
            yield b"data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    cfg = uvicorn.Config(app, log_level="warning", access_log=False, http="httptools" if fast else "h11",
                         loop="uvloop" if fast else "asyncio")
    uvicorn.Server(cfg).run(sockets=[sock])


# -- load generator ----------------------------------------------------------------------------
async def _one(reader, writer, host: str, n: int) -> int:
    body = json.dumps({"model": "llama-3.1-8b", "prompt": "hello world", "max_tokens": n,
                       "ignore_eos": True, "stream": True}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n%s" % (host.encode(), len(body), body))
    await reader.readuntil(b"\r\n\r\n")
    count, tail = 0, b""
    while True:
        chunk = await reader.read(262144)
        if not chunk:
            raise ConnectionError("server closed the stream")
        data = tail + chunk
        count += data.count(b"data: {") - tail.count(b"data: {")
        tail = data[-64:]
        if data.endswith(b"0\r\n\r\n") and b"[DONE]" in tail:
            return count


async def _load(url: str, concurrency: int, requests_each: int, n: int) -> tuple[int, float]:
    host, port = url.split("//")[1].split(":")
    conns = [await asyncio.open_connection(host, int(port)) for _ in range(concurrency)]
    await _one(*conns[0], host, 8)                       # warm-up

    async def worker(r, w):
        return sum([await _one(r, w, host, n) for _ in range(requests_each)])

    t0 = time.perf_counter()
    total = sum(await asyncio.gather(*(worker(r, w) for r, w in conns)))
    wall = time.perf_counter() - t0
    for _, w in conns:
        w.close()
    return total, wall


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(cmd: list[str]) -> tuple[subprocess.Popen, str]:
    pin = (lambda: os.sched_setaffinity(0, {0})) if hasattr(os, "sched_setaffinity") else None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=pin, cwd=ROOT)
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("http://"):
        proc.kill()
        raise RuntimeError(f"{cmd} did not start")
    return proc, line


def measure(name: str, cmd: list[str], args) -> list[dict]:
    proc, url = _start(cmd)
    rows = []
    try:
        for c in args.concurrency:
            runs = []
            for _ in range(args.repeat):
                cpu0 = _cpu_s(proc.pid)
                total, wall = asyncio.run(_load(url, c, args.requests, args.tokens))
                cpu = _cpu_s(proc.pid) - cpu0
                assert total == c * args.requests * args.tokens, (name, total)
                runs.append((total / wall, cpu / total * 1e6))
            rows.append({"server": name, "concurrency": c, "tok_s": statistics.median(r[0] for r in runs),
                         "cpu_us_per_tok": statistics.median(r[1] for r in runs)})
            print(f"  {name:28s} c={c:<3d} {rows[-1]['tok_s']:9.0f} tok/s  "
                  f"{rows[-1]['cpu_us_per_tok']:6.1f} us CPU/token", file=sys.stderr)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", choices=["asyncio", "threading", "starlette", "starlette-fast"], help=argparse.SUPPRESS)
    ap.add_argument("--tokens", type=int, default=2000, help="tokens per request")
    ap.add_argument("--requests", type=int, default=10, help="requests per connection per run")
    ap.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peer-python", help="interpreter with starlette + uvicorn (+ httptools, uvloop)")
    args = ap.parse_args()
    if args.peer == "asyncio":
        asyncio.run(_bare_asyncio())
        return 0
    if args.peer == "threading":
        _http_server()
        return 0
    if args.peer in ("starlette", "starlette-fast"):
        _starlette(args.peer == "starlette-fast")
        return 0
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {1})
    me = os.path.abspath(__file__)
    servers = [("reference", [sys.executable, "-m", "pytest_llm_latency.cli", "serve-reference", "--time-scale",
                              "0", "--port", "0"]),
               ("bare-asyncio", [sys.executable, me, "--peer", "asyncio"]),
               ("http.server", [sys.executable, me, "--peer", "threading"])]
    if args.peer_python:
        servers += [("starlette-uvicorn (h11)", [args.peer_python, me, "--peer", "starlette"]),
                    ("starlette-uvicorn (httptools+uvloop)", [args.peer_python, me, "--peer", "starlette-fast"])]
    print(f"load average before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    rows = [row for name, cmd in servers for row in measure(name, cmd, args)]
    base = {r["concurrency"]: r["tok_s"] for r in rows if r["server"] == "bare-asyncio"}
    print(f"\n{args.tokens} tokens/request, {args.requests} requests/connection, median of {args.repeat}; "
          f"load average after: {os.getloadavg()[0]:.2f}\n")
    cpu_base = {r["concurrency"]: r["cpu_us_per_tok"] for r in rows if r["server"] == "bare-asyncio"}
    print("| server | streams | tokens/s | tokens/s vs bare-asyncio | server CPU us/token | CPU/token vs bare-asyncio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        c = r["concurrency"]
        print(f"| {r['server']} | {c} | {r['tok_s']:,.0f} | {r['tok_s'] / base[c]:.2f} | "
              f"{r['cpu_us_per_tok']:.1f} | {r['cpu_us_per_tok'] / cpu_base[c]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
