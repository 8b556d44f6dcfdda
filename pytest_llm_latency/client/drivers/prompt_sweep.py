"""A prompt-length sweep: TTFT at several prompt lengths in one test (``prompt_sweep:``).

Each length is one measurement (its sample driver) of the workload at that length, at concurrency 1 (no
queue in TTFT) and with its own salts (``salt_context`` names the length), so no prompt of the
sweep shares a prefix with another beyond ``shared_prefix_tokens``.  The samples of every length
are judged together against the workload's latency budgets; each request's (prompt tokens,
TTFT, server prefill time) goes to ``res.prefill.points`` for the prefill fit
(``plugin.prefill_gate``).  ``samples`` and ``warmup`` are per length.
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from ...core.measure import metrics as m
from ...core.result.result import WorkloadResult, measured
from ...core.result.result_parts import copy_parts
from ...core.spec.workload import Workload
from .base import Run
from .sending import sample_driver_for

#: per-length /metrics deltas of vLLM's prefill-time histogram (seconds)
VLLM_PREFILL = "vllm:request_prefill_time_seconds"
_SUMMED = ("_total", "_count", "_sum")


class PromptSweep:
    name = "prompt_sweep"

    def applies(self, workload: Workload) -> bool:
        return bool(workload.prompt_sweep)

    def measure(self, client, workload: Workload, run: Run) -> WorkloadResult:
        """Every length of ``workload.prompt_sweep`` measured by its sample driver, then combined."""
        parts: list[tuple[Workload, WorkloadResult]] = []
        total = len(workload.prompt_sweep) * workload.samples
        progress = run.progress
        for i, n in enumerate(workload.prompt_sweep):
            w = replace(workload, prompt_tokens=n, prompt_sweep=(), budgets=(), concurrency=1)
            step = (lambda done, _t, _i=i: progress(_i * workload.samples + done, total)) if progress else None
            at = replace(run, salt_context=f"{run.salt_context}|prompt={n}", progress=step)
            parts.append((w, sample_driver_for(w).measure(client, w, at)))
        return combine(workload, parts)


def combine(workload: Workload, parts: list[tuple[Workload, WorkloadResult]]) -> WorkloadResult:
    """One measurement for the sweep: every length's samples (judged together); each length's
    notes kept and its own facts handed to the checks (``core.checks.sweeps``, prefixed with its
    length); server counters summed."""
    res = measured(workload, [r for _, p in parts for r in p.records], [f for _, p in parts for f in p.failures])
    points = []
    for w, p in parts:
        tag = f"prompt {w.prompt_tokens}: "
        res.notes.extend(tag + x for x in p.notes)
        res.facts.sweep_parts.append((tag, p))
        summed = {k: res.server.metrics.get(k, 0) + v for k, v in p.server.metrics.items()
                  if k.endswith(_SUMMED) and isinstance(v, (int, float))}
        copy_parts(p, res)
        res.server.metrics.update(summed)
        points.extend(sweep_points(w, p))
    res.prefill.points = points
    return res


class SweepPoint(NamedTuple):
    prompt_tokens: int
    ttft_ms: float
    server_ms: float | None = None      # the server's own prefill time
    server_tokens: int | None = None    # the prompt tokens it says it computed (llama.cpp prompt_n)
    server_source: str = ""


def sweep_points(w: Workload, p: WorkloadResult) -> list[SweepPoint]:
    """(prompt tokens, TTFT ms, the server's prefill ms or None, ...) per completed request.  The
    server's time: its per-response timings (llama.cpp ``prompt_ms``, Ollama
    ``prompt_eval_duration``), else vLLM's prefill histogram over this length's samples (mean)."""
    total, count = p.server.metrics.get(VLLM_PREFILL + "_sum"), p.server.metrics.get(VLLM_PREFILL + "_count")
    vllm_ms = 1000.0 * total / count if isinstance(total, (int, float)) and count else None
    out = []
    for r in p.records:
        ttft = m.ttft_ms(r)
        if ttft is None:
            continue
        n = int(r.prompt_tokens or w.prompt_tokens)
        st = r.server_timings
        if isinstance(st.get("prefill_ms"), (int, float)) and not isinstance(st.get("prefill_ms"), bool) \
                and st["prefill_ms"] > 0:  # Ollama omits a zero duration
            out.append(SweepPoint(n, ttft, float(st["prefill_ms"]), st.get("prompt_n", n), st.get("source", "server")))
        elif vllm_ms is not None:
            out.append(SweepPoint(n, ttft, vllm_ms, n, "vllm:request_prefill_time_seconds"))
        else:
            out.append(SweepPoint(n, ttft))
    return out
