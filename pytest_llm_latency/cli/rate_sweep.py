"""``pytest-llm-latency rate-sweep``: the highest request rate that still meets the SLO.

Examples::

    pytest-llm-latency rate-sweep --url http://localhost:8000 --class chat --rate-min 1 --rate-max 64
    pytest-llm-latency rate-sweep --url 'reference://h100-sxm/llama-3.1-8b?max_num_seqs=4' \\
        --prompt-tokens 64 --output-tokens 32 --slo ttft_p95=30ms --arrival constant --json

Each step is an open-loop run (``--requests`` requests on a seeded ``--arrival`` schedule at the
step's rate, after ``--warmup``), judged against the budgets; the rate is bisected
(``core/spec/rate_sweep.py``) for at most ``--max-steps`` runs.  ``--workers N|auto`` sends every step
from worker processes (``--ray ADDRESS``: one shard per node of a Ray cluster), as the workload keys
``workers`` and ``ray`` do: the same parsing (``core.spec.load_spec``), the same refusals.  Exit status 0 when a
capacity was
bracketed, 1 when no rate in the range meets the SLO (or it is below ``--capacity-min``).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys

from ..client import APIS
from ..core.errors import ConfigError
from ..core.spec.workload import make_workload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="target base URL, or a reference:// URL (started here)")
    parser.add_argument("--api", default="openai-completions", choices=APIS, help="the streaming API the server speaks")
    parser.add_argument("--model", default=None, help="model name (default: the server's only model)")
    parser.add_argument("--class", dest="klass", default=None, help="workload class (chat, agent, ...)")
    parser.add_argument("--prompt-tokens", type=int, default=None)
    parser.add_argument("--output-tokens", type=int, default=None)
    parser.add_argument("--slo", action="append", default=[], metavar="KEY=VALUE",
                        help="a budget, e.g. ttft_p95=500ms (repeatable; replaces the class's)")
    parser.add_argument("--requests", type=int, default=40, help="requests per step (default 40)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--arrival", default="poisson", help="poisson, gamma or constant")
    parser.add_argument("--burstiness", type=float, default=None, help="gamma shape (arrival gamma)")
    parser.add_argument("--rate-min", type=float, required=True, help="lowest rate tried (req/s)")
    parser.add_argument("--rate-max", type=float, required=True, help="highest rate tried (req/s)")
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--capacity-min", type=float, default=None, help="fail below this capacity (req/s)")
    parser.add_argument("--workers", default=None, metavar="N|auto",
                        help="worker processes sending every step's open loop, each with its own HTTP client: N, or "
                             "'auto' (one per 32 requests in flight, at most one per CPU but one); default 1 (this "
                             "process). The workload key workers")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="send every step from one shard per node of the Ray cluster at ADDRESS (host:port or "
                             "ray://host:port; needs pip install 'pytest-llm-latency[ray]'); --workers is then the "
                             "number of nodes (default: every node). The workload key ray")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _spec(args) -> dict:
    sweep = {"rate_min": args.rate_min, "rate_max": args.rate_max, "max_steps": args.max_steps,
             "tolerance": args.tolerance, "capacity_min": args.capacity_min}
    spec: dict = {"requests": args.requests, "warmup": args.warmup, "arrival": args.arrival,
                  "rate_sweep": {k: v for k, v in sweep.items() if v is not None}}
    for key, value in (("burstiness", args.burstiness), ("class", args.klass), ("prompt_tokens", args.prompt_tokens),
                       ("output_tokens", args.output_tokens), ("workers", args.workers), ("ray", args.ray)):
        if value is not None:
            spec[key] = value
    slo = {}
    for item in args.slo:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--slo {item!r}: expected KEY=VALUE, e.g. ttft_p95=500ms")
        slo[key.strip()] = float(value) if value.replace(".", "", 1).isdigit() else value.strip()
    if slo:
        spec["slo"] = slo
    return spec


def _flag(path: tuple) -> str:
    """A key path as the flag that set it: ("rate_sweep", "rate_min") -> --rate-min."""
    keys = [str(k) for k in path if k != "rate_sweep"] or ["rate-min/--rate-max"]
    return "--" + "-".join(k.replace("_", "-") for k in keys)


def run(args) -> int:
    from ..client.transport.http import make_http_client
    from ..client.runner import Target, make_client, measure
    from ..client.drivers.rate_steps import run_sweep
    from ..core.checks import judge
    from ..core.redact import redact_url

    try:
        workload = make_workload(args.klass or "rate_sweep", _spec(args), where=_flag)
        with contextlib.ExitStack() as stack:
            url = args.url
            if url.startswith("reference://"):
                from ..targets.reference.launch import start_reference

                url = stack.enter_context(start_reference(url, mode="subprocess")).url
            client = make_client(Target(url, args.api, args.model), stack.enter_context(make_http_client()))
            res, sw = run_sweep(lambda w: measure(client, w, seed=args.seed, salt_context=repr(w.load.rate)),
                                workload, judge)
            judge(res)  # the capacity against capacity_min (core.checks.sweeps)
    except ConfigError as exc:
        print(f"pytest-llm-latency rate-sweep: {exc}", file=sys.stderr)
        return 2
    ok = res.verdict == "pass"
    if args.json:
        print(json.dumps({"target": redact_url(args.url), "workers": res.load.workers, "capacity_rps": sw.capacity,
                          "lowest_failing_rps": sw.lowest_failing, "bounded": sw.bounded or None,
                          "steps": [{"rate_rps": s.rate, "passed": s.passed, "why": s.summary} for s in sw.curve()],
                          "verdict": res.verdict}, indent=2))
    else:
        over = f" (each step over {res.load.workers} {'Ray nodes' if workload.ray else 'worker processes'})" \
            if res.load.workers else ""
        print(f"{redact_url(args.url)}: {sw.describe()}{over}")
        for s in sw.curve():
            print(f"  {s.rate:10.3f} req/s  {'pass' if s.passed else 'FAIL'}  {s.summary}")
        if not ok:
            print(res.failure_message())
    return 0 if ok else 1
