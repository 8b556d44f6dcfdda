"""Preparing a 10,000-row trace's prompts (issue 27, "bounded preparation"): block texts whose token
counts add up (``client.prepare.trace_prompts``) against today's per-length fitting (``core.prompts.synthesis.build_prompts``),
in one run, on the same lengths.

    .venv/bin/python benchmarks/trace_prep.py [--rows 10000] [--peer-http-rows 500]

The trace is synthetic and seeded, shaped like Mooncake's: ``--roots`` shared prefixes (system prompts,
documents) of 1-6 blocks with Zipf popularity, each row opening with one of them and adding blocks of its
own; input lengths lognormal (median 1,800, sigma 0.9) clipped to 32..8,192; block 512.

1. **ours over HTTP**: ``prepare_block_prompts`` against the embedded reference target's real
   ``/tokenize`` (thread mode, in-process), wall time and HTTP ``/tokenize`` requests (counted by an
   httpx hook: the counter's set-up + ``CALIBRATION_CALLS`` + one verify per row).
2. **ours, memory**: the same preparation with the reference tokenizer in-process and
   ``tracemalloc`` on (peak traced memory: the prompts and the shared block texts).
3. **the peer** (today's ``build_prompts``: a binary-search fit per distinct length + one verify per other
   prompt) on the same lengths: its counter calls and time for all rows in-process, and over HTTP for the
   first ``--peer-http-rows`` rows (all of them would take minutes).

Exits 1 if our tokenize calls exceed set-up + ``CALIBRATION_CALLS`` + one per row, or any prompt is not exact.
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client
from pytest_llm_latency.client.prepare.tokens import make_counter
from pytest_llm_latency.client.prepare.trace_prompts import prepare_block_prompts
from pytest_llm_latency.core.prompts.block_text import CALIBRATION_CALLS, BlockSpec
from pytest_llm_latency.core.prompts.synthesis import build_prompts
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.targets.reference import tokenizer
from pytest_llm_latency.targets.reference.launch import start_reference

BLOCK = 512


def synthetic_trace(rows: int, roots: int, seed: int) -> list[BlockSpec]:
    rng = random.Random(seed)
    prefixes = [[r * 100 + i for i in range(rng.randint(1, 6))] for r in range(roots)]
    weights = [1 / (r + 1) for r in range(roots)]  # Zipf: a few system prompts carry most rows
    next_id = roots * 100
    out = []
    for _ in range(rows):
        length = max(32, min(8192, int(rng.lognormvariate(math.log(1800), 0.9))))
        blocks = -(-length // BLOCK)
        prefix = rng.choices(prefixes, weights)[0][:blocks]
        own = list(range(next_id, next_id + blocks - len(prefix)))
        next_id += len(own)
        out.append(BlockSpec(tuple(prefix + own), length, rng.randint(16, 512)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--roots", type=int, default=300)
    ap.add_argument("--peer-http-rows", type=int, default=500)
    ap.add_argument("--seed", type=int, default=27)
    args = ap.parse_args()
    specs = synthetic_trace(args.rows, args.roots, args.seed)
    lengths = [s.input_length for s in specs]
    ok = True
    print(f"trace: {len(specs)} rows, {len(set(lengths))} distinct lengths, mean {sum(lengths) / len(lengths):.0f} "
          f"tokens, {sum(lengths)} tokens in all, {len({h for s in specs for h in s.hash_ids})} distinct blocks")
    url = "reference://h100-sxm/llama-3.1-8b?time_scale=0&max_model_len=16384"
    with start_reference(url, mode="thread") as h:
        http = make_http_client()
        posts: list[str] = []
        http.event_hooks["request"].append(lambda req: posts.append(req.url.path))
        with http:
            client = make_client(Target(h.url, "openai-completions"), http)
            t0 = time.perf_counter()
            prompts, stats = prepare_block_prompts(client, specs, nonce="bench", seed=1, block_tokens=BLOCK)
            wall = time.perf_counter() - t0
            http_tok = posts.count("/tokenize")
            setup = http_tok - stats.tokenize_calls
            exact = sum(p.counted_tokens == p.expected_tokens == tokenizer.count(p.text) for p in prompts)
            bound = CALIBRATION_CALLS + len(specs)
            print(f"ours over HTTP: {wall:.1f} s; tokenize calls {stats.tokenize_calls} (calibration "
                  f"{stats.calibration_calls} + verify {stats.verify_calls}, {stats.replans} re-plans; bound {bound}) "
                  f"+ {setup} set-up = {http_tok} HTTP /tokenize; {exact}/{len(prompts)} exact")
            if stats.tokenize_calls > bound or setup > 7 or exact != len(prompts):
                print("FAIL: preparation exceeded its bound or a prompt is not exact", file=sys.stderr)
                ok = False
            del prompts
            n_http = min(args.peer_http_rows, len(specs))
            workload = make_workload("b", {"class": "custom", "prompt_tokens": 64, "output_tokens": 1})
            counter, _ = make_counter(client, workload, 1, "peer")
            posts.clear()
            t0 = time.perf_counter()
            build_prompts(counter, n=n_http, prompt_tokens=0, seed=1, nonce="peer", lengths=lengths[:n_http],
                          output_lengths=[s.output_length for s in specs[:n_http]])
            peer_http_s, peer_http_calls = time.perf_counter() - t0, posts.count("/tokenize")
            posts.clear()
            t0 = time.perf_counter()
            _, ours_part = prepare_block_prompts(counter, specs[:n_http], nonce="bench2", seed=1, block_tokens=BLOCK)
            ours_http_s, ours_http_calls = time.perf_counter() - t0, posts.count("/tokenize")
    print(f"first {n_http} rows over HTTP: peer {peer_http_calls} calls, {peer_http_s:.1f} s; ours {ours_http_calls} "
          f"calls, {ours_http_s:.1f} s: {peer_http_calls / ours_http_calls:.1f}x the calls, "
          f"{peer_http_s / ours_http_s:.1f}x the time")
    calls = [0]

    def local(text: str) -> int:
        calls[0] += 1
        return tokenizer.count(text)
    t0 = time.perf_counter()
    build_prompts(local, n=len(specs), prompt_tokens=0, seed=1, nonce="peer", lengths=lengths,
                  output_lengths=[s.output_length for s in specs])
    peer_s, peer_calls = time.perf_counter() - t0, calls[0]
    calls[0] = 0
    t0 = time.perf_counter()
    prepare_block_prompts(local, specs, nonce="bench3", seed=1, block_tokens=BLOCK)
    ours_s, ours_calls = time.perf_counter() - t0, calls[0]
    print(f"all {len(specs)} rows in-process: peer {peer_calls} counter calls, {peer_s:.1f} s; ours {ours_calls} "
          f"calls, {ours_s:.1f} s: {peer_calls / ours_calls:.1f}x the calls, {peer_s / ours_s:.1f}x the time")
    tracemalloc.start()
    prompts, _ = prepare_block_prompts(tokenizer.count, specs, nonce="bench4", seed=1, block_tokens=BLOCK)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    chars = sum(len(p.text) for p in prompts)
    print(f"memory (tracemalloc, in-process counter): peak {peak / 2**20:.0f} MiB for {chars / 2**20:.0f} MiB of "
          f"prompt text ({chars / sum(lengths):.2f} characters per token)")
    print(f"machine: nproc {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
