"""Worker processes (``workers: N``, issue 28): per-token error and client CPU per token of a
closed loop of ``streams`` x 50 tok/s sent by 1 and by N worker processes, against the exact emitter.

    .venv/bin/python benchmarks/workers.py [--streams 128 256] [--workers 1 2] [--seconds 30]
        [--tokens 64] [--tok-per-s 50] [--json benchmarks/results/workers.json]
    .venv/bin/python benchmarks/workers.py --calibrate [--streams 16 32 48 64 96 128] [--seconds 15]

``--calibrate``: one process only (``workers: 1``), a row per ``--streams`` (ascending), and the
figure ``workers: auto`` sizes by -- the largest steady token events/s one process carried with a
per-token error p99 <= ``--bound-ms`` (1 ms) -- recorded under ``calibration`` in the JSON (the
constant is ``core.spec.worker_sizing.EVENTS_PER_S_PER_PROCESS``: copy it there, with the machine).

For each (streams, workers), in one run against one emitter (``benchmarks/emitter.py``, its own
process: TTFT 20 ms, ``--tok-per-s`` per stream, one token per SSE event, final usage chunk), the
plugin's own measurement path runs a closed loop at ``concurrency = streams``:
``drivers.registry.driver_for(make_workload(...)).measure(client, workload, Run(...))`` then
``core.checks.judge``, with ``workers: N`` (1: the one-process engine, as before; N > 1: spawned
worker processes, ``client/placement/processes/workers.py``).  ``samples`` is the steady-state requests of
``--seconds`` of wall time (streams x seconds / (TTFT + tokens / tok/s)); ``warmup: 1`` (each
worker warms its own connections one request at a time, so a larger warm-up would take minutes).

Reported per row:

* **per-token error p50 / p99** (ms): client receive stamp - emitter send stamp, both
  ``CLOCK_MONOTONIC`` of this host (``truth.check_clocks``), over every token of the measured
  (steady-state) requests; each record is matched to the emitter's request by the SHA-1 of its
  prompt and chunk *k* to token event *k* (``truth.plugin_errors``, as ``fidelity.py``).  The
  records' prompts: one process -- the ``one(prompt)`` the closed loop is given, wrapped; worker
  processes -- the schedule positions ``client.placement.processes.workers.merge`` receives (wrapped here, in the
  controller) into the prompts the driver handed out.  No change to the package.
* **steady CPU per token** (µs, the figure for the issue's <= 1.1x goal): the CPU seconds of the
  controller plus every worker process (``/proc/<pid>/stat``, sampled every 0.2 s by a thread of
  the controller, interpolated) over the steady-state window -- from the first measured request's
  send to the last one's end, every stream in flight throughout -- divided by the token events
  the emitter sent in that window.  Controller and workers are given apart.
* **whole-send CPU per token** (µs): (controller's ``RUSAGE_SELF`` + the reaped workers'
  ``RUSAGE_CHILDREN``) over the sample driver's whole ``send`` (prompt preparation, and the one-process
  engine's warm-up, come before it; the workers' spawn, imports and warm-up, the ramp and the drain are in it),
  divided by the token events the emitter sent in that interval: the start-up cost included,
  which a short row inflates.  The emitter is a child too, but it is only reaped at the end, so
  its CPU is in neither figure; it is reported from its own books.
* **tokens/s** in the steady window (and in the whole send, JSON), the plugin's own lag figures (``client_lag_ms_p99``,
  ``events_per_read``, ``client_limited``, each worker's ``client_lag_ms_p99`` / requests), the
  emitter's send lateness p99 (its health) and the machine: nproc, load average before and after,
  date.

Prints a Markdown table and writes ``--json``.  Bounded: one row of S seconds takes about S + 5-15 s
(prompt preparation, spawn, warm-up, drain).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity import machine
from truth import MODEL, Emitter, check_clocks, loadavg, plugin_errors

PROMPT_TOKENS = 32
TTFT_MS = 20.0


TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int | str) -> float | None:
    """utime + stime of a process (all its threads) from ``/proc``, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * TICK_S


