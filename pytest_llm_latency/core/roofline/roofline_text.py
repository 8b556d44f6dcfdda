"""The decode roofline's wording: the ceiling's arithmetic for the CLI and the gate's message
with what to check (``core.roofline.ceiling`` holds the arithmetic it describes)."""
from __future__ import annotations

from typing import Any

from .decode_diagnosis import diagnose_decode, efficiency_bases
from .hardware import CONFIG_ERROR_RATIO, Hardware
from .modelbytes import format_bytes
from .roofline_spec import StepFigures, detail_lines, drafter_arithmetic, headline
from ..measure.spec_decode import SOURCES_HINT

#: ``core.roofline.ceiling.Ceiling`` and ``RooflineResult`` (that module imports this one: named, not imported)
Ceiling = Any
RooflineResult = Any


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
    weights, drafter = (c.weight_bytes, "") if steps is None else (steps.target_weight_bytes, drafter_arithmetic(steps))
    return f"{hw} ÷ ({format_bytes(weights)} weights{kv}{drafter})"


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
    if c.hardware.measured_gb_s is not None and c.hardware.efficiency_of == "datasheet":
        lines.insert(2, f"  measured: {c.measured_tok_s:.1f} tok/s at the {c.hardware.measured_gb_s:,.0f} GB/s this "
                        f"device reads ({c.hardware.measured_gb_s / c.hardware.mem_bandwidth_gb_s:.2f} of the "
                        "datasheet): what a perfect engine reaches here; a floor against it: efficiency_of: measured")
    return "\n".join(lines)  # the prefill ceiling, with attention: core.roofline.prefill.format_prefill_ceiling


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
    b = efficiency_bases(r)
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
