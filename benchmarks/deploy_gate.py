"""Deploy gate: false-alarm rate (A/A) and detection rate (A/B) of the baseline comparison.

    .venv/bin/python benchmarks/deploy_gate.py [--reps 100] [--time-scale 1] [--llama-reps 10] [--only reference|llama]

Reference target (``jitter=0.05``: every engine step x a lognormal, mean-1, 5 % CV factor):
four servers run side by side, each with its own ``jitter_seed``:

* ``A1``, ``A2``: the same target (H100 / Llama-3.1-8B defaults) -- A/A;
* ``Bdec``: ``decode_efficiency`` 0.7 / 1.15 -> every decode step 15 % slower;
* ``Bttft``: ``prefill_efficiency`` 0.5 / 1.15 -> the (compute-bound) prefill 15 % slower.

Each repetition measures one run of each (default sample size: 20 requests, warmup 2; prompt
2048 / output 8 tokens, so that the modelled prefill (~62 ms) dominates the TTFT's HTTP and
parsing overhead; the runner's prompt seed = the repetition), in rotated order so that
no arm is always first, then compares ``A2``, ``Bdec`` and ``Bttft`` against ``A1`` with
``core.measure.compare.compare_all`` at the default tolerances (bootstrap seed = the repetition).
A repetition is "flagged" when any tolerance reports a regression -- the plugin's verdict.
The realized effect (pooled medians over all repetitions) is printed too: HTTP and scheduling
overhead dilute a modelled 15 % a little.

``--only llama``: the same A/A and A/B pair on the real llama.cpp ``llama-server`` of
``tests/realserver`` (``-t 1``): A = the 406 MB ``membound`` model (A1 and A2 are two arms on
one server), B = the same model with a 7th layer (16.7 % more weight bytes: a real slowdown of
decode and prefill of about that size on a memory-bound CPU); fewer repetitions (``--llama-reps``).
A real server on a shared CPU drifts with the machine's load, so here the three arms are measured
as the plugin's A/B in one run does: interleaved in blocks of ``plugin.ab.BLOCK`` requests and
judged in the paired design with a block bootstrap.  (Separate back-to-back runs flagged the
A/A pair 4 of 10 times on the shared VM: the load moved between runs; see benchmarks/README.md.)
Prompt seeds differ between all runs (the server's prompt cache must not favour a run).
Both parts use the plugin's own HTTP client (``client.transport.http.make_http_client``): llama-server
(cpp-httplib) closes a kept-alive connection after 5 s idle, which every connection is while the
other arms run, and the plugin retries a request that met such a stale connection once on a
fresh one; a bare ``httpx.Client`` counted each as a failed request (a miss, +inf).

Every comparison is judged twice: by the plugin's rule (tolerance, 95 % CI, the absolute
floors of ``core.measure.compare.DEFAULT_FLOORS_MS``, a tail only with 2+ values beyond it, so no
``ttft_p95`` at 20 samples) and, for reference, without the floors (column "without the
floors").
"""
from __future__ import annotations

import argparse
import os
from dataclasses import replace
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "realserver"))

from pytest_llm_latency.client.transport.http import Timeouts, make_http_client  # noqa: E402
from pytest_llm_latency.client.runner import Target, make_client, measure  # noqa: E402
from pytest_llm_latency.core.checks import judge  # noqa: E402
from pytest_llm_latency.core.measure.compare import DEFAULT_FLOORS_MS, DEFAULT_TOLERANCES, compare_all  # noqa: E402
from pytest_llm_latency.core.result.result import metric_values  # noqa: E402
from pytest_llm_latency.core.spec.workload import make_workload  # noqa: E402
from pytest_llm_latency.plugin.ab import BLOCK  # noqa: E402

REF = "reference://h100-sxm/llama-3.1-8b?jitter=0.05&time_scale={ts}&jitter_seed={seed}"
PROMPT = int(os.environ.get("GATE_PROMPT", "2048"))
ARMS = {"A1": "", "A2": "", "Bdec": "&decode_efficiency=0.6087", "Bttft": "&prefill_efficiency=0.4348"}


FAILED: dict[str, int] = {}
FIRST_FAILURES: list[str] = []


