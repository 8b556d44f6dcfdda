"""Is the emitter ever the bottleneck?  Its own send lateness and CPU at 128 streams x 50 tok/s
(and at higher multiples), read by a client that costs almost nothing.

    .venv/bin/python benchmarks/emitter_headroom.py [--streams 128] [--rates 50,100,200] [--tokens 150]

The reader is one asyncio task per stream on raw sockets that only counts ``data: {`` events
(no HTTP parsing, no JSON), so whatever lateness shows is the emitter's or the machine's.  For each
per-stream rate: the emitter's send lateness (``sent_ns - due_ns`` of every event) p50 / p99 / max,
its CPU seconds per event and the share of one core it used over the run, with the load average.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth import MODEL, Emitter, loadavg


async def one(port: int, k: int, tokens: int) -> int:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"model": MODEL, "prompt": f"r{k} a b", "max_tokens": tokens, "stream": True}).encode()
    w.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    n, tail = 0, b""
    while True:
        d = await r.read(65536)
        if not d:
            break
        n += d.count(b"data: {")
        tail = (tail + d)[-5:]
        if tail == b"0\r\n\r\n":
            break
    w.close()
    return n


def level(streams: int, rate: float, tokens: int) -> dict:
    la0 = loadavg()
    with Emitter(tok_per_s=rate) as em:
        port = int(em.url.rsplit(":", 1)[1])

        async def main():
            return await asyncio.gather(*(one(port, k, tokens) for k in range(streams)))
        t0 = time.perf_counter()
        got = asyncio.run(main())
        wall = time.perf_counter() - t0
        s = em.dump().summary
    late = s["lateness_ns"]
    return {"streams": streams, "tok_per_s_per_stream": rate, "events_per_s": round(sum(got) / wall),
            "events": s["events"], "lateness_ms": {k: (v or 0) / 1e6 for k, v in late.items()},
            "emitter_cpu_s": s["cpu_s"], "cpu_us_per_event": round(s["cpu_s"] / s["events"] * 1e6, 1),
            "core_share": round(s["cpu_s"] / wall, 3), "wall_s": round(wall, 2), "loadavg_before": la0,
            "loadavg_after": loadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--rates", default="50,100,200")
    ap.add_argument("--tokens", type=int, default=150)
    ap.add_argument("--json", default=str(Path(__file__).resolve().parent / "results" / "emitter_headroom.json"))
    a = ap.parse_args()
    rows = []
    for rate in [float(x) for x in a.rates.split(",")]:
        r = level(a.streams, rate, a.tokens)
        rows.append(r)
        print(f"{a.streams} x {rate:g} tok/s: {r['events_per_s']} events/s, lateness p50/p99/max "
              f"{r['lateness_ms']['p50']:.3f}/{r['lateness_ms']['p99']:.3f}/{r['lateness_ms']['max']:.3f} ms, "
              f"{r['cpu_us_per_event']} µs CPU/event, {r['core_share']:.2f} core, load {r['loadavg_before'][0]}",
              flush=True)
    Path(a.json).write_text(json.dumps({"benchmark": "emitter_headroom", "when": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
