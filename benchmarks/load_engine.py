"""Load-engine design: threads (one blocking ``httpx.Client`` stream each) vs asyncio
(``httpx.AsyncClient``; also on uvloop where it is installed), all reading the same SSE streams
from the reference target.

    .venv/bin/python benchmarks/load_engine.py [--streams 128] [--tokens 64] [--repeat 2]
        [--time-scale 2]

The reference server (``serve-reference`` in its own process, h100-sxm / llama-3.1-8b,
``max_num_seqs`` = streams) streams ``--tokens`` tokens to each of ``--streams`` concurrent
requests.  Each client stamps every socket read (``perf_counter_ns``) before splitting it
into SSE events, like the plugin's adapters.  Reported per design (median of ``--repeat``):

* ``client CPU µs/event``: the client process's CPU time (user + sys) / token events;
* ``ITL error``: the clients' mean ITL ((last - first) / (n - 1), per stream) against the
  server's own modelled mean ITL (``/metrics`` ``vllm:inter_token_latency_seconds`` sum/count):
  how much the client distorts what it measures;
* ``lag p99``: how late a 5 ms ticker in the client woke (the client's scheduling delay);
* ``events/read``: token events per socket read (bunching by a busy client).
"""
from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

sys.path.insert(0, ".")
from pytest_llm_latency.client.load import LagMonitor
from pytest_llm_latency.client.server_view import fetch_sample
from pytest_llm_latency.targets.reference.launch import start_reference

BODY = {"model": "llama-3.1-8b", "prompt": "hello " * 64, "stream": True, "ignore_eos": True}


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def events(buf: bytes) -> int:
    return buf.count(b"data: {")


def stream_sync(http: httpx.Client, url: str, tokens: int) -> tuple[list[int], int]:
    stamps, reads = [], 0
    with http.stream("POST", url + "/v1/completions", json={**BODY, "max_tokens": tokens}) as r:
        for chunk in r.iter_raw():
            t = time.perf_counter_ns()
            reads += 1
            stamps += [t] * events(chunk)
    return stamps, reads


async def stream_async(http: httpx.AsyncClient, url: str, tokens: int) -> tuple[list[int], int]:
    stamps, reads = [], 0
    async with http.stream("POST", url + "/v1/completions", json={**BODY, "max_tokens": tokens}) as r:
        async for chunk in r.aiter_raw():
            t = time.perf_counter_ns()
            reads += 1
            stamps += [t] * events(chunk)
    return stamps, reads


def run_threads(url: str, n: int, tokens: int):
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    with httpx.Client(limits=limits, timeout=120) as http, ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda _: stream_sync(http, url, tokens), range(n)))


def run_asyncio(url: str, n: int, tokens: int, loop_factory=None):
    async def main():
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        async with httpx.AsyncClient(limits=limits, timeout=120) as http:
            return await asyncio.gather(*(stream_async(http, url, tokens) for _ in range(n)))
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main())


def run_uvloop(url: str, n: int, tokens: int):
    import uvloop

    return run_asyncio(url, n, tokens, loop_factory=uvloop.new_event_loop)


def server_itl_ms(url: str, before) -> float:
    with httpx.Client() as http:
        after = fetch_sample(http, url)
    name = "vllm:inter_token_latency_seconds"
    a, b = after.histograms[name], before.histograms[name]
    return (a.sum - b.sum) / (a.count - b.count) * 1000.0


def one(design: str, url: str, n: int, tokens: int) -> dict:
    with httpx.Client() as http:
        before = fetch_sample(http, url)
    run = {"threads": run_threads, "asyncio": run_asyncio, "asyncio-uvloop": run_uvloop}[design]
    c0, t0 = cpu_s(), time.perf_counter()
    with LagMonitor() as mon:
        results = run(url, n, tokens)
    cpu, wall = cpu_s() - c0, time.perf_counter() - t0
    ev = sum(len(s) for s, _ in results)
    reads = sum(r for _, r in results)
    itls = [(s[-1] - s[0]) / (len(s) - 1) / 1e6 for s, _ in results if len(s) > 1]
    truth = server_itl_ms(url, before)
    lag = sorted(mon.samples)
    return {"cpu_us_per_event": cpu / ev * 1e6, "itl_error_pct": (statistics.fmean(itls) / truth - 1) * 100,
            "lag_p99_ms": lag[int(0.99 * (len(lag) - 1))] / 1e6 if lag else float("nan"),
            "events_per_read": ev / reads, "events": ev, "wall_s": wall, "server_itl_ms": truth}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--time-scale", type=float, default=2.0)
    a = ap.parse_args()
    url = f"reference://h100-sxm/llama-3.1-8b?max_num_seqs={a.streams}&time_scale={a.time_scale}"
    with start_reference(url, mode="subprocess") as h:
        run_threads(h.url, 4, 4)  # warm: connections, imports
        rows: dict[str, list[dict]] = {"threads": [], "asyncio": []}
        try:
            import uvloop  # noqa: F401 - optional: the uvloop row only where it is installed
            rows["asyncio-uvloop"] = []
        except ImportError:
            print("uvloop not installed: no asyncio-uvloop row")
        for _ in range(a.repeat):
            for design in rows:
                rows[design].append(one(design, h.url, a.streams, a.tokens))
    print(f"{a.streams} streams x {a.tokens} tokens, time_scale {a.time_scale}, median of {a.repeat}")
    print("| design | client CPU µs/event | ITL error vs server | lag p99 ms | events/read | wall s |")
    print("|---|---:|---:|---:|---:|---:|")
    for design, rs in rows.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(f"| {design} | {med['cpu_us_per_event']:.0f} | {med['itl_error_pct']:+.1f} % | "
              f"{med['lag_p99_ms']:.2f} | {med['events_per_read']:.2f} | {med['wall_s']:.1f} |")


if __name__ == "__main__":
    main()