def run_once(client, w, seed: int, salt_context: str = "") -> dict[str, list[float]]:
    """One run's samples; failed requests stay in as misses (+inf), as the plugin counts them."""
    res = judge(measure(client, w, seed=seed, nonce=f"r{seed}", salt_context=salt_context))
    for f in res.failures:
        FAILED[f.kind] = FAILED.get(f.kind, 0) + 1
        if len(FIRST_FAILURES) < 5:
            FIRST_FAILURES.append(f"{f.kind}: {f.message}"[:400])
            print(f"  failed request: {FIRST_FAILURES[-1]}", file=sys.stderr)
    return metric_values(res.records, res.failures, w.output_tokens)


def rates(samples: dict[str, list[dict]], base: str, others: list[str], reps: int, **kw) -> dict[str, dict]:
    out = {}
    no_floors = {**DEFAULT_TOLERANCES, **{f"{m}_floor": 0.0 for m in DEFAULT_FLOORS_MS}}
    for arm in others:
        flagged, keys, flagged_no_floor = 0, {}, 0
        for rep in range(reps):
            comps, _ = compare_all(samples[base][rep], samples[arm][rep], DEFAULT_TOLERANCES, seed=rep, **kw)
            hit = [c.key for c in comps if c.status == "regression"]
            flagged += bool(hit)
            for k in hit:
                keys[k] = keys.get(k, 0) + 1
            # the same samples judged on the relative tolerance alone (the rule before the floors)
            comps, _ = compare_all(samples[base][rep], samples[arm][rep], no_floors, seed=rep, **kw)
            flagged_no_floor += any(c.status == "regression" for c in comps)
        eff = {m: statistics.median(v for rep in samples[arm] for v in rep[m]) /
               statistics.median(v for rep in samples[base] for v in rep[m]) - 1 for m in ("ttft", "tpot")}
        out[arm] = {"flagged": flagged, "reps": reps, "no_floor": flagged_no_floor, "by_key": keys, "effect": eff,
                    "base": {m: statistics.median(v for rep in samples[base] for v in rep[m]) for m in ("ttft", "tpot")}}
    return out


def report(title: str, r: dict) -> None:
    print(f"\n{title}" + (f" (failed requests, counted as misses: {FAILED})" if FAILED else ""))
    print("| candidate vs A1 | flagged | rate | by tolerance | without the floors | realized TTFT / TPOT median change |")
    print("|---|---|---|---|---|---|")
    b = next(iter(r.values()))["base"]
    print(f"A1 pooled medians: TTFT {b['ttft']:.2f} ms, TPOT {b['tpot']:.2f} ms")
    for arm, v in r.items():
        by = ", ".join(f"{k} {n}" for k, n in sorted(v["by_key"].items())) or "-"
        print(f"| {arm} | {v['flagged']} / {v['reps']} | {v['flagged'] / v['reps']:.1%} | {by} | "
              f"{v['no_floor']} / {v['reps']} | {v['effect']['ttft']:+.1%} / {v['effect']['tpot']:+.1%} |")


def reference(reps: int, ts: float) -> None:
    from pytest_llm_latency.targets.reference.launch import start_reference

    w = make_workload("gate", {"class": "custom", "prompt_tokens": PROMPT, "output_tokens": 8, "samples": 20,
                               "slo": {}})
    handles = {arm: start_reference(REF.format(ts=ts, seed=i + 1) + extra)
               for i, (arm, extra) in enumerate(ARMS.items())}
    samples: dict[str, list] = {arm: [] for arm in ARMS}
    t0 = time.time()
    try:
        with make_http_client(Timeouts(idle_s=60.0)) as http:
            clients = {arm: make_client(Target(h.url), http) for arm, h in handles.items()}
            order = list(ARMS)
            for rep in range(reps):
                rot = order[rep % 4:] + order[:rep % 4]
                for arm in rot:
                    samples[arm].append(run_once(clients[arm], w, seed=rep))
                if rep % 10 == 9:
                    print(f"  {rep + 1} repetitions, {time.time() - t0:.0f} s", file=sys.stderr)
    finally:
        for h in handles.values():
            h.stop()
    print(f"reference target, jitter 0.05, time_scale {ts}, {reps} repetitions x 4 runs of {w.samples} "
          f"requests (prompt {w.prompt_tokens} / output {w.output_tokens}), default tolerances "
          f"{DEFAULT_TOLERANCES} and floors (ms) {DEFAULT_FLOORS_MS}, 95% CI, {time.time() - t0:.0f} s")
    report("A/A (A2) and A/B (Bdec: decode 15% slower, Bttft: prefill 15% slower)",
           rates(samples, "A1", ["A2", "Bdec", "Bttft"], reps))


