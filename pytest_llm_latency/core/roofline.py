"""The decode roofline: how fast decode can possibly go, and how close a server gets.

Decode is memory-bandwidth-bound: every step reads all the weights once and, for each
sequence in the batch, its KV cache.  So

    step bytes        = W + B x kv_per_token x ctx
    per-stream tok/s  = bandwidth / step bytes
    aggregate tok/s   = B x bandwidth / step bytes
    decode efficiency = measured tok/s / per-stream ceiling,  measured tok/s = 1000 / TPOT ms

A speculating server (speculative decoding, MTP) emits several tokens per step: when its
acceptance is known (``res.spec_decode``) the gate judges the engine steps instead
(``core.roofline_spec``: step efficiency on run totals, the drafter's bytes counted).

Pure: no I/O, no pytest/httpx/yaml.  The arithmetic (``decode_ceiling``, ``evaluate_roofline``)
is kept apart from the wording (``format_ceiling``, ``format_roofline``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .errors import ConfigError
from .decode_diagnosis import DecodeEvidence, diagnose_decode, efficiency_bases
from .metrics import decode_tps
from .hardware import Hardware, ModelSpec
from .modelbytes import ModelBytes, format_bytes
from .result_parts import SpecDecodeInfo
from .roofline_requests import PerRequest, RequestDecode, combine
from .roofline_spec import Drafter, StepFigures, detail_lines, drafter_arithmetic, headline, step_figures
from .spec_decode import SOURCES_HINT

#: A measurement this far above the ceiling means the inputs are wrong, not that the server is fast.
CONFIG_ERROR_RATIO = 1.05
#: Per-step overhead, not bandwidth, bounds decode when reading a step's bytes takes less than
#: SMALL_STEP_MS and less than OVERHEAD_SHARE of the measured TPOT (tiny models: the engine's fixed
#: cost per step, about 7 ms on vLLM CPU, dwarfs a 0.1 ms read).
SMALL_STEP_MS = 1.0
OVERHEAD_SHARE = 0.2


def mean_context(prompt_tokens: float, output_tokens: float) -> float:
    """Mean context over a response's decode steps: the prompt plus half the output."""
    for what, v in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if not _finite(v) or v < 0:
            raise ConfigError(f"roofline: {what} must be a number >= 0, got {v!r}")
    return prompt_tokens + output_tokens / 2.0


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _as_model_bytes(model: ModelBytes | ModelSpec) -> ModelBytes:
    if isinstance(model, ModelBytes):
        return model
    if isinstance(model, ModelSpec):
        return model.model_bytes()
    raise ConfigError(f"roofline: model must be ModelBytes or ModelSpec, got {type(model).__name__}")


@dataclass(frozen=True)
class Ceiling:
    hardware: Hardware
    model: ModelBytes
    context: float
    batch: int
    weight_bytes: float        # weights read per step (MoE: experts the batch touches)
    kv_bytes: float            # KV read per step for the whole batch
    step_bytes: float
    per_stream_tok_s: float
    aggregate_tok_s: float

    @property
    def kv_bytes_per_sequence(self) -> float:
        return self.kv_bytes / self.batch


