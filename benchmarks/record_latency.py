"""Record real per-request latency samples for the statistics benchmark and tests.

    .venv/bin/python benchmarks/record_latency.py [--requests 600] [--only reference|llama] [--jitter 0.05] [--condition TEXT]

Two sources, each written to ``benchmarks/data/<name>.json`` as plain lists of per-request
TTFT and TPOT in ms (``core.measure.metrics`` definitions, via ``client.runner.measure``):

* ``reference-h100-llama8b``: the embedded reference target (a subprocess, ``time_scale`` 1)
  with its ``jitter`` knob on (default 0.05: every engine step times a seeded lognormal,
  mean-1 factor of that CV), plus the real scheduling noise of a shared 2-core machine;
* ``llama-server-tiny`` / ``llama-server-membound``: the real llama.cpp ``llama-server`` of
  ``tests/realserver`` (one thread, ``-t 1``) on the cached 2.5 MB ``tiny`` and 406 MB
  memory-bound ``membound`` models (half as many requests for the slow one).

Record on a quiet machine and say so (``--condition``); the ``*-loaded.json`` files are older
recordings made while other work shared the cores (their ``condition`` says how), kept as the
heavy-tailed case.  The files are small (a few KB) and committed: ``benchmarks/sequential_verdicts.py`` and
``tests/unit/core/measure/test_confidence.py`` resample them (a recorded distribution is the truth).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "realserver"))

from pytest_llm_latency.client.transport.http import Timeouts, make_http_client  # noqa: E402
from pytest_llm_latency.client.runner import Target, make_client, measure  # noqa: E402
from pytest_llm_latency.core.checks import judge  # noqa: E402
from pytest_llm_latency.core.measure import metrics as m  # noqa: E402
from pytest_llm_latency.core.spec.workload import make_workload  # noqa: E402

OUT = os.path.join(ROOT, "benchmarks", "data")


def record(url: str, name: str, requests: int, prompt_tokens: int, output_tokens: int, target: str = "",
           condition: str = "") -> None:
    w = make_workload(name, {"class": "custom", "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
                             "samples": requests, "warmup": 2, "slo": {}})
    # the plugin's own HTTP client: a bare httpx.Client reuses keep-alive connections that
    # llama-server has closed (5 s idle), and the failed requests would drop out of the sample
    load_start = round(os.getloadavg()[0], 2)
    with make_http_client(Timeouts(idle_s=60.0)) as http:
        client = make_client(Target(url), http)
        t0 = time.time()
        res = judge(measure(client, w))
    recs = res.records
    data = {"source": name, "condition": condition, "url": url.split("?")[0], "target": target or url.split("?")[0], "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": f"{platform.machine()} {os.cpu_count()} cpus",
            "load_average_1m_at_start": load_start, "load_average_1m_at_end": round(os.getloadavg()[0], 2), "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens, "failed": res.failed_requests,
            "ttft_ms": [round(m.ttft_ms(r), 4) for r in recs],
            "tpot_ms": [round(m.tpot_ms(r), 4) for r in recs if m.tpot_ms(r) is not None]}
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"{name}.json")
    with open(path, "w") as fh:
        json.dump(data, fh, indent=0)
    print(f"{name}: {len(recs)} requests in {time.time() - t0:.1f} s -> {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--only", choices=("reference", "llama"))
    ap.add_argument("--jitter", type=float, default=0.05, help="the reference target's jitter (CV per engine step)")
    ap.add_argument("--condition", default="", help="what else ran on the machine, written into the file "
                    "(e.g. 'quiet: nothing else running')")
    a = ap.parse_args()
    if a.only in (None, "reference"):
        from pytest_llm_latency.targets.reference.launch import start_reference

        spec = f"reference://h100-sxm/llama-3.1-8b?jitter={a.jitter}"
        with start_reference(spec) as ref:
            record(ref.url, "reference-h100-llama8b", a.requests, 512, 32, spec, a.condition)
    if a.only in (None, "llama"):
        import build_llama_server
        import make_models
        from conftest import llama_server_command
        from pytest_llm_latency.targets.managed import TargetPool

        binary, models = build_llama_server.build(), make_models.ensure_models()
        for name, requests in (("tiny", a.requests), ("membound", a.requests // 2)):
            with TargetPool(tempfile.mkdtemp(prefix="record-llama-")) as pool:
                target = pool.get(llama_server_command(binary, models[name]), ready_path="/health",
                                  startup_timeout_s=120)
                record(target.url, f"llama-server-{name}", requests, 128, 16, condition=a.condition)


if __name__ == "__main__":
    main()
