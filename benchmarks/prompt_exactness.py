"""Prompt-length exactness without a tokenize endpoint: the linear estimate alone vs the plan
corrected on the server's own count (``client.prepare.tokens.correct_plan``), in one run.

    .venv/bin/python benchmarks/prompt_exactness.py [--seeds 5] [--samples 5]

Against the reference target with ``tokenize_endpoint=0`` and two counting rules that the
probe text does not predict (one token per word; one token per 3 characters), through four
APIs, for planned prompts of 64, 512 and 6000 tokens, each with ``--seeds`` seeds (and a fresh
nonce each).  "estimate" is the server's count of a prompt planned by the probe estimate only
(what the plugin sent before the correction); "exact samples" counts measured samples whose
reported prompt length equals the plan.  Prints a Markdown table for RESULTS.md.
"""
from __future__ import annotations

import argparse
import re
import statistics

import httpx

from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.client.prepare.tokens import _probe, make_counter
from pytest_llm_latency.core.prompts.synthesis import build_prompts
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.targets.reference.launch import start_reference

APIS = ("ollama", "ollama-chat", "openai-completions", "openai-chat")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=5)
    args = ap.parse_args()
    print("| rule | api | planned | estimate alone: server count (min..max) | exact samples | "
          "correction requests (median, max) |")
    print("|---|---|---:|---|---:|---|")
    for rule in ("word", "chars3"):
        url = f"reference://h100-sxm/llama-3.1-8b?time_scale=0&tokenize_endpoint=0&tokenizer={rule}&max_model_len=16384"
        with start_reference(url, mode="thread") as h, httpx.Client(timeout=60) as http:
            for api in APIS:
                client = make_client(Target(h.url, api), http)
                for planned in (64, 512, 6000):
                    w = make_workload("b", {"class": "custom", "prompt_tokens": planned, "output_tokens": 1,
                                            "samples": args.samples, "warmup": 0})
                    before, exact, total, steps = [], 0, 0, []
                    for seed in range(args.seeds):
                        counter, _ = make_counter(client, w, seed, f"bench{seed}")
                        p = build_prompts(counter, n=1, prompt_tokens=planned, seed=seed, nonce=f"bench{seed}")[0]
                        before.append(_probe(client, p.system, p.user))
                        res = judge(measure(client, w, seed=seed))
                        exact += res.measurement.prompt_exact_requests
                        total += res.n + res.failed_requests
                        steps.append(int(re.search(r"(\d+) unmeasured", res.measurement.prompt_counter).group(1)))
                    print(f"| {rule} | {api} | {planned} | {min(before)}..{max(before)} "
                          f"({(statistics.mean(before) / planned - 1):+.1%}) | {exact}/{total} | "
                          f"{statistics.median(steps):g}, {max(steps)} |")


if __name__ == "__main__":
    main()
