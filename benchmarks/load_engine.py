"""Load-engine design: threads (one blocking ``httpx.Client`` stream each) vs asyncio
(``httpx.AsyncClient``; also on uvloop where it is installed), all reading the same SSE streams
from the reference target.

    .venv/bin/python benchmarks/load_engine.py [--streams 128] [--tokens 64] [--repeat 2]
        [--time-scale 2] [--designs threads,asyncio,plugin] [--plugin-streams 64,128,200]
        [--json benchmarks/results/load_engine.json --label before]

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

The ``plugin`` design is the plugin's real path instead (``truth.run_plugin``: ``client.runner.measure``,
``OpenAIClient`` over ``make_http_client``, the load engine with its lag monitor and GIL switch
interval), against the exact emitter (``benchmarks/emitter.py``, its own process, unpinned: both
share the machine's cores) at ``--plugin-streams`` streams x ``--tok-per-s`` (one token per SSE event,
128 tokens a request).  Per stream count it reports the process CPU (``getrusage``, user + sys) per
token event, tok/s carried (the measured requests' token events / the span of their sends), and the
per-token error (receive stamp - the emitter's send stamp, ``truth.plugin_errors``) p50/p99.
``--json`` appends the rows, with the load average and the machine, under ``--label``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, ".")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from pytest_llm_latency.client.load.engine import LagMonitor
from pytest_llm_latency.client.server.server_view import fetch_sample
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


PLUGIN_TOKENS = 128
PLUGIN_PROMPT_TOKENS = 32


def plugin_row(streams: int, tok_per_s: float) -> dict:
    """The plugin's real path against the exact emitter: ``streams`` x ``tok_per_s``."""
    import tempfile

    from fidelity import machine
    from truth import Emitter, loadavg, plugin_errors, run_plugin

    with tempfile.TemporaryDirectory() as tmp, Emitter(tok_per_s=tok_per_s, workdir=Path(tmp)) as em:
        load0 = loadavg()
        pairs, facts = run_plugin(em.url, streams, streams, PLUGIN_PROMPT_TOKENS, PLUGIN_TOKENS)
        truth = em.dump()
    err = plugin_errors(pairs, truth)
    carried = busiest_second(truth)
    tokens = facts["tokens_all"]
    return {"design": "plugin", "streams": streams, "tok_per_s_per_stream": tok_per_s,
            "nominal_tok_per_s": streams * tok_per_s, "carried_tok_per_s": carried,
            "cpu_us_per_token": round(facts["cpu_s"] / tokens * 1e6, 1),
            "stream_cpu_us_per_token": round(facts["stream_cpu_s"] / tokens * 1e6, 1),
            "core_share": round(facts["cpu_s"] / facts["wall_s"], 3), "tokens": tokens,
            "token_error_ms": err["token_error_ms"], "token_error_max_ms": err["token_error_max_ms"],
            "first_token_error_ms": err["first_token_error_ms"], "matched": err["matched"],
            "unmatched": err["unmatched"], "client": facts["extra"], "wall_s": round(facts["wall_s"], 2),
            "emitter_lateness_ms_p99": (truth.summary["lateness_ns"]["p99"] or 0) / 1e6,
            "loadavg_before": load0, "loadavg_after": loadavg(), "machine": machine()}


def busiest_second(truth) -> int | None:
    """Token events the emitter sent in the busiest whole second of the run (steady state at
    full concurrency: what the client was carrying then)."""
    sends = sorted(e["sent_ns"] for _, toks in truth.streams() for e in toks)
    if not sends or sends[-1] - sends[0] < 1e9:
        return None
    best, lo = 0, 0
    for hi, t in enumerate(sends):
        while t - sends[lo] >= 1e9:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def plugin_rows(a: argparse.Namespace) -> list[dict]:
    from truth import check_clocks

    check_clocks()
    if a.switch_interval_ms is not None:
        from pytest_llm_latency.client.load import engine as load
        load.SWITCH_INTERVAL_S = a.switch_interval_ms / 1000.0
    rows = []
    for n in [int(x) for x in a.plugin_streams.split(",")]:
        for _ in range(a.repeat):
            r = plugin_row(n, a.tok_per_s)
            r["switch_interval_ms"] = a.switch_interval_ms
            rows.append(r)
            e = r["token_error_ms"]
            print(f"plugin {n:>4} streams x {a.tok_per_s:g} tok/s: carried {r['carried_tok_per_s']} tok/s, "
                  f"CPU {r['cpu_us_per_token']} µs/token (stream threads {r['stream_cpu_us_per_token']}), "
                  f"core share {r['core_share']}, error p50 {e['p50']:.3f} p99 {e['p99']:.3f} ms, "
                  f"lag p99 {r['client'].get('client_lag_ms_p99')} ms, load {r['loadavg_before']}", flush=True)
    return rows


def save(path: str, label: str, rows: list[dict]) -> None:
    p = Path(path)
    out = json.loads(p.read_text()) if p.exists() else {"benchmark": "load_engine", "runs": []}
    out["runs"].append({"label": label, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows})
    p.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {p} ({label})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--time-scale", type=float, default=2.0)
    ap.add_argument("--designs", default="threads,asyncio,plugin")
    ap.add_argument("--plugin-streams", default="64,128,200")
    ap.add_argument("--tok-per-s", type=float, default=50.0, help="per stream, the plugin design")
    ap.add_argument("--switch-interval-ms", type=float, default=None,
                    help="the plugin design: override client.load.engine.SWITCH_INTERVAL_S")
    ap.add_argument("--json", default=None, help="append the plugin rows here")
    ap.add_argument("--label", default="run")
    a = ap.parse_args()
    designs = a.designs.split(",")
    if "plugin" in designs:
        rows = plugin_rows(a)
        if a.json:
            save(a.json, a.label, rows)
        designs.remove("plugin")
    if designs:
        bare(a, designs)


def bare(a: argparse.Namespace, designs: list[str]) -> None:
    url = f"reference://h100-sxm/llama-3.1-8b?max_num_seqs={a.streams}&time_scale={a.time_scale}"
    with start_reference(url, mode="subprocess") as h:
        run_threads(h.url, 4, 4)  # warm: connections, imports
        rows: dict[str, list[dict]] = {d: [] for d in designs}
        try:
            import uvloop  # noqa: F401 - optional: the uvloop row only where it is installed
            if "asyncio" in designs:
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
