"""The decode roofline gate against a real decode engine on a real GPU.

The plugin is used as a user would: a YAML SLO file run through ``pytester``, its results read
from ``--llm-latency-json``.  The engine (``engine.py``) is Llama 3.1 8B's shapes with random
weights, batch 1, 512-token prompts, 64 output tokens; it times its own decode steps, which
the plugin's figures must agree with.  Test order matters for the GPU time only: the two
graph-engine tests share one server, started once (``conftest.EngineServers``).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(900)]

PROMPT_TOKENS = 512
OUTPUT_TOKENS = 64
SAMPLES = 10
WARMUP = 2
#: the plugin's TPOT p50 against the engine's own step time: on a GPU (~6 ms steps) the
#: client's stamps add microseconds per request; on the CPU self-check (tiny model, ~0.4 ms
#: steps, a busy 2-core machine) only a gross disagreement is a failure
TPOT_TOLERANCE = {"cuda": 0.02, "cpu": 0.25}
#: the local-gpu probe's read figure against a PyTorch device-to-device copy's (2 x bytes / time)
PROBE_TOLERANCE = 0.10
#: the floor of the failing rows: an 8B engine launched eagerly or read in fp32 is far below it
SLOW_FLOOR = 0.6
#: the passing row's floor, as a fraction of the engine's own efficiency
OWN_FRACTION = 0.8
COPY_BYTES = 1 << 30
#: where ``run_tier.sh`` collects every plugin run's results JSON (unset: nowhere)
RESULTS_ENV = "LLM_LATENCY_GPU_TIER_RESULTS"


def roofline(server, device: str, **extra) -> dict:
    """The SLO's roofline mapping: the engine's own config.json, weights declared bf16."""
    if device == "cuda":
        return {"hardware": "local-gpu", "config": str(server.config_path), "dtype": "bf16", **extra}
    # the CPU self-check: a fixed bandwidth (no probe), the tiny model's fp32 weights
    return {"mem_bandwidth_gb_s": 20, "config": str(server.config_path), "dtype": "fp32", **extra}


def run_plugin(pytester, request, server, roof: dict, name: str):
    """One plugin run of the ``decode`` workload against ``server``: (RunResult, the JSON result)."""
    slo = {"target": {"url": server.url, "model": server.model},
           "roofline": roof,
           "workloads": {"decode": {"class": "custom", "prompt_tokens": PROMPT_TOKENS,
                                    "output_tokens": OUTPUT_TOKENS, "concurrency": 1, "samples": SAMPLES,
                                    "warmup": WARMUP}}}
    path = pytester.path / f"{name}.slo.yaml"
    path.write_text(yaml.safe_dump(slo, sort_keys=False))
    args = ["-p", "no:cacheprovider", "-p", "no:randomly", f"--llm-latency-json={name}.json", str(path)]
    if not request.config.pluginmanager.has_plugin("llm_latency"):  # the project on PYTHONPATH, not installed
        args = ["-p", "pytest_llm_latency.plugin.hooks", *args]
    r = pytester.runpytest(*args)
    out = pytester.path / f"{name}.json"
    if not out.exists():  # a configuration or collection error: its output is the message
        pytest.fail(f"the plugin run wrote no {out.name}:\n" + "\n".join(r.outlines[-40:]), pytrace=False)
    if os.environ.get(RESULTS_ENV):
        test = request.node.name.replace("[", "-").replace("]", "")
        shutil.copyfile(out, Path(os.environ[RESULTS_ENV]) / f"{test}-{name}.json")
    doc = json.loads(out.read_text())
    assert len(doc["results"]) == 1, doc["results"]
    return r, doc["results"][0]


def own_step_ms(server, before: int) -> list[float]:
    """The engine's own step times (ms) of the run's samples: the last SAMPLES requests it served
    since ``before`` (the plugin's probes and warm-ups come first), each checked to be a sample."""
    served = server.served()[before:]
    samples = served[-SAMPLES:]
    assert len(samples) == SAMPLES, f"the engine served {len(served)} requests, expected >= {SAMPLES}"
    for s in samples:
        assert (s["prompt_tokens"], s["completion_tokens"]) == (PROMPT_TOKENS, OUTPUT_TOKENS), s
    return [s["step_ms"] for s in samples]


@pytest.fixture
def cache_env(monkeypatch, probe_cache):
    monkeypatch.setenv("LLM_LATENCY_CACHE", str(probe_cache))


def test_tpot_p50_is_the_engines_own_step_time(gpu_device, graphs_bf16, pytester, request, cache_env):
    """(a) The plugin's TPOT p50 is the engine's own decode step time, within 2 %; prompts are
    exact on the engine's count, outputs forced to their length, and /metrics was read."""
    before = len(graphs_bf16.served())
    r, res = run_plugin(pytester, request, graphs_bf16, roofline(graphs_bf16, gpu_device), "tpot")
    r.assert_outcomes(passed=1)
    assert (res["n"], res["failed_requests"], res["short_outputs"]) == (SAMPLES, 0, 0), res
    m = res["measurement"]
    assert (m["prompt_exact_requests"], m["prompt_deviation_requests"]) == (SAMPLES, 0), m
    assert {(q["prompt_tokens"], q["output_tokens"]) for q in res["requests"]} == {(PROMPT_TOKENS, OUTPUT_TOKENS)}
    srv = res["server"]  # the gauges the diagnosis reads, scraped from the engine's /metrics
    assert "vllm:num_requests_running" in srv["metrics_timeline"] and srv["server_waiting_max"] == 0, srv
    if gpu_device == "cuda":  # ~0.4 s per request: a scrape (every ~0.5 s) lands inside one
        assert srv["server_running_max"] == 1.0, srv
    own = statistics.median(own_step_ms(graphs_bf16, before))
    plugin = res["tpot_ms"]["p50"]
    tol = TPOT_TOLERANCE[gpu_device]
    assert abs(plugin / own - 1) <= tol, (
        f"plugin TPOT p50 {plugin:.4f} ms vs the engine's own step time {own:.4f} ms "
        f"({plugin / own - 1:+.2%}, tolerance {tol:.0%}; {graphs_bf16.mode}/{graphs_bf16.dtype})")


def test_the_graph_engine_passes_a_floor_at_0_8_of_its_own_efficiency(needs_cuda, graphs_bf16, pytester, request,
                                                                      cache_env):
    """(d) Measured report-only first; the engine's own efficiency is its own step time against
    the same ceiling; a floor at 0.8 of it passes."""
    before = len(graphs_bf16.served())
    r, res = run_plugin(pytester, request, graphs_bf16, roofline(graphs_bf16, "cuda"), "report")
    r.assert_outcomes(passed=1)
    roof = res["roofline"]
    assert roof["status"] == "report", roof
    own_ms = statistics.median(own_step_ms(graphs_bf16, before))
    own_eff = 1000.0 / own_ms / roof["ceiling_tok_s"]   # bytes per step / own step time / the gate's bandwidth
    assert roof["decode_efficiency"] == pytest.approx(own_eff, rel=0.03), (roof, own_ms)
    assert 0.2 < own_eff <= 1.05, f"a CUDA-graph 8B engine at {own_eff:.3f} of the ceiling: {roof['arithmetic']}"
    floor = round(OWN_FRACTION * own_eff, 3)
    r, res = run_plugin(pytester, request, graphs_bf16, roofline(graphs_bf16, "cuda", min_decode_efficiency=floor),
                        "floor")
    r.assert_outcomes(passed=1)
    assert res["roofline"]["status"] == "pass", res["roofline"]
    assert res["roofline"]["min_decode_efficiency"] == floor
    assert res["roofline"]["decode_efficiency"] >= floor, res["roofline"]


def torch_copy_read_gb_s(device: int = 0, nbytes: int = COPY_BYTES, runs: int = 5, reps: int = 10) -> float:
    """A device-to-device copy of a large buffer, the best of ``runs``: 2 x bytes / time, GB/s (1e9 B/s)."""
    import torch

    src = torch.ones(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
    dst = torch.empty_like(src)
    try:
        for _ in range(3):
            dst.copy_(src)
        torch.cuda.synchronize(device)
        best = 0.0
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                dst.copy_(src)
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3 / reps
            best = max(best, 2 * nbytes / seconds / 1e9)
        return best
    finally:
        del src, dst
        torch.cuda.empty_cache()


def test_local_gpu_probe_reads_what_a_pytorch_copy_reads(needs_cuda):
    """(b) ``hardware: local-gpu``'s figure is the device's: within 10 % of a PyTorch copy's."""
    from pytest_llm_latency.roofline.gpu_probe import probe_gpu_bandwidth

    copy = torch_copy_read_gb_s()
    probe = probe_gpu_bandwidth(device=0, runs=5)
    assert probe.read_gb_s > 0 and probe.copy_gb_s > 0, probe
    assert abs(probe.read_gb_s / copy - 1) <= PROBE_TOLERANCE, (
        f"local-gpu probe read {probe.read_gb_s:.0f} GB/s vs a PyTorch device-to-device copy's "
        f"{copy:.0f} GB/s (2 x bytes / time): {probe.read_gb_s / copy - 1:+.1%}, tolerance {PROBE_TOLERANCE:.0%}")


@pytest.mark.parametrize("engine, cause", [("eager_bf16", "fixed cost per step"),
                                           ("graphs_fp32", "weights heavier than declared")],
                         ids=["eager", "fp32"])
def test_a_slow_engine_fails_the_gate_naming_its_cause_first(needs_cuda, engine, cause, pytester, request,
                                                            cache_env):
    """(c) The eager engine (launch-bound) and the fp32 engine (served in fp32, declared bf16)
    fail a 0.6 floor, and the gate's diagnosis ranks the cause that is true first."""
    server = request.getfixturevalue(engine)
    r, res = run_plugin(pytester, request, server, roofline(server, "cuda", min_decode_efficiency=SLOW_FLOOR), engine)
    r.assert_outcomes(failed=1)
    roof = res["roofline"]
    assert roof["status"] == "fail" and roof["decode_efficiency"] < SLOW_FLOOR, roof
    diagnosis = roof.get("diagnosis")
    assert diagnosis, f"no roofline.diagnosis in the JSON result: {roof}"
    ranked = [(d["reason"], d["status"]) for d in diagnosis]
    assert ranked[0] == (cause, "likely"), f"{server.mode}/{server.dtype} diagnosis ranked {ranked}"
    assert not any(reason == cause for reason, _ in ranked[1:]), ranked
    r.stdout.fnmatch_lines([f"*likely: {cause} — *"])