class CpuSampler:
    """A thread sampling, every ``period`` s, the CPU seconds of this process plus each of its
    live worker processes (``multiprocessing.active_children``; the emitter is not one of them):
    ``at(t_ns)`` interpolates, so the steady-state window's CPU leaves out the workers' spawn,
    imports and warm-up and the drain after it.  ``/proc`` ticks: 10 ms resolution."""

    def __init__(self, period: float = 0.2):
        import threading

        self.period, self.series, self.stop = period, [], threading.Event()
        self.last: dict[int, float] = {}  # a worker's last reading: it still counts after it exits
        self.thread = threading.Thread(target=self._run, name="wbench-cpu", daemon=True)

    def sample(self) -> None:
        import multiprocessing

        for p in multiprocessing.active_children():
            v = proc_cpu_s(p.pid) if p.pid else None
            if v is not None:
                self.last[p.pid] = v
        own = proc_cpu_s("self") or 0.0
        self.series.append((time.monotonic_ns(), own, sum(self.last.values())))

    def _run(self) -> None:
        while not self.stop.wait(self.period):
            self.sample()

    def __enter__(self) -> "CpuSampler":
        self.sample()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self.sample()

    def at(self, t_ns: int) -> tuple[float, float]:
        """(controller, workers) CPU s at ``t_ns``, linearly between the samples around it."""
        s = self.series
        if t_ns <= s[0][0]:
            return s[0][1], s[0][2]
        for a, b in zip(s, s[1:]):
            if a[0] <= t_ns <= b[0]:
                f = (t_ns - a[0]) / max(b[0] - a[0], 1)
                return a[1] + f * (b[1] - a[1]), a[2] + f * (b[2] - a[2])
        return s[-1][1], s[-1][2]