def llama(reps: int) -> None:
    import tempfile

    import build_llama_server
    import make_models
    from conftest import llama_server_command
    from pytest_llm_latency.targets.managed import TargetPool

    # B: the membound model with a 7th layer -- 16.7 % more weight bytes (and FLOPs), so on a
    # memory-bound CPU decode and prefill are ~15-17 % slower: a real, known-size slowdown.
    make_models.SPECS.setdefault("membound7", make_models.ModelSpec("membound7", n_embd=1024, n_layer=7,
                                                                     n_ff=4096, n_head=16, seed=2))
    binary = build_llama_server.build()
    models = make_models.ensure_models(names=["membound", "membound7"])
    w = make_workload("gate", {"class": "custom", "prompt_tokens": 128, "output_tokens": 8, "slo": {}})
    t0 = time.time()
    samples: dict[str, list] = {"A1": [], "A2": [], "B": []}
    with TargetPool(tempfile.mkdtemp(prefix="gate-llama-")) as pool:
        ta = pool.get(llama_server_command(binary, models["membound"]), ready_path="/health", startup_timeout_s=120)
        tb = pool.get(llama_server_command(binary, models["membound7"]), ready_path="/health", startup_timeout_s=120)
        # the plugin's own HTTP client: a kept-alive connection that the server closed while the
        # other arm ran (llama-server's cpp-httplib drops idle connections after 5 s) is retried
        # once on a new connection, as in a pytest run -- a bare httpx.Client counted each of
        # those as a failed request (124 of 1200 "reset"s in the first recorded run)
        with make_http_client(Timeouts(idle_s=120.0)) as http:
            clients = {"A1": make_client(Target(ta.url), http), "A2": make_client(Target(ta.url), http),
                       "B": make_client(Target(tb.url), http)}
            order = ["A1", "B", "A2"]
            for rep in range(reps):
                # the plugin's A/B-in-one-run design (plugin/ab.py): blocks of BLOCK requests, all
                # three arms in every block (order rotated per block), warmup in the first block only
                parts: dict[str, list] = {arm: [] for arm in order}
                for k, start in enumerate(range(0, w.samples, BLOCK)):
                    wb = replace(w, samples=min(BLOCK, w.samples - start), warmup=w.warmup if k == 0 else 0)
                    for arm in order[(rep + k) % 3:] + order[:(rep + k) % 3]:
                        parts[arm].append(run_once(clients[arm], wb, seed=rep * 3 + order.index(arm),
                                                   salt_context=f"gate#r{rep}b{k}{arm}"))
                for arm, runs in parts.items():  # request i of every arm is in the same block
                    samples[arm].append({m: [v for run in runs for v in run[m]] for m in runs[0]})
                print(f"  {rep + 1} repetitions, {time.time() - t0:.0f} s", file=sys.stderr)
    print(f"\nllama-server -t 1 (membound 406 MB F32; B = the same with a 7th layer, +16.7 % weights), "
          f"{reps} repetitions x 3 arms of {w.samples} requests interleaved in blocks of {BLOCK} (prompt "
          f"{w.prompt_tokens} / output {w.output_tokens}), paired, block bootstrap, {time.time() - t0:.0f} s")
    report("A/A (A2: same server, its own prompts) and A/B (B: 16.7 % more weights)",
           rates(samples, "A1", ["A2", "B"], reps, paired=True, block=BLOCK))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--llama-reps", type=int, default=10)  # ~35 s each on the shared 2-core VM
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--only", choices=("reference", "llama"))
    a = ap.parse_args()
    if a.only in (None, "reference"):
        reference(a.reps, a.time_scale)
    if a.only in (None, "llama"):
        llama(a.llama_reps)


if __name__ == "__main__":
    main()
