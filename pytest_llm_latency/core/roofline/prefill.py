"""The prefill roofline: how fast prefill can possibly go, and how close a server gets.

Prefill is compute-bound: FLOPs(n) = 2·P·n + 2·L·W·n·(n+1); over a sweep [n0 .. n1] a prompt
token costs 2·P + 2·L·W·(n0 + n1 + 1) FLOPs, the ceiling is peak FLOP/s ÷ that, and MFU = tok/s ÷
ceiling.  Without the attention shape (L, W) the attention term is left out and said so.  See
docs/roofline.md#mfu.

Pure: no I/O.  The arithmetic (``measure_prefill``) is kept apart from the wording.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Sequence

from ..errors import ConfigError
from .hardware import CONFIG_ERROR_RATIO
from .prefill_fit import LineFit, Linearity, linearity, medians_by_x, theil_sen
from ..statuses import GateStatus

#: (core.roofline.hardware.CONFIG_ERROR_RATIO above the compute ceiling means wrong inputs or a prefix cache.)
CHECKS = ("attention backend: a fallback from a fused (flash) kernel to an eager path",
          "dtype: fp32 weights or activations run at a fraction of the bf16 tensor throughput",
          "chunked-prefill token budget (vLLM --max-num-batched-tokens): too small a budget splits every "
          "prompt into many steps",
          "tensor parallel: a setting that does not match the hardware (the ceiling counts {devices})",
          "CPU offload: weights or KV cache offloaded to the CPU (--cpu-offload-gb, --n-gpu-layers)")


def attention_width(params: float, layers: int, hidden: int | None = None) -> int:
    """Attention width W: the hidden size when known, else the dense-transformer estimate
    ``P ~ 12·L·W²`` (4573 for Llama-3.1-8B, true 4096: the attention term ~12 % high)."""
    if hidden:
        return int(hidden)
    return max(1, round(math.sqrt(params / (12.0 * layers))))


@dataclass(frozen=True)
class PrefillModel:
    """What prefill computes per token: params (active for MoE) and, when known, the attention shape."""
    name: str
    params: float
    layers: int | None = None
    width: int | None = None
    source: str = ""
    width_estimated: bool = False     # W from P ~ 12·L·W², not from the model's config

    @property
    def has_attention(self) -> bool:
        return bool(self.layers and self.width)

    def flops(self, n: float) -> float:
        """FLOPs of a lone prefill of ``n`` tokens."""
        attn = 2.0 * self.layers * self.width * n * (n + 1) if self.layers and self.width else 0.0
        return 2.0 * self.params * n + attn

    def flops_per_token(self, n0: float, n1: float) -> float:
        """Marginal FLOPs per prompt token between lengths n0 < n1 (the chord of ``flops``)."""
        if n1 == n0:
            return self.flops(n1) / n1 if n1 else 2.0 * self.params
        return (self.flops(n1) - self.flops(n0)) / (n1 - n0)


def prefill_model(name: str, params: float | None, layers: int | None = None, hidden: int | None = None,
                  source: str = "") -> PrefillModel:
    if isinstance(params, bool) or not isinstance(params, (int, float)) or not params > 0:
        raise ConfigError(f"prefill roofline: the parameter count of {name} is unknown ({params!r}); give params "
                          "(or a config.json / GGUF file / catalog model)")
    return PrefillModel(name=name, params=float(params), layers=layers or None,
                        width=attention_width(params, layers, hidden) if layers else None, source=source,
                        width_estimated=bool(layers) and not hidden)


@dataclass(frozen=True)
class Peak:
    tflops: float | None          # None: unknown (a catalog null), never guessed
    name: str                     # "H100-SXM", "local CPU (host)"
    source: str = ""              # "catalog peak_bf16_tflops", "numpy float32 matmul probe, best of 5 runs"
    devices: int = 1
    note: str = ""


@dataclass(frozen=True)
class ServerPrefill:
    """The server's own prefill timing, where it reports it (llama.cpp, vLLM, Ollama)."""
    source: str
    tok_s: float | None = None          # its own fit (or its reported prompt tok/s)
    overhead_ms: float | None = None    # client TTFT - server prefill (median): network, queue, first step
    reported_tok_s: float | None = None  # its tokens ÷ its prefill time at the longest prompt (median)


@dataclass(frozen=True)
class PrefillBudgets:
    min_efficiency: float | None = None
    tps_min: float | None = None
    overhead_max_ms: float | None = None
    require_linear: bool = False