def cpu_split() -> tuple[float, float]:
    """(this process's CPU s, its reaped children's CPU s)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


class Capture:
    """Wraps the closed loop's ``send`` (both engines) and ``client.placement.processes.workers.merge`` for one measurement:
    the CPU and the monotonic interval of the send, and (prompt text, outcome) of every request."""

    def __init__(self):
        from pytest_llm_latency.client.placement.processes import workers as workers_mod
        from pytest_llm_latency.client.drivers.closed_loop import ClosedLoop
        from pytest_llm_latency.client.drivers.workers import WorkerClosedLoop

        self.mod, self.classes = workers_mod, (ClosedLoop, WorkerClosedLoop)
        self.saved = (ClosedLoop.send, WorkerClosedLoop.send, workers_mod.merge)
        self.pairs: list = []
        self.samples: list = []
        self.cpu0 = self.cpu1 = (0.0, 0.0)
        self.t0 = self.t1 = 0

    def __enter__(self) -> "Capture":
        cap = self
        closed_send, worker_send, merge = self.saved

        def timed(send, wrap_one: bool):
            def wrapper(driver, one, samples, *a, **kw):
                cap.samples = list(samples)
                if wrap_one:
                    inner = one

                    def one(p, *args, **kwargs):
                        out = inner(p, *args, **kwargs)
                        cap.pairs.append((p.text, out))
                        return out
                cap.cpu0, cap.t0 = cpu_split(), time.monotonic_ns()
                try:
                    return send(driver, one, samples, *a, **kw)
                finally:
                    cap.t1, cap.cpu1 = time.monotonic_ns(), cpu_split()
            return wrapper

        def merging(shards, results, failures):
            for r in results.values():  # positions index the prompts the driver handed out (client.placement.processes.workers)
                for pos, out in (*r.outcomes, *r.ramp, *r.drain):
                    cap.pairs.append((cap.samples[pos].text, out))
            return merge(shards, results, failures)

        self.classes[0].send = timed(closed_send, True)
        self.classes[1].send = timed(worker_send, False)
        self.mod.merge = merging
        return self

    def __exit__(self, *exc) -> None:
        self.classes[0].send, self.classes[1].send, self.mod.merge = self.saved


def samples_for(streams: int, seconds: float, tokens: int, tok_per_s: float) -> int:
    return max(streams, math.ceil(streams * seconds / (TTFT_MS / 1e3 + tokens / tok_per_s)))


def one_row(em: Emitter, streams: int, workers: int, seconds: float, tokens: int) -> dict:
    from pytest_llm_latency.client.drivers.base import Run
    from pytest_llm_latency.client.drivers.registry import driver_for
    from pytest_llm_latency.client.transport.http import make_http_client
    from pytest_llm_latency.client.runner import Target, make_client
    from pytest_llm_latency.core.checks import judge
    from pytest_llm_latency.core.measure.record import RequestRecord
    from pytest_llm_latency.core.spec.workload import make_workload

    spec = {"prompt_tokens": PROMPT_TOKENS, "output_tokens": tokens, "concurrency": streams, "warmup": 1,
            "samples": samples_for(streams, seconds, tokens, em.tok_per_s), "confidence": None,
            "slo": {"e2e_p95": "600s"}, "workers": workers}
    em.reset()
    row: dict = {"streams": streams, "workers": workers, "tok_per_s": em.tok_per_s, "tokens": tokens,
                 "samples": spec["samples"], "loadavg_before": loadavg(),
                 "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    workload = make_workload(f"s{streams}w{workers}", spec)
    t_start = time.perf_counter()
    with make_http_client(pool_size=max(streams, 16)) as http, Capture() as cap, CpuSampler() as sampler:
        client = make_client(Target(em.url, "openai-completions", MODEL), http)
        res = judge(driver_for(workload).measure(client, workload, Run(seed=0, nonce=f"wbench-{streams}-{workers}")))
    row["wall_s"] = round(time.perf_counter() - t_start, 2)
    truth = em.dump()
    row["loadavg_after"] = loadavg()
    row["verdict"], row["errors"] = res.verdict, list(res.errors)
    measured = {id(r) for r in res.records}
    pairs = [(t, r) for t, r in cap.pairs if isinstance(r, RequestRecord) and id(r) in measured]
    errs = plugin_errors(pairs, truth)
    row.update({k: errs[k] for k in ("token_error_ms", "first_token_error_ms", "token_error_max_ms", "matched",
                                     "unmatched", "emitter_write_ms")})
    if workers > 1:  # each worker's own share of the error (its records, matched the same way)
        by: dict = {}
        for t, r in pairs:
            by.setdefault(r.worker, []).append((t, r))
        row["token_error_ms_by_worker"] = {w: plugin_errors(ps, truth)["token_error_ms"] for w, ps in sorted(by.items())}
    # every token the emitter sent while the driver was sending: what the client read in that interval
    tok = sum(e["tok"] for evs in truth.events.values() for e in evs if cap.t0 <= e["sent_ns"] <= cap.t1)
    send_s = (cap.t1 - cap.t0) / 1e9
    ctrl, kids = cap.cpu1[0] - cap.cpu0[0], cap.cpu1[1] - cap.cpu0[1]
    row.update({"send_s": round(send_s, 2), "tokens_in_send": tok, "tokens_per_s": round(tok / send_s) if send_s else None,
                "cpu_s": {"controller": round(ctrl, 3), "workers": round(kids, 3), "total": round(ctrl + kids, 3)},
                "cpu_us_per_token": round((ctrl + kids) / tok * 1e6, 1) if tok else None,
                "core_share": round((ctrl + kids) / send_s, 2) if send_s else None})
    # the steady state: from the first measured request's send to the last one's end (every stream
    # in flight throughout: the closed loop's window), CPU from the sampler, tokens from the emitter
    ends = [r.t_end_ns for _, r in pairs if r.t_end_ns is not None]
    if pairs and ends:
        w0, w1 = min(r.t_send_ns for _, r in pairs), max(ends)
        (c0, k0), (c1, k1) = sampler.at(w0), sampler.at(w1)
        wtok = sum(e["tok"] for evs in truth.events.values() for e in evs if w0 <= e["sent_ns"] <= w1)
        ws = (w1 - w0) / 1e9
        row["steady"] = {"window_s": round(ws, 2), "tokens": wtok, "tokens_per_s": round(wtok / ws) if ws else None,
                         "cpu_s": {"controller": round(c1 - c0, 3), "workers": round(k1 - k0, 3)},
                         "cpu_us_per_token": round((c1 - c0 + k1 - k0) / wtok * 1e6, 1) if wtok else None,
                         "core_share": round((c1 - c0 + k1 - k0) / ws, 2) if ws else None}
    c = res.client.to_json()
    row["client"] = {k: v for k, v in c.items() if k.startswith(("client", "events", "bursts"))}
    row["worker_lag"] = list(res.load.worker_lag) if res.load is not None else []
    row["emitter"] = {"lateness_ms_p99": (truth.summary["lateness_ns"]["p99"] or 0) / 1e6,
                      "cpu_s": truth.summary["cpu_s"], "events": truth.summary["events"]}
    return row


def fmt(x, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def table(rows: list[dict]) -> str:
    out = ["| streams | workers | per-token err p50 / p99 / max ms | matched | steady tok/s | steady CPU µs/token "
           "(ctrl + workers s) | core share | whole-send CPU µs/token | client lag p99 ms (per worker) | events/read "
           "| emitter late p99 ms | load before/after | verdict |",
           "|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for r in rows:
        te = r["token_error_ms"]
        lag = fmt(r["client"].get("client_lag_ms_p99"), ".2f")
        if r["worker_lag"]:
            lag += " (" + ", ".join(fmt(w.get("client_lag_ms_p99"), ".2f") for w in r["worker_lag"]) + ")"
        st = r.get("steady") or {"tokens_per_s": None, "cpu_us_per_token": None, "core_share": None,
                                 "cpu_s": {"controller": float("nan"), "workers": float("nan")}}
        cpu = st["cpu_s"]
        out.append(f"| {r['streams']} | {r['workers']} | {fmt(te['p50'])} / {fmt(te['p99'])} / "
                   f"{fmt(r['token_error_max_ms'], '.2f')} | {r['matched']} | {fmt(st['tokens_per_s'], ',')} | "
                   f"{fmt(st['cpu_us_per_token'], '.1f')} ({cpu['controller']:.2f} + {cpu['workers']:.2f}) | "
                   f"{fmt(st['core_share'], '.2f')} | {fmt(r['cpu_us_per_token'], '.1f')} | {lag} | "
                   f"{fmt(r['client'].get('events_per_read'), '.2f')} | "
                   f"{r['emitter']['lateness_ms_p99']:.2f} | {r['loadavg_before'][0]} / {r['loadavg_after'][0]} | "
                   f"{r['verdict']} |")
    return "\n".join(out)


def calibration(rows: list[dict], bound_ms: float) -> dict:
    """The events/s one process carries under the per-token error bound: the largest steady
    tokens/s of a one-process row whose per-token error p99 <= ``bound_ms`` (None: no row held it)."""
    held = [r for r in rows if r["workers"] == 1 and r["token_error_ms"]["p99"] is not None
            and r["token_error_ms"]["p99"] <= bound_ms and (r.get("steady") or {}).get("tokens_per_s")]
    best = max(held, key=lambda r: r["steady"]["tokens_per_s"], default=None)
    return {"bound_ms": bound_ms, "events_per_s_per_process": best["steady"]["tokens_per_s"] if best else None,
            "at_streams": best["streams"] if best else None,
            "rows": [{"streams": r["streams"], "steady_tokens_per_s": (r.get("steady") or {}).get("tokens_per_s"),
                      "token_error_ms_p99": r["token_error_ms"]["p99"], "loadavg_before": r["loadavg_before"]}
                     for r in rows if r["workers"] == 1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                    help="worker counts; 1 (the one-process peer) is always run first")
    ap.add_argument("--seconds", type=float, default=30.0, help="steady-state wall time a row aims at")
    ap.add_argument("--tokens", type=int, default=64, help="output tokens per request")
    ap.add_argument("--tok-per-s", type=float, default=50.0, help="per stream")
    ap.add_argument("--calibrate", action="store_true",
                    help="one process only, a row per --streams: the events/s it carries at a per-token error "
                         "p99 <= --bound-ms (core.spec.worker_sizing.EVENTS_PER_S_PER_PROCESS)")
    ap.add_argument("--bound-ms", type=float, default=1.0, help="--calibrate: the per-token error p99 bound")
    ap.add_argument("--json", default=str(Path(__file__).resolve().parent / "results" / "workers.json"))
    a = ap.parse_args()
    check_clocks()
    counts = [1] if a.calibrate else [1] + sorted({w for w in a.workers if w != 1})
    streams_list = sorted(a.streams) if a.calibrate else a.streams
    rows = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp, Emitter(tok_per_s=a.tok_per_s, ttft_ms=TTFT_MS, workdir=Path(tmp)) as em:
        for streams in streams_list:
            for n in counts:
                row = one_row(em, streams, n, a.seconds, a.tokens)
                rows.append(row)
                te = row["token_error_ms"]
                print(f"streams {streams} workers {n}: per-token err p50/p99 {fmt(te['p50'])}/{fmt(te['p99'])} ms, "
                      f"{fmt((row.get('steady') or {}).get('cpu_us_per_token'), '.1f')} µs/token steady "
                      f"({fmt(row['cpu_us_per_token'], '.1f')} whole send), {row['verdict']}, load "
                      f"{row['loadavg_before'][0]}", flush=True)
    out = {"benchmark": "workers", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
           "duration_s": round(time.time() - t0, 1), "argv": sys.argv[1:],
           "machine": {**machine(), "nproc": len(os.sched_getaffinity(0))}, "rows": rows}
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    if a.calibrate:  # added to the JSON under ``calibration``: the comparison rows already there stay
        cal = {**calibration(rows, a.bound_ms), "when": out["when"], "argv": out["argv"], "machine": out["machine"],
               "tok_per_s": a.tok_per_s, "tokens": a.tokens, "seconds": a.seconds}
        print(f"calibration: {cal['events_per_s_per_process']} events/s per process at a per-token "
              f"error p99 <= {a.bound_ms:g} ms (streams {cal['at_streams']})", flush=True)
        path = Path(a.json)
        out = {**(json.loads(path.read_text()) if path.exists() else {"benchmark": "workers"}), "calibration": cal}
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(table(rows))
        print(f"\nwrote {a.json} (calibration)")
        return
    Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    m = out["machine"]
    print(f"\nRecorded {out['when']} ({out['duration_s']} s), nproc {m['nproc']} ({m['cpu_model']}), Python "
          f"{m['python']}; emitter TTFT {TTFT_MS:.0f} ms, {a.tok_per_s:g} tok/s per stream, {a.tokens} tokens per "
          f"request, closed loop, ~{a.seconds:g} s per row\n")
    print(table(rows))
    print(f"\nwrote {a.json}")


if __name__ == "__main__":
    main()