def decode_ceiling(hardware: Hardware, model: ModelBytes | ModelSpec, context: float = 0.0,
                   batch: int = 1) -> Ceiling:
    """Memory-bandwidth ceiling of decode at ``context`` tokens for ``batch`` concurrent streams."""
    mb = _as_model_bytes(model)
    if not _finite(context) or context < 0:
        raise ConfigError(f"roofline: context must be a number of tokens >= 0, got {context!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"roofline: batch must be an integer >= 1, got {batch!r}")
    if not _finite(hardware.mem_bandwidth_gb_s) or hardware.mem_bandwidth_gb_s <= 0:
        raise ConfigError(f"roofline: {hardware.name} has no positive memory bandwidth "
                          f"({hardware.mem_bandwidth_gb_s!r} GB/s); fix the hardware entry")
    if not _finite(mb.weight_bytes) or mb.weight_bytes <= 0:
        raise ConfigError(f"roofline: model weight bytes must be > 0, got {mb.weight_bytes!r}; "
                          "give params and dtype (or a config.json / GGUF file)")
    if context > 0 and not mb.kv_known:
        raise ConfigError(f"roofline: the KV cache size of {mb.name} is unknown but context is {context:g} "
                          "tokens; give layers, kv_heads and head_dim, or kv_bytes_per_token (or a config.json, a "
                          "safetensors model directory or a GGUF file), "
                          "or context 0")
    weights = mb.weight_bytes_at_batch(batch)
    kv = batch * mb.kv_bytes_at(context)
    step = weights + kv
    per_stream = hardware.bandwidth_bytes_s / step
    return Ceiling(hardware=hardware, model=mb, context=float(context), batch=batch, weight_bytes=weights,
                   kv_bytes=kv, step_bytes=step, per_stream_tok_s=per_stream, aggregate_tok_s=batch * per_stream)


def prefill_ceiling_tok_s(hardware: Hardware, params: float) -> float | None:
    """Compute-bound prefill ceiling: peak dense bf16 FLOP/s / (2 FLOPs per param per token).

    Ignores attention's quadratic term, so it is an upper bound; None when no FLOPs figure is known.
    """
    if hardware.peak_bf16_tflops is None or not params:
        return None
    return hardware.peak_bf16_tflops * 1e12 / (2.0 * params)


@dataclass(frozen=True)
class RooflineResult:
    ceiling: Ceiling
    measured_tok_s: float
    measured_tok_s_p95: float | None
    decode_efficiency: float
    decode_efficiency_p95: float | None
    min_efficiency: float | None
    status: str                 # "pass" | "fail" | "config_error" | "report"
    message: str = ""
    steps: StepFigures | None = None   # speculative decoding / MTP: judged per engine step
    hints: tuple[str, ...] = ()        # said with a configuration error (e.g. multi-token stream chunks)
    per_request: PerRequest | None = None  # varied lengths: per-request ceilings (core.roofline_requests)
    batch_source: str = ""             # open loop: where the batch came from (core.roofline_requests)
    evidence: DecodeEvidence | None = None  # what the run saw besides TPOT (core.decode_diagnosis)

    @property
    def efficiency(self) -> float:
        """The judged figure: the step efficiency when tokens per step is known, else per token."""
        return self.steps.step_efficiency if self.steps is not None else self.decode_efficiency

    @property
    def ceiling_tok_s(self) -> float:
        """Per stream; with per-request ceilings the effective one, Σ tokens ÷ Σ ideal decode time."""
        return self.per_request.ceiling_tok_s if self.per_request is not None else self.ceiling.per_stream_tok_s

    @property
    def hardware(self) -> str:
        return self.ceiling.hardware.name

    @property
    def model_bytes(self) -> float:
        """Bytes one decode step reads (weights + the batch's KV at the mean context)."""
        return self.ceiling.step_bytes

    @property
    def passed(self) -> bool:
        return self.status in ("pass", "report")

    @property
    def bandwidth_ms(self) -> float:
        """Time one decode step needs to read its bytes at the ceiling's bandwidth."""
        if self.steps is not None:
            return 1000.0 / self.steps.ceiling_steps_s
        return 1000.0 / self.ceiling.per_stream_tok_s

    @property
    def overhead_bound(self) -> bool:
        """The step's bytes are read in a sliver of the measured TPOT and in under SMALL_STEP_MS:
        the engine's fixed per-step cost, not memory bandwidth, sets the pace."""
        return self.bandwidth_ms < SMALL_STEP_MS and self.efficiency < OVERHEAD_SHARE

    @property
    def kv_cache(self) -> str:
        """``counted``, or ``not counted: why`` (e.g. llama.cpp meta gives weights only)."""
        mb = self.ceiling.model
        if mb.kv_not_counted:
            return f"not counted: {mb.kv_not_counted}"
        return "counted" if mb.kv_known else "not counted: KV shape unknown"

    def as_properties(self) -> dict:
        """Flat dict for JSON results and JUnit properties (the ``roofline`` part)."""
        return {"ceiling_tok_s": self.ceiling_tok_s, "decode_efficiency": self.decode_efficiency,
                "decode_efficiency_p95": self.decode_efficiency_p95, "hardware": self.hardware,
                "model_bytes": self.model_bytes, "kv_cache": self.kv_cache,
                **(self.steps.as_properties() if self.steps is not None else {}),
                **({"batch": self.ceiling.batch, "batch_source": self.batch_source} if self.batch_source else {}),
                **({"combination": self.per_request.describe()} if self.per_request is not None else {}),
                **self.bases()}

    def diagnosis(self) -> list[dict]:
        """Why decode ran below its ceiling, ranked by the run's evidence (``core.decode_diagnosis``)."""
        return [x.as_json() for x in diagnose_decode(self, self.evidence)]

    def bases(self) -> dict:
        """Where the GPU was probed: the efficiency against the datasheet and the measured figure."""
        return efficiency_bases(self)


def _tpot_to_tok_s(ms, what: str) -> float:
    if not _finite(ms) or ms <= 0:
        raise ConfigError(f"roofline: {what} must be a positive number of ms, got {ms!r} "
                          "(no decode timing: did the stream deliver at least 2 tokens?)")
    return decode_tps(ms)


def evaluate_roofline(hardware: Hardware, model: ModelBytes | ModelSpec, *, context: float,
                      tpot_p50_ms: float, tpot_p95_ms: float | None = None,
                      min_efficiency: float | None = None, batch: int = 1, spec: SpecDecodeInfo | None = None,
                      drafter: Drafter | None = None, hints: tuple[str, ...] = (),
                      decodes: list[RequestDecode] | None = None, batch_source: str = "",
                      evidence: DecodeEvidence | None = None) -> RooflineResult:
    """The gate in one call: ``judge_roofline(measure_roofline(...))`` (the CLI and tests; the
    plugin measures in ``plugin.roofline_gate`` and judges in ``core.checks.gates``)."""
    return judge_roofline(measure_roofline(hardware, model, context=context, tpot_p50_ms=tpot_p50_ms,
                                           tpot_p95_ms=tpot_p95_ms, min_efficiency=min_efficiency, batch=batch,
                                           spec=spec, drafter=drafter, hints=hints, decodes=decodes,
                                           batch_source=batch_source, evidence=evidence))


def measure_roofline(hardware: Hardware, model: ModelBytes | ModelSpec, *, context: float,
                     tpot_p50_ms: float, tpot_p95_ms: float | None = None,
                     min_efficiency: float | None = None, batch: int = 1, spec: SpecDecodeInfo | None = None,
                     drafter: Drafter | None = None, hints: tuple[str, ...] = (),
                     decodes: list[RequestDecode] | None = None, batch_source: str = "",
                     evidence: DecodeEvidence | None = None) -> RooflineResult:
    """Efficiency = (1000 / TPOT p50) / per-stream ceiling; also reported at p95.  With ``decodes``
    (varied lengths: ``core.roofline_requests``), per-request ceilings combined as Σ ideal ÷ Σ
    measured decode time instead (p95: the 5th percentile of the per-request efficiencies).
    ``batch_source``: where ``batch`` came from (an open loop), said in the message.  When ``spec``
    (``res.spec_decode``) gives tokens per step, the step efficiency (``core.roofline_spec``, run
    totals, ``drafter``'s bytes counted when given) is the judged figure.  Not judged: status
    ``config_error`` when the judged efficiency exceeds 1.05 (wrong hardware, model or drafter
    bytes, or an unreported speculation: never a pass), else ``report``; ``min_efficiency``
    (checked to be in (0, 1]) is kept for ``judge_roofline``.  ``hints``: said with a config error.
    """
    if min_efficiency is not None and (not _finite(min_efficiency) or not 0 < min_efficiency <= 1):
        raise ConfigError(f"roofline: min_decode_efficiency must be in (0, 1], got {min_efficiency!r}; "
                          "e.g. 0.5 = at least half of the bandwidth ceiling, or null to only report")
    ceiling = decode_ceiling(hardware, model, context, batch)
    tok_s = _tpot_to_tok_s(tpot_p50_ms, "TPOT p50")
    tok_s_p95 = None if tpot_p95_ms is None else _tpot_to_tok_s(tpot_p95_ms, "TPOT p95")
    eff = tok_s / ceiling.per_stream_tok_s
    eff_p95 = None if tok_s_p95 is None else tok_s_p95 / ceiling.per_stream_tok_s
    per = combine(decodes, lambda ctx: decode_ceiling(hardware, model, ctx, batch).per_stream_tok_s) if decodes \
        else None
    if per is not None:
        tok_s, eff, eff_p95 = per.measured_tok_s, per.efficiency, per.efficiency_p95
        tok_s_p95 = eff_p95 * per.ceiling_tok_s
    steps = None
    if spec is not None and spec.tokens_per_step is not None:
        steps = step_figures(bandwidth_bytes_s=hardware.bandwidth_bytes_s, model=ceiling.model,
                             kv_bytes=ceiling.kv_bytes, batch=batch, context=ceiling.context, spec=spec,
                             drafter=drafter)
    judged = steps.step_efficiency if steps is not None else eff
    result = RooflineResult(ceiling=ceiling, measured_tok_s=tok_s, measured_tok_s_p95=tok_s_p95,
                            decode_efficiency=eff, decode_efficiency_p95=eff_p95, min_efficiency=min_efficiency,
                            status="config_error" if judged > CONFIG_ERROR_RATIO else "report", steps=steps,
                            hints=tuple(hints), per_request=per, batch_source=batch_source, evidence=evidence)
    return replace(result, message=format_roofline(result))


def judge_roofline(result: RooflineResult) -> RooflineResult:
    """The decode floor, the rule ``core.checks.gates.check_roofline`` applies: ``pass`` when the
    p50 efficiency (the step efficiency of a speculating server) reaches ``min_efficiency``, else
    ``fail``; ``report`` without a floor; a ``config_error`` measurement stays one."""
    if result.status == "config_error" or result.min_efficiency is None:
        return result
    judged = replace(result, status="pass" if result.efficiency >= result.min_efficiency else "fail")
    return replace(judged, message=format_roofline(judged))


# ---------------------------------------------------------------------------- wording

def _gb_s(hw: Hardware) -> str:
    x = hw.mem_bandwidth_gb_s
    return f"{x:.0f} GB/s" if x >= 100 else f"{x:.1f} GB/s"


def format_arithmetic(c: Ceiling, steps: StepFigures | None = None) -> str:
    """``H100-SXM 3350 GB/s ÷ (16.06 GB weights + 524.3 MB KV @ 4000 ctx)``; with ``steps``, one
    engine step's bytes: the target's weights for its verified positions and the drafter's."""
    kv = ""
    if c.model.kv_not_counted:
        kv = ", KV cache not counted"
    elif c.context > 0 or c.kv_bytes > 0:
        per_seq = format_bytes(c.kv_bytes_per_sequence)
        batch = f"{c.batch} × " if c.batch > 1 else ""
        layout = c.model.kv_layout
        what = "KV + state" if layout is not None and any(g.kind == "state" for g in layout.groups) else "KV"
        kv = f" + {batch}{per_seq} {what} @ {c.context:g} ctx"
        if c.model.kv_layout is not None and not c.model.kv_layout.uniform_full:
            kv += f" [{c.model.describe_kv(c.context)}]"
    elif not c.model.kv_known:
        kv = ", KV not counted"
    hw = c.hardware.name if c.hardware.name.endswith("GB/s") else f"{c.hardware.name} {_gb_s(c.hardware)}"
    if steps is not None:
        return f"{hw} ÷ ({format_bytes(steps.target_weight_bytes)} weights{kv}{drafter_arithmetic(steps)})"
    return f"{hw} ÷ ({format_bytes(c.weight_bytes)} weights{kv})"


def format_ceiling(c: Ceiling) -> str:
    """Multi-line description of a ceiling with its arithmetic (for the CLI)."""
    lines = [f"decode ceiling {c.per_stream_tok_s:.1f} tok/s per stream"
             + (f", {c.aggregate_tok_s:.1f} tok/s aggregate at batch {c.batch}" if c.batch > 1 else ""),
             f"  = {format_arithmetic(c)}",
             f"  hardware: {c.hardware.source or 'explicit figure'}",
             f"  model: {c.model.source or c.model.name}"]
    if c.hardware.note:
        lines.insert(3, f"  hardware note: {c.hardware.note}")
    if c.model.kv_not_counted:
        lines.append(f"  KV cache not counted: {c.model.kv_not_counted}")
    elif c.model.kv_layout is not None and not c.model.kv_layout.uniform_full:
        lines.append(f"  KV cache and state: {format_bytes(c.model.kv_bytes_at(c.context))} per sequence at "
                     f"{c.context:g} ctx = {c.model.describe_kv(c.context)}")
    elif c.model.kv_bytes_per_token:
        lines.append(f"  KV cache: {c.model.kv_bytes_per_token:,.0f} B/token"
                     f" = {format_bytes(c.model.kv_bytes_per_token * c.context)} per sequence at {c.context:g} ctx")
    if c.model.embedding:
        lines.append(f"  {c.model.embedding}")
    return "\n".join(lines)  # the prefill ceiling, with attention: core.prefill.format_prefill_ceiling


def suggested_checks(r: RooflineResult) -> list[str]:
    """What to look at when decode is slow (or, for config_error, why the inputs look wrong)."""
    hw, mb = r.ceiling.hardware, r.ceiling.model
    tp = f" (counted: {hw.devices} devices)" if hw.devices > 1 else " (counted: 1 device)"
    if r.status == "config_error":
        checks = [
            f"hardware: is the server really on {hw.name} ({_gb_s(hw)}, {hw.source or 'explicit'})? "
            f"with tensor parallelism the ceiling is tp × per-GPU bandwidth{tp}",
            f"model bytes: {mb.source or mb.name}; a quantized model (fewer bytes per weight) or an MoE "
            "(only active experts read) raises the ceiling: give the real dtype/bits or the GGUF file"]
        if r.steps is not None:  # counting the drafter's reads could only raise the figure further
            return checks + [f"tokens per step {r.steps.tokens_per_step:.2f} from {r.steps.source}: an under-count "
                             "(a windowed estimate, responses without draft figures) makes the steps look faster "
                             f"than they are; drafter: {r.steps.draft}"]
        return checks + [f"speculative decoding / multi-token prediction (a likely reason) emits several tokens per "
                         f"engine step, and the server reported no acceptance, so the gate cannot judge its steps: "
                         f"expose {SOURCES_HINT}; then set roofline.draft for the drafter's bytes", *r.hints]
    checks = [overhead_line(r)] if r.overhead_bound else []
    checks.extend(x.line for x in diagnose_decode(r, r.evidence))  # ranked by the run's evidence
    if mb.bytes_per_param:
        lever = ("8-bit halves the bytes of fp16, ~2× the ceiling" if mb.bytes_per_param >= 1.5 else
                 "4-bit reads about half the bytes of 8-bit" if mb.bytes_per_param >= 0.75 else
                 "already at 4 bits or fewer: a smaller model is the remaining lever")
        checks.append(f"to raise the ceiling itself, quantization: weights are read at {mb.bytes_per_param:.3g} "
                      f"bytes/param ({lever})")
    return checks


def overhead_line(r: RooflineResult) -> str:
    if r.steps is not None:
        step, tpot, what = r.steps.step_bytes, 1000.0 / r.steps.steps_per_s, "mean engine step (run totals)"
    else:
        step, tpot, what = r.ceiling.step_bytes, 1000.0 / r.measured_tok_s, "TPOT p50"
    return (f"per-step overhead: reading {format_bytes(step)} per step takes {r.bandwidth_ms:.3g} ms at "
            f"{_gb_s(r.ceiling.hardware)}, {r.bandwidth_ms / tpot:.0%} of the measured {what} {tpot:.3g} ms; "
            "the engine's fixed per-step cost (scheduling, kernel launches, sampling) bounds this model, not "
            "memory bandwidth, so the roofline gate is not meaningful for models this small "
            "(set min_decode_efficiency to null to report only)")


def format_roofline(r: RooflineResult) -> str:
    """The gate's message: the arithmetic, the verdict, and (unless it passed) what to check."""
    c = r.ceiling
    budget = f"; budget ≥ {r.min_efficiency:.2f}" if r.min_efficiency is not None else "; report only"
    if r.steps is not None:
        lines = [headline(r.steps), f"  ({format_arithmetic(c, r.steps)}){budget}",
                 *detail_lines(r.steps, r.measured_tok_s, r.decode_efficiency, c.per_stream_tok_s)]
    else:
        lines = [f"decode {r.measured_tok_s:.1f} tok/s = {r.decode_efficiency:.2f} of ceiling "
                 f"{r.ceiling_tok_s:.1f} tok/s",
                 f"  ({format_arithmetic(c)}){budget}"]
        if r.per_request is not None:
            lines.append(f"  {r.per_request.describe()}; the arithmetic above is at the mean context")
    if r.batch_source:
        lines.append(f"  {r.batch_source}")
    b = r.bases()
    if b:
        lines.append(f"  {b['decode_efficiency_datasheet']:.2f} of the datasheet ({b['datasheet_gb_s']:,.0f} GB/s), "
                     f"{b['decode_efficiency_measured']:.2f} of measured ({b['measured_gb_s']:,.0f} GB/s); the floor "
                     f"applies to the {b['efficiency_of']} figure")
    if r.measured_tok_s_p95 is not None and r.steps is None:
        lines.append(f"  p95: decode {r.measured_tok_s_p95:.1f} tok/s = {r.decode_efficiency_p95:.2f} of ceiling")
    if c.model.kv_not_counted:
        lines.append(f"  KV cache not counted: {c.model.kv_not_counted}")
    if c.hardware.note:
        lines.append(f"  hardware note: {c.hardware.note}")
    if r.overhead_bound and r.status not in ("fail", "config_error"):
        lines.append(f"  note: {overhead_line(r)}")
    if r.status == "config_error" and r.steps is not None:
        lines.insert(0, f"roofline configuration error: engine steps run at {r.efficiency:.2f}× the bandwidth "
                        f"ceiling (> {CONFIG_ERROR_RATIO:g}), so decode cannot be judged; the hardware or the model "
                        "bytes are wrong, or tokens per step is under-counted")
    elif r.status == "config_error":
        lines.insert(0, f"roofline configuration error: measured decode is {r.decode_efficiency:.2f}× the "
                        f"bandwidth ceiling (> {CONFIG_ERROR_RATIO:g}), so it cannot be judged: the hardware or "
                        "model bytes are wrong, or the server speculates (speculative decoding / multi-token "
                        "prediction: several tokens per engine step) and reports no acceptance")
    if r.status in ("fail", "config_error"):
        lines.append("check:")
        lines.extend(f"  - {line}" for line in suggested_checks(r))
    return "\n".join(lines)