@dataclass(frozen=True)
class PrefillResult:
    model: PrefillModel | None
    peak: Peak | None
    lengths: tuple[int, ...]
    samples: int
    fit: LineFit
    linearity: Linearity
    budgets: PrefillBudgets
    flops_per_token: float | None = None
    mfu: float | None = None
    server: ServerPrefill | None = None
    status: GateStatus = "report"
    failed: tuple[str, ...] = ()      # the budgets that failed, each a sentence
    message: str = ""

    @property
    def tok_s(self) -> float:
        return 1000.0 / self.fit.slope

    @property
    def overhead_ms(self) -> float:
        return self.fit.intercept

    @property
    def ceiling_tok_s(self) -> float | None:
        if self.peak is None or self.peak.tflops is None or not self.flops_per_token:
            return None
        return self.peak.tflops * 1e12 / self.flops_per_token

    def as_properties(self) -> dict:
        """Flat ``prefill.*`` values for JSON results and JUnit (``llm.prefill.*``)."""
        out = {"tok_s": round(self.tok_s, 3), "overhead_ms": round(self.overhead_ms, 4),
               "lengths": ",".join(str(n) for n in self.lengths), "samples": self.samples,
               "residual_mad_ms": round(self.fit.residual_mad, 4), "residual_max_ms": round(self.fit.residual_max, 4),
               "linearity": self.linearity.shape, "status": self.status}
        for key, v in (("budget_min_prefill_efficiency", self.budgets.min_efficiency),  # the YAML keys' names
                       ("budget_prefill_tps_min", self.budgets.tps_min),
                       ("budget_ttft_overhead_max_ms", self.budgets.overhead_max_ms)):
            if v is not None:
                out[key] = v
        if self.flops_per_token:
            out["gflop_per_token"] = round(self.flops_per_token / 1e9, 6)
            out["attention"] = "counted" if self.model and self.model.has_attention else "not counted: shape unknown"
        if self.peak is not None:
            out["hardware"] = self.peak.name
            if self.peak.tflops is not None:
                out["peak_tflops"] = round(self.peak.tflops, 6)
        if self.ceiling_tok_s is not None:
            out["ceiling_tok_s"] = round(self.ceiling_tok_s, 3)
        if self.mfu is not None:
            out["mfu"] = round(self.mfu, 5)
        if self.server is not None:
            s = self.server
            out["server_source"] = s.source
            for key, v, digits in (("server_tok_s", s.tok_s, 3), ("server_overhead_ms", s.overhead_ms, 4),
                                   ("server_reported_tok_s", s.reported_tok_s, 3)):
                if v is not None:
                    out[key] = round(v, digits)
        return out


def measure_prefill(points: Sequence[tuple[int, float]], *, model: PrefillModel | None = None,
                    peak: Peak | None = None, budgets: PrefillBudgets = PrefillBudgets(),
                    server: ServerPrefill | None = None) -> PrefillResult:
    """Fit TTFT(n) over ``points`` (prompt tokens, TTFT ms: one per request).  Not judged: status
    ``config_error`` when the MFU exceeds 1.05 (wrong hardware or model, or a prefix cache at
    work: never a pass), else ``report``; ``budgets`` are kept for ``apply_prefill_budgets``.  A fit
    whose slope is not positive raises ``ConfigError``."""
    if budgets.min_efficiency is not None and not 0 < budgets.min_efficiency <= 1:
        raise ConfigError(f"min_prefill_efficiency must be in (0, 1], got {budgets.min_efficiency!r}")
    xs = [float(n) for n, _ in points]
    ys = [float(t) for _, t in points]
    fit = theil_sen(xs, ys)
    if model is not None and model.has_attention and fit.slope > 0:
        # the attention term added: TTFT against FLOPs(n) in linear-token units (2·P FLOPs each) is a
        # straight line, so its intercept is the overhead unbiased by the n² term and its residuals
        # are the fit's own; the slope (tok/s) stays the plain one, the marginal rate over the sweep
        att = theil_sen([model.flops(x) / (2.0 * model.params) for x in xs], ys)
        fit = replace(fit, intercept=att.intercept, residuals=att.residuals)
    if not fit.slope > 0:
        raise ConfigError(f"prefill fit: TTFT does not grow with prompt length (slope {fit.slope:.3g} ms/token over "
                          f"{sorted(set(int(x) for x in xs))} tokens), so no prefill was measured: a prefix cache "
                          "or a server that ignores the prompt")
    lengths = tuple(sorted({int(x) for x in xs}))
    medians = medians_by_x(xs, ys)
    fpt = mfu = None
    if model is not None:
        fpt = model.flops_per_token(lengths[0], lengths[-1])
        if peak is not None and peak.tflops:
            mfu = (1000.0 / fit.slope) * fpt / (peak.tflops * 1e12)
    seg_cost = ([model.flops_per_token(n0, n1) for (n0, _), (n1, _) in zip(medians, medians[1:])]
                if model is not None and model.has_attention else None)
    status: GateStatus = "config_error" if mfu is not None and mfu > CONFIG_ERROR_RATIO else "report"
    result = PrefillResult(model=model, peak=peak, lengths=lengths, samples=len(points), fit=fit,
                           linearity=linearity(fit, medians, seg_cost), budgets=budgets, flops_per_token=fpt, mfu=mfu,
                           server=server, status=status)
    return replace(result, message=format_prefill(result))


