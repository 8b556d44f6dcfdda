"""Shared by the fidelity and capacity benchmarks: the emitter as a child process, the ground
truth from its stamps, the plugin's client run against it, and small statistics helpers.

Not a benchmark itself.  Clocks: the emitter stamps ``time.monotonic_ns()``; the plugin's
client stamps ``time.perf_counter_ns()``; on Linux both are ``CLOCK_MONOTONIC`` (checked in
``check_clocks``), so a receive stamp minus a send stamp is a latency, across processes.
"""
from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
from emitter import load_stamps  # noqa: E402

MODEL = "llama-3.1-8b"


def check_clocks() -> None:
    for name in ("perf_counter", "monotonic"):
        impl = time.get_clock_info(name).implementation
        if impl != "clock_gettime(CLOCK_MONOTONIC)":
            raise SystemExit(f"time.{name} is {impl}, not CLOCK_MONOTONIC: client and emitter stamps are not "
                             f"comparable on this platform")


def pct(xs, q: float) -> float | None:
    """Nearest-rank-ish percentile (linear interpolation), None for an empty sample."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def p50_p99(xs) -> dict:
    return {"p50": pct(xs, 0.5), "p99": pct(xs, 0.99), "n": len(xs)}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@dataclass
class Emitter:
    """``benchmarks/emitter.py`` in its own process; ``dump()`` returns its stamps."""

    tok_per_s: float = 50.0
    ttft_ms: float = 20.0
    tokens_per_chunk: str = "1"
    usage: str = "final"
    cpu: int | None = None
    workdir: Path = field(default_factory=lambda: Path("/tmp"))
    url: str = ""

    def __enter__(self) -> "Emitter":
        self.stamps = self.workdir / f"emitter-{os.getpid()}-{time.monotonic_ns()}.jsonl"
        cmd = [sys.executable, str(HERE / "emitter.py"), "--port", "0", "--ttft-ms", str(self.ttft_ms),
               "--tok-per-s", str(self.tok_per_s), "--tokens-per-chunk", self.tokens_per_chunk, "--usage", self.usage,
               "--model", MODEL, "--default-tokens", "64", "--stamps", str(self.stamps)]
        if self.cpu is not None:
            cmd += ["--cpu", str(self.cpu)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()  # the emitter prints its URL first, or dies
        if not line.startswith("http://"):
            self.proc.kill()
            raise SystemExit(f"emitter did not start: {line!r}")
        self.url = line
        return self

    def _post(self, path: str) -> dict:
        import httpx

        return httpx.post(self.url + path, json={}, timeout=30).json()

    def reset(self) -> None:
        self._post("/_emitter/reset")

    def dump(self) -> "Truth":
        summary = self._post("/_emitter/dump")
        meta, requests, events = load_stamps(str(self.stamps))
        return Truth(summary, requests, events)

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.stamps.unlink(missing_ok=True)


@dataclass
class Truth:
    summary: dict                      # the emitter's own: lateness, cpu_s, events
    requests: dict[int, dict]
    events: dict[int, list[dict]]

    def streams(self, min_tokens: int = 2) -> list[tuple[dict, list[dict]]]:
        """(request, token events) for requests with at least ``min_tokens`` tokens (probes out)."""
        out = []
        for rid, req in self.requests.items():
            toks = [e for e in self.events.get(rid, []) if e["tok"] > 0]
            if req["max_tokens"] >= min_tokens and len(toks) == len(
                    [1 for e in self.events.get(rid, []) if e["tok"] > 0]) and toks:
                out.append((req, toks))
        return out

    def ttft_ms(self, min_tokens: int = 2) -> list[float]:
        return [(t[0]["sent_ns"] - start_ns(r)) / 1e6 for r, t in self.streams(min_tokens)]

    def itl_ms(self, min_tokens: int = 2) -> list[float]:
        """Gaps between consecutive token events' send stamps, divided over the later event's
        tokens (exact per token when there is one token per event)."""
        out = []
        for _, toks in self.streams(min_tokens):
            for a, b in zip(toks, toks[1:]):
                out += [(b["sent_ns"] - a["sent_ns"]) / 1e6 / b["tok"]] * b["tok"]
        return out

    def by_sha(self) -> dict[str, int]:
        return {r["prompt_sha1"]: rid for rid, r in self.requests.items()}


def start_ns(req: dict) -> int:
    """When a request reached the emitter: the kernel's arrival stamp of its last byte where the
    emitter has one (``arrived_ns``), else when its handler had read it (``recv_ns``, later by the
    emitter's own wake-up)."""
    return req["arrived_ns"] if req.get("arrived_ns") is not None else req["recv_ns"]


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def run_plugin(url: str, concurrency: int, samples: int, prompt_tokens: int, output_tokens: int,
               warmup: int | None = None, stamp: str = "kernel") -> tuple[list, dict]:
    """The plugin's own measurement path (``client.runner.measure``: prompt preparation, warm-up,
    the load engine) against ``url``; returns the (prompt text, RequestRecord) pairs of the
    measured samples and the run's facts (CPU, wall, the result's stats, the stamp the reads had and
    the bound the result reported).  ``stamp="read"`` turns kernel arrival stamps off (as on TLS or
    a platform without them) to calibrate the fallback's bound."""
    from pytest_llm_latency.client.transport.http import make_http_client
    from pytest_llm_latency.client.apis.openai import OpenAIClient
    from pytest_llm_latency.client.transport.recv_stamp import use_kernel_stamps
    from pytest_llm_latency.client.runner import measure
    from pytest_llm_latency.core.checks import judge
    from pytest_llm_latency.core.measure.record import RequestRecord
    from pytest_llm_latency.core.spec.load_spec import default_workers
    from pytest_llm_latency.core.spec.workload import Workload

    seen: list = []
    stream_cpu = [0.0]

    class Recording(OpenAIClient):
        def stream(self, system, user, max_tokens, **kw):
            c = time.thread_time()  # this thread's CPU: the stream path's own cost, GIL waits excluded
            rec = super().stream(system, user, max_tokens, **kw)
            stream_cpu[0] += time.thread_time() - c
            if isinstance(rec, RequestRecord):
                seen.append((system + user, rec))
            return rec

    use_kernel_stamps(stamp == "kernel")
    http = make_http_client(pool_size=max(concurrency, 16))
    client = Recording(http, url, MODEL, "completions")
    wl = Workload(name=f"c{concurrency}", klass="custom", prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                  samples=samples, warmup=concurrency if warmup is None else warmup, concurrency=concurrency)
    wl = default_workers(wl)  # the plugin's default, as a YAML or marker workload gets it (workers: auto)
    c0, t0 = cpu_self(), time.perf_counter()
    res = judge(measure(client, wl, seed=0))
    cpu, wall = cpu_self() - c0, time.perf_counter() - t0
    http.close()
    use_kernel_stamps(True)
    recs = [r for r in res.records] if hasattr(res, "records") else []
    sampled = {id(r) for r in recs}
    pairs = [(t, r) for t, r in seen if id(r) in sampled] if sampled else seen
    tokens = sum(r.output_tokens for _, r in seen)
    facts = {"cpu_s": cpu, "stream_cpu_s": stream_cpu[0], "wall_s": wall, "tokens_all": tokens, "samples": len(pairs),
             "lag_p99_ms": res.client.client_lag_ms_p99,
             "stamp": res.measurement.stamp, "workers": res.load.workers, "workers_reason": res.load.workers_reason,
             "result": res,  # the judged WorkloadResult (not written to JSON)
             "extra": {k: v for k, v in res.client.to_json().items()
                       if k.startswith(("client", "events", "stamp_bound", "read_delay"))}}
    return pairs, facts


def plugin_errors(pairs: list, truth: Truth) -> dict:
    """Per-token and first-token error (client receive stamp - emitter send stamp, ms) over the
    matched samples, the plugin's TTFT / per-token gaps for the percentile comparison, and how
    long the emitter's writes took (``wrote_ns - sent_ns``: the bound on the emitter's share)."""
    index = truth.by_sha()
    from pytest_llm_latency.core.measure.stamp_bounds import KERNEL_FLOOR_NS

    first, every, ttft, gaps, unmatched, write, least, ttft_err, beyond = [], [], [], [], 0, [], [], [], 0
    true_ttft, true_gaps, arrived = [], [], 0
    for text, rec in pairs:
        rid = index.get(sha(text))
        toks = [e for e in truth.events.get(rid, []) if e["tok"] > 0] if rid is not None else []
        if not toks or len(toks) != len(rec.chunks):
            unmatched += 1
            continue
        errs = [(c.t_ns - e["sent_ns"]) / 1e6 for c, e in zip(rec.chunks, toks)]
        # the bytes reached the client's socket during the emitter's write (after sent, before wrote):
        # stamp - wrote is the least the client's own error can be
        least += [(c.t_ns - e["wrote_ns"]) / 1e6 for c, e in zip(rec.chunks, toks)]
        # each token against its own bound (core.measure.stamp_bounds: kernel floor + bound_ns; read stamps: the
        # run's read bound, checked by the caller): the tokens whose least error exceeds it
        if rec.stamp == "kernel":
            beyond += sum(1 for c, e in zip(rec.chunks, toks)
                          if c.t_ns - e["wrote_ns"] > KERNEL_FLOOR_NS + c.bound_ns)
        write += [(e["wrote_ns"] - e["sent_ns"]) / 1e6 for e in toks]
        true_ttft.append((toks[0]["sent_ns"] - start_ns(truth.requests[rid])) / 1e6)
        arrived += truth.requests[rid].get("arrived_ns") is not None
        # measured - true TTFT of this request: the client's two stamps' errors and the two loopback
        # transits (the request's and the first token's)
        ttft_err.append((rec.chunks[0].t_ns - rec.t_send_ns) / 1e6 - true_ttft[-1])
        true_gaps += [(b["sent_ns"] - a["sent_ns"]) / 1e6 / b["tok"] for a, b in zip(toks, toks[1:]) for _ in range(b["tok"])]
        first.append(errs[0])
        every += errs
        ttft.append((rec.chunks[0].t_ns - rec.t_send_ns) / 1e6)
        for a, b in zip(rec.chunks, rec.chunks[1:]):
            gaps += [(b.t_ns - a.t_ns) / 1e6 / b.tokens] * b.tokens
    return {"first_token_error_ms": p50_p99(first), "token_error_ms": p50_p99(every),
            "ttft_ms": p50_p99(ttft), "itl_ms": p50_p99(gaps), "matched": len(first),
            # the truth over the same (matched, measured) requests: warm-up and ramp-up are not in them
            "truth_ttft_ms": p50_p99(true_ttft), "truth_itl_ms": p50_p99(true_gaps), "unmatched": unmatched,
            "token_error_max_ms": max(every) if every else None, "ttft_error_ms": p50_p99(ttft_err),
            "ttft_arrival_stamped": arrived,  # requests whose truth starts at the kernel's arrival stamp
            # the client's own share, at least: receive stamp - the end of the emitter's write
            "token_error_least_ms": p50_p99(least), "token_error_least_max_ms": max(least) if least else None,
            "tokens_beyond_bound": beyond,  # kernel-stamped tokens whose least error exceeds their own bound
            # the bytes reach the client's socket during the emitter's write: between sent and wrote, so
            # an error can be up to this much smaller than measured (the emitter's own share)
            "emitter_write_ms": p50_p99(write)}
