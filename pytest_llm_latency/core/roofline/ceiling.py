"""The decode roofline: how fast decode can possibly go, and how close a server gets.

Decode is memory-bandwidth-bound: per-stream tok/s = bandwidth / (W + B x kv_per_token x ctx), and
decode efficiency = (1000 / TPOT ms) / that ceiling; a speculating server whose acceptance is known
is judged per engine step (``core.roofline.roofline_spec``).  See
docs/roofline.md#decode-the-memory-bandwidth-gate.

Pure: no I/O, no pytest/httpx/yaml.  The wording is ``core.roofline.roofline_text``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError
from .decode_diagnosis import DecodeEvidence, diagnose_decode, efficiency_bases
from ..measure.metrics import decode_tps
from .hardware import CONFIG_ERROR_RATIO, Hardware, ModelSpec
from .modelbytes import ModelBytes
from ..result.result_parts import SpecDecodeInfo
from .roofline_requests import PerRequest, RequestDecode, combine
from .roofline_spec import Drafter, StepFigures, finite, step_figures
from .roofline_text import format_roofline
from ..statuses import GateStatus

#: Per-step overhead, not bandwidth, bounds decode when reading a step's bytes takes less than
#: SMALL_STEP_MS and less than OVERHEAD_SHARE of the measured TPOT (tiny models: the engine's fixed
#: cost per step, about 7 ms on vLLM CPU, dwarfs a 0.1 ms read).
SMALL_STEP_MS = 1.0
OVERHEAD_SHARE = 0.2


def mean_context(prompt_tokens: float, output_tokens: float) -> float:
    """Mean context over a response's decode steps: the prompt plus half the output."""
    for what, v in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if not finite(v) or v < 0:
            raise ConfigError(f"roofline: {what} must be a number >= 0, got {v!r}")
    return prompt_tokens + output_tokens / 2.0


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

    @property
    def measured_tok_s(self) -> float | None:
        """The per-stream ceiling at the device's measured read figure (``hardware: local-gpu``)."""
        hw = self.hardware
        return None if hw.measured_gb_s is None else self.per_stream_tok_s * hw.measured_gb_s / hw.mem_bandwidth_gb_s


def decode_ceiling(hardware: Hardware, model: ModelBytes | ModelSpec, context: float = 0.0,
                   batch: int = 1) -> Ceiling:
    """Memory-bandwidth ceiling of decode at ``context`` tokens for ``batch`` concurrent streams."""
    mb = _as_model_bytes(model)
    if not finite(context) or context < 0:
        raise ConfigError(f"roofline: context must be a number of tokens >= 0, got {context!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"roofline: batch must be an integer >= 1, got {batch!r}")
    if not finite(hardware.mem_bandwidth_gb_s) or hardware.mem_bandwidth_gb_s <= 0:
        raise ConfigError(f"roofline: {hardware.name} has no positive memory bandwidth "
                          f"({hardware.mem_bandwidth_gb_s!r} GB/s); fix the hardware entry")
    if not finite(mb.weight_bytes) or mb.weight_bytes <= 0:
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
    status: GateStatus
    message: str = ""
    steps: StepFigures | None = None   # speculative decoding / MTP: judged per engine step
    hints: tuple[str, ...] = ()        # said with a configuration error (e.g. multi-token stream chunks)
    per_request: PerRequest | None = None  # varied lengths: per-request ceilings (core.roofline.roofline_requests)
    batch_source: str = ""             # open loop: where the batch came from (core.roofline.roofline_requests)
    evidence: DecodeEvidence | None = None  # what the run saw besides TPOT (core.roofline.decode_diagnosis)

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
                **efficiency_bases(self)}

    def diagnosis(self) -> list[dict]:
        """Why decode ran below its ceiling, ranked by the run's evidence (``core.roofline.decode_diagnosis``)."""
        return [x.as_json() for x in diagnose_decode(self, self.evidence)]


def _tpot_to_tok_s(ms, what: str) -> float:
    if not finite(ms) or ms <= 0:
        raise ConfigError(f"roofline: {what} must be a positive number of ms, got {ms!r} "
                          "(no decode timing: did the stream deliver at least 2 tokens?)")
    return decode_tps(ms)


def measure_roofline(hardware: Hardware, model: ModelBytes | ModelSpec, *, context: float,
                     tpot_p50_ms: float, tpot_p95_ms: float | None = None,
                     min_efficiency: float | None = None, batch: int = 1, spec: SpecDecodeInfo | None = None,
                     drafter: Drafter | None = None, hints: tuple[str, ...] = (),
                     decodes: list[RequestDecode] | None = None, batch_source: str = "",
                     evidence: DecodeEvidence | None = None) -> RooflineResult:
    """The efficiency at p50 and p95: per token, per request with ``decodes`` (varied lengths:
    ``core.roofline.roofline_requests``), per engine step when ``spec`` gives tokens per step
    (``drafter``'s bytes counted when given).  Not judged: status ``config_error`` above
    ``CONFIG_ERROR_RATIO`` (never a pass), else ``report``; ``min_efficiency`` is kept for
    ``apply_floor``.  ``batch_source`` (an open loop's batch) and ``hints`` are said in the message."""
    if min_efficiency is not None and (not finite(min_efficiency) or not 0 < min_efficiency <= 1):
        raise ConfigError(f"roofline: min_decode_efficiency must be in (0, 1], got {min_efficiency!r}; "
                          "e.g. 0.5 = at least half of the bandwidth ceiling, or null to only report")
    ceiling = decode_ceiling(hardware, model, context, batch)
    tok_s = _tpot_to_tok_s(tpot_p50_ms, "TPOT p50")
    tok_s_p95 = None if tpot_p95_ms is None else _tpot_to_tok_s(tpot_p95_ms, "TPOT p95")
    eff = tok_s / ceiling.per_stream_tok_s
    eff_p95 = None if tok_s_p95 is None else tok_s_p95 / ceiling.per_stream_tok_s
    per = combine(decodes or (), lambda ctx: decode_ceiling(hardware, model, ctx, batch).per_stream_tok_s)
    if per is not None:
        tok_s, eff, eff_p95 = per.measured_tok_s, per.efficiency, per.efficiency_p95
        tok_s_p95 = eff_p95 * per.ceiling_tok_s
    steps = None if spec is None or spec.tokens_per_step is None else step_figures(
        bandwidth_bytes_s=hardware.bandwidth_bytes_s, model=ceiling.model, kv_bytes=ceiling.kv_bytes, batch=batch,
        context=ceiling.context, spec=spec, drafter=drafter)
    judged = steps.step_efficiency if steps is not None else eff
    result = RooflineResult(ceiling=ceiling, measured_tok_s=tok_s, measured_tok_s_p95=tok_s_p95,
                            decode_efficiency=eff, decode_efficiency_p95=eff_p95, min_efficiency=min_efficiency,
                            status="config_error" if judged > CONFIG_ERROR_RATIO else "report", steps=steps,
                            hints=tuple(hints), per_request=per, batch_source=batch_source, evidence=evidence)
    return replace(result, message=format_roofline(result))


def apply_floor(result: RooflineResult) -> RooflineResult:
    """The decode floor, the rule ``core.checks.gates.check_roofline`` applies: ``pass`` when the
    p50 efficiency (the step efficiency of a speculating server) reaches ``min_efficiency``, else
    ``fail``; ``report`` without a floor; a ``config_error`` measurement stays one."""
    if result.status == "config_error" or result.min_efficiency is None:
        return result
    judged = replace(result, status="pass" if result.efficiency >= result.min_efficiency else "fail")
    return replace(judged, message=format_roofline(judged))