def apply_prefill_budgets(result: PrefillResult) -> PrefillResult:
    """The prefill budgets, the rule ``core.checks.gates.check_prefill_roofline`` applies:
    ``fail`` when one is missed (each named in ``failed``), else ``pass``, or ``report`` without
    budgets; a ``config_error`` measurement stays one."""
    budgets, mfu, fit, lin = result.budgets, result.mfu, result.fit, result.linearity
    failed = []
    if budgets.min_efficiency is not None and mfu is not None and mfu < budgets.min_efficiency:
        failed.append(f"MFU {mfu:.2f} < min_prefill_efficiency {budgets.min_efficiency:.2f}")
    if budgets.tps_min is not None and result.tok_s < budgets.tps_min:
        failed.append(f"prefill {_tok_s(result.tok_s)} tok/s < prefill_tps_min {_tok_s(budgets.tps_min)} tok/s")
    if budgets.overhead_max_ms is not None and fit.intercept > budgets.overhead_max_ms:
        failed.append(f"TTFT overhead {fit.intercept:.1f} ms > ttft_overhead_max {budgets.overhead_max_ms:g} ms")
    if budgets.require_linear and lin.shape in ("sublinear", "superlinear"):
        failed.append(f"TTFT grows {lin.shape}ly with prompt length (require_linear_prefill)")
    judged = budgets.require_linear or any(v is not None for v in (budgets.min_efficiency, budgets.tps_min,
                                                                   budgets.overhead_max_ms))
    status: GateStatus = ("config_error" if result.status == "config_error" else "fail" if failed
                          else "pass" if judged else "report")
    result = replace(result, status=status, failed=tuple(failed))
    return replace(result, message=format_prefill(result))


# ---------------------------------------------------------------------------- wording

