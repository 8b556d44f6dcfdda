"""Run a peer latency tool (AIPerf, guidellm, inference-perf) against a URL and read back its
TTFT and ITL percentiles (ms) and the CPU its process tree used.

Not a benchmark itself (``fidelity.py`` and ``capacity.py`` call it).  Each tool lives in its own
venv under ``$PEERS_DIR`` (default ``/work/peers``: ``$PEERS_DIR/<tool>/bin/<tool>``) with a local
word-level tokenizer in ``$PEERS_DIR/tok``; ``benchmarks/peers_setup.sh`` makes them (recipes:
``shared/reference/peers.md``).  A tool that is not installed is skipped, with the reason.

Which of each tool's keys is compared (its own definitions, ``peers.md``):

* TTFT: AIPerf ``time_to_first_token``, guidellm ``time_to_first_token_ms``, inference-perf
  ``time_to_first_token`` (seconds there).
* ITL: AIPerf ``inter_chunk_latency`` (its gap distribution; its ``inter_token_latency`` is a
  per-request mean), guidellm ``inter_token_latency_ms`` (a per-request mean repeated N-1
  times: its p99 hides gaps), inference-perf ``inter_token_latency`` (per token).  With one
  token per chunk, a chunk gap is a token gap.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

PEERS_DIR = Path(os.environ.get("PEERS_DIR", "/work/peers"))
TOOLS = ("aiperf", "guidellm", "inference-perf")
MODEL = "llama-3.1-8b"


def exe(tool: str) -> Path:
    return PEERS_DIR / tool / "bin" / tool


def available(tool: str) -> str | None:
    """None when runnable, else why not."""
    if not exe(tool).exists():
        return f"{exe(tool)} not installed (benchmarks/peers_setup.sh)"
    if not (PEERS_DIR / "tok" / "tokenizer.json").exists():
        return f"{PEERS_DIR / 'tok'} has no tokenizer.json (benchmarks/peers_setup.sh)"
    return None


def _cmd(tool: str, url: str, c: int, n: int, isl: int, osl: int, out: Path) -> tuple[list[str], dict]:
    tok = str(PEERS_DIR / "tok")
    env = dict(os.environ)
    if tool == "aiperf":  # not HF_HUB_OFFLINE: under it a local tokenizer path fails (peers.md)
        env.pop("HF_HUB_OFFLINE", None)
        return [str(exe(tool)), "profile", "-m", MODEL, "--url", url, "--endpoint-type", "completions", "--streaming",
                "--tokenizer", tok, "--isl", str(isl), "--isl-stddev", "0", "--osl", str(osl), "--osl-stddev", "0",
                "--extra-inputs", "ignore_eos:true", "--concurrency", str(c), "--request-count", str(n),
                "--warmup-request-count", str(min(c, 8)), "--random-seed", "0", "--artifact-dir", str(out),
                "--ui", "none"], env
    env["HF_HUB_OFFLINE"] = "1"
    if tool == "guidellm":
        return [str(exe(tool)), "run", "--backend",
                f"kind=openai_http,target={url},model={MODEL},request_format=/v1/completions",
                "--profile", f"kind=concurrent,streams={c}", "--constraint", f"kind=max_requests,count={n}",
                "--tokenizer", f"kind=huggingface_auto,model={tok}",
                "--data", f"kind=synthetic_text,prompt_tokens={isl},output_tokens={osl}",
                "--output", f"kind=json,path={out / 'b.json'}", "--disable-console-interactive"], env
    cfg = out / "ip.yaml"
    cfg.write_text(
        "api: {type: completion, streaming: true}\n"
        f"server: {{type: vllm, model_name: {MODEL}, base_url: '{url}', ignore_eos: true}}\n"
        f"tokenizer: {{pretrained_model_name_or_path: '{tok}'}}\n"
        f"data: {{type: random, input_distribution: {{type: fixed, min: {isl}, max: {isl}, mean: {isl}, std_dev: 0}}, "
        f"output_distribution: {{type: fixed, min: {osl}, max: {osl}, mean: {osl}, std_dev: 0}}}}\n"
        f"load: {{type: concurrent, stages: [{{num_requests: {n}, concurrency_level: {c}}}]}}\n"
        f"storage: {{local_storage: {{path: '{out / 'ipout'}'}}}}\n")
    return [str(exe(tool)), "--config_file", str(cfg)], env


def _parse(tool: str, out: Path) -> dict:
    if tool == "aiperf":
        d = json.loads((out / "profile_export_aiperf.json").read_text())
        t, i = d["time_to_first_token"], d["inter_chunk_latency"]
        return {"ttft_ms": {"p50": t["p50"], "p99": t["p99"], "n": t.get("count")},
                "itl_ms": {"p50": i["p50"], "p99": i["p99"], "n": i.get("count")},
                "itl_key": "inter_chunk_latency"}
    if tool == "guidellm":
        m = json.loads((out / "b.json").read_text())["benchmarks"][0]["metrics"]
        t, i = m["time_to_first_token_ms"]["successful"], m["inter_token_latency_ms"]["successful"]
        return {"ttft_ms": {"p50": t["median"], "p99": t["percentiles"]["p99"], "n": t.get("count")},
                "itl_ms": {"p50": i["median"], "p99": i["percentiles"]["p99"], "n": i.get("count")},
                "itl_key": "inter_token_latency_ms (per-request mean)"}
    f = glob.glob(str(out / "**" / "summary_lifecycle_metrics.json"), recursive=True)[0]
    lat = json.loads(Path(f).read_text())["successes"]["latency"]
    t, i = lat["time_to_first_token"], lat["inter_token_latency"]
    return {"ttft_ms": {"p50": t["median"] * 1e3, "p99": t["p99"] * 1e3},
            "itl_ms": {"p50": i["median"] * 1e3, "p99": i["p99"] * 1e3}, "itl_key": "inter_token_latency"}


def run_peer(tool: str, url: str, *, concurrency: int, requests: int, isl: int, osl: int, workdir: Path,
             cpu: int | None = None, timeout_s: float = 300) -> dict:
    """One run; ``cpu`` pins the tool's whole process tree to that CPU (its children inherit it)."""
    why = available(tool)
    if why:
        return {"tool": tool, "skipped": why}
    out = workdir / f"{tool}-c{concurrency}-{time.monotonic_ns()}"
    out.mkdir(parents=True)
    cmd, env = _cmd(tool, url, concurrency, requests, isl, osl, out)
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    r0 = os.times()
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"tool": tool, "error": f"timed out after {timeout_s:g}s"}
    wall = time.perf_counter() - t0
    r1 = os.times()
    res = {"tool": tool, "wall_s": round(wall, 2),
           "cpu_s": round((r1.children_user + r1.children_system) - (r0.children_user + r0.children_system), 3)}
    try:
        res.update(_parse(tool, out))
    except (OSError, KeyError, IndexError, ValueError) as exc:
        tail = p.stdout.decode(errors="replace")[-800:]
        res["error"] = f"rc={p.returncode}, no result ({type(exc).__name__}: {exc}); output tail: {tail}"
    shutil.rmtree(out, ignore_errors=True)
    return res