def _tok_s(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _tflops(x: float | None) -> str:
    if x is None:
        return "unknown TFLOPS"
    return f"{x:,.0f} TFLOPS" if x >= 10 else f"{x:.3g} TFLOPS"


def flops_text(model: PrefillModel, n0: float, n1: float) -> str:
    """``2 × 8.03e9 params + attention 2 × 32 layers × 4573 × (256 + 4096 + 1) = 21.3 GFLOP/token``"""
    per = model.flops_per_token(n0, n1)
    head = f"2 × {model.params:.4g} params"
    if not model.has_attention:
        return f"{head} = {per / 1e9:.4g} GFLOP/token (attention not counted: layers and hidden size unknown)"
    width = f"{model.width}" + (" (est. from params)" if model.width_estimated else "")
    span = f"({n0:g} + {n1:g} + 1)" if n1 != n0 else f"({n1:g} + 1)"
    return f"{head} + attention 2 × {model.layers} layers × {width} wide × {span} = {per / 1e9:.4g} GFLOP/token"


def suggested_checks(r: PrefillResult) -> list[str]:
    if r.status == "config_error":
        assert r.peak is not None and r.model is not None, "a config error names the hardware and the model"
        return [f"hardware: is the server really on {r.peak.name} ({_tflops(r.peak.tflops)}, "
                f"{r.peak.source or 'explicit'})? with tensor parallelism the peak is tp × per-device",
                f"model: {r.model.source or r.model.name}; an MoE computes only its active params per token",
                "prefix cache: a server that reuses cached prompt tokens skips their prefill; every prompt is "
                "salted, so check shared_prefix_tokens and the server's prefix-cache metrics"]
    devices = f"{r.peak.devices} device(s)" if r.peak else "1 device"
    return [c.format(devices=devices) for c in CHECKS]


def format_prefill(r: PrefillResult) -> str:
    """The gate's message: the fit, the arithmetic, the verdict, and (unless it passed) what to check."""
    lines = []
    b = r.budgets
    budget = f"; budget ≥ {b.min_efficiency:.2f}" if b.min_efficiency is not None and r.mfu is not None else ""
    if r.mfu is not None:
        assert r.peak is not None and r.peak.tflops is not None and r.flops_per_token is not None \
            and r.ceiling_tok_s is not None, "an MFU is computed from a known peak"
        lines.append(f"prefill {_tok_s(r.tok_s)} tok/s = {r.mfu:.2f} of the compute ceiling ({r.peak.name} "
                     f"{_tflops(r.peak.tflops)} ÷ {r.flops_per_token / 1e9:.3g} GFLOP/token = "
                     f"{_tok_s(r.ceiling_tok_s)} tok/s){budget}")
    else:
        why = ("no peak FLOP/s is known for " + r.peak.name + " (catalog null): give roofline.peak_tflops"
               if r.peak is not None else "no hardware given" if r.model is not None
               else "no model given (params, config, gguf or model)")
        lines.append(f"prefill {_tok_s(r.tok_s)} tok/s; MFU not computed: {why}")
        if b.min_efficiency is not None:
            lines.append(f"  min_prefill_efficiency {b.min_efficiency:.2f} cannot be judged without it")
    if r.model is not None:
        lines.append(f"  FLOPs/token = {flops_text(r.model, r.lengths[0], r.lengths[-1])}")
    attn = " + attention" if r.model is not None and r.model.has_attention else ""
    lines.append(f"  fit: TTFT = {r.overhead_ms:.1f} ms overhead + n ÷ {_tok_s(r.tok_s)} tok/s{attn} over "
                 f"{', '.join(str(n) for n in r.lengths)} tokens ({r.samples} requests); residuals median "
                 f"{r.fit.residual_mad:.2f} ms, max {r.fit.residual_max:.2f} ms")
    if r.server is not None:
        parts = [f"fit {_tok_s(r.server.tok_s)} tok/s" if r.server.tok_s is not None else "",
                 f"reported {_tok_s(r.server.reported_tok_s)} tok/s at {r.lengths[-1]} tokens"
                 if r.server.reported_tok_s is not None else "",
                 f"client − server = {r.server.overhead_ms:.1f} ms overhead" if r.server.overhead_ms is not None
                 else ""]
        lines.append(f"  server ({r.server.source}): " + ", ".join(p for p in parts if p))
    if r.peak is not None and r.peak.note:
        lines.append(f"  hardware note: {r.peak.note}")
    if r.linearity.why:
        lines.append(f"  note: {r.linearity.why}")
    if r.status == "config_error":
        lines.insert(0, f"prefill roofline configuration error: measured prefill is {r.mfu:.2f}× the compute "
                        f"ceiling (> {CONFIG_ERROR_RATIO:g}); the hardware or the model is wrong, or a prefix "
                        "cache skipped the prompts")
    for f in r.failed:
        lines.append(f"  failed: {f}")
    if r.status in ("fail", "config_error"):
        lines.append("check:")
        lines.extend(f"  - {c}" for c in suggested_checks(r))
    return "\n".join(lines)


@dataclass(frozen=True)
class PrefillCeiling:
    model: PrefillModel
    peak: Peak
    prompt_tokens: int
    flops: float = field(default=0.0)

    @property
    def tok_s(self) -> float | None:
        return None if self.peak.tflops is None else self.prompt_tokens * self.peak.tflops * 1e12 / self.flops

    @property
    def ms(self) -> float | None:
        return None if self.peak.tflops is None else 1000.0 * self.flops / (self.peak.tflops * 1e12)


def prefill_ceiling(model: PrefillModel, peak: Peak, prompt_tokens: int) -> PrefillCeiling:
    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or prompt_tokens < 1:
        raise ConfigError(f"prefill ceiling: prompt tokens must be an integer >= 1, got {prompt_tokens!r}")
    return PrefillCeiling(model, peak, prompt_tokens, model.flops(prompt_tokens))


def format_prefill_ceiling(c: PrefillCeiling) -> str:
    """Multi-line prefill ceiling for the CLI, with its arithmetic."""
    n = c.prompt_tokens
    m = c.model
    attn = (f" + 2 × {m.layers} layers × {m.width}{' (est.)' if m.width_estimated else ''} × {n} × {n + 1}"
            if m.has_attention else " (attention not counted: layers and hidden size unknown)")
    if c.peak.tflops is None:
        return "\n".join([f"prefill ceiling: unknown: no peak FLOP/s for {c.peak.name} ({c.peak.source}); "
                          "give --peak-tflops",
                          f"  FLOPs for {n} prompt tokens = 2 × {m.params:.4g} × {n}{attn} = "
                          f"{c.flops / 1e12:.4g} TFLOP"])
    assert c.tok_s is not None  # a known peak gives a ceiling
    return "\n".join([
        f"prefill ceiling {_tok_s(c.tok_s)} tok/s, {c.ms:.4g} ms for {n} prompt tokens (compute-bound, MFU 1)",
        f"  = {c.peak.name} {_tflops(c.peak.tflops)} ÷ {c.flops / n / 1e9:.4g} GFLOP/token",
        f"  FLOPs = 2 × {m.params:.4g} params × {n}{attn} = {c.flops / 1e12:.4g} TFLOP",
        f"  peak: {c.peak.source or 'explicit figure'}"] + ([f"  hardware note: {c.peak.note}"] if c.peak.note else []))
