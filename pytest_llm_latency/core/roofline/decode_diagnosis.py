"""Why decode ran below its ceiling, ranked by the run's own evidence.  Pure.

Each reason (``ORDER``) is **likely**, **possible** or **ruled out**, with the evidence that decided
it; the thresholds are the constants below.  A baseline's step time and TTFT (A/B, deploy gate), where
known, are set beside the first two reasons: a per-step cost moves the step, not TTFT; heavier
arithmetic moves both.  See docs/roofline.md#the-diagnosis-ranked-by-the-runs-evidence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .modelbytes import bytes_per_param, format_bytes
from ..statuses import ReasonStatus

#: ``core.roofline.ceiling.RooflineResult`` (which imports this module: named, not imported, so no cycle)
RooflineResult = Any

FIXED_LIKELY = 0.5      # the step's share that is not bytes: likely from here
FIXED_POSSIBLE = 0.2    # ... possible from here, ruled out below
PREFILL_HEAVY = 0.15    # prefill below this share of the declared dtype's peak: heavier arithmetic
PREFILL_MIN_MS = 1.0    # the ideal prefill must take this long for TTFT to speak for the arithmetic
KV_FEW = 0.05           # KV under this share of the step's bytes: ruled out
STATUSES = ("likely", "possible", "ruled out")
ORDER = ("weights heavier than declared", "fixed cost per step", "batching", "bandwidth below the datasheet",
         "interleaved prefill", "KV cache")


@dataclass(frozen=True)
class DecodeEvidence:
    """What the run saw besides its TPOT (None: not measured).  Times in ms."""
    concurrency: int = 1
    open_loop: bool = False
    running_max: float | None = None      # the server's running gauge (vllm:num_requests_running, ...)
    running_samples: int = 0
    waiting_max: float | None = None
    prompt_tokens: float | None = None
    ttft_ms: float | None = None           # p50
    prefill_flops: float | None = None     # one prefill of prompt_tokens (core.roofline.prefill.PrefillModel.flops)
    peak_tflops: float | None = None       # the declared dtype's dense peak
    declared_dtype: str | None = None
    server_dtype: str | None = None        # what the server says it serves, and where it said so
    server_dtype_source: str = ""
    baseline_step_ms: float | None = None
    baseline_ttft_ms: float | None = None
    baseline_label: str = ""               # the A/B arm or deploy-gate baseline those medians are from

    @property
    def prefill_share(self) -> float | None:
        """Prompt FLOPs ÷ TTFT ÷ the declared peak, when TTFT can speak for the arithmetic."""
        if not (self.prefill_flops and self.peak_tflops and self.ttft_ms) or (self.waiting_max or 0) > 0:
            return None
        if self.prefill_flops / (self.peak_tflops * 1e12) * 1e3 < PREFILL_MIN_MS:
            return None
        return self.prefill_flops / (self.ttft_ms / 1e3) / (self.peak_tflops * 1e12)


@dataclass(frozen=True)
class Reason:
    reason: str
    status: ReasonStatus
    evidence: str

    @property
    def line(self) -> str:
        return f"{self.status}: {self.reason} — {self.evidence}"

    def as_json(self) -> dict:
        return {"reason": self.reason, "status": self.status, "evidence": self.evidence}


def _gb_s(x: float) -> str:
    return f"{x:,.0f} GB/s" if x >= 100 else f"{x:.1f} GB/s"


def _step_ms(r: RooflineResult) -> float:
    return 1000.0 / r.steps.steps_per_s if r.steps is not None else 1000.0 / r.measured_tok_s


def _dtype_bytes(name: str | None) -> float | None:
    """Bytes per weight of a dtype or GGUF type name (``bf16``, ``F16``, ``Q4_K_M``) or of a name that
    states its bits (llama.cpp's ``IQ2_XS - 2.3125 bpw``); None if unknown."""
    if not name:
        return None
    try:
        return bytes_per_param(name)
    except ConfigError:
        bpw = re.search(r"(\d+(?:\.\d+)?)\s*bpw", name)
        if bpw:
            return float(bpw.group(1)) / 8.0
        mix = re.fullmatch(r"(\w+_K)_[SML]", name.strip(), flags=re.IGNORECASE)  # a mix without a table figure:
        return _dtype_bytes(mix.group(1)) if mix else None                    # its k-quant's own bits


def _heavier(r: RooflineResult, e: DecodeEvidence) -> Reason:
    name = "weights heavier than declared"
    declared = e.declared_dtype or (f"{r.ceiling.model.bytes_per_param:g} bytes/param"
                                    if r.ceiling.model.bytes_per_param else "the declared size")
    said, want = _dtype_bytes(e.server_dtype), _dtype_bytes(e.declared_dtype)
    if e.server_dtype and said is not None and want is not None:
        where = f" ({e.server_dtype_source})" if e.server_dtype_source else ""
        if said > want:
            return Reason(name, "likely", f"the server serves {e.server_dtype}{where}, the SLO says {declared}: "
                          f"{said / want:.2g}x the bytes per weight")
        if said < want:  # lighter than declared: the ceiling is counted for bytes the server does not read
            return Reason(name, "ruled out", f"the server serves {e.server_dtype}{where}, lighter than the SLO's "
                          f"{declared}: the ceiling counts {want / said:.2g}x the bytes it reads, so the efficiency "
                          f"reads high; declare dtype: {e.server_dtype}")
        return Reason(name, "ruled out", f"the server serves {e.server_dtype}{where}, as the SLO says ({declared})")
    share = e.prefill_share
    ratios = _ratios(r, e)
    if share is not None and share < PREFILL_HEAVY and e.prefill_flops and e.peak_tflops:
        return Reason(name, "likely", f"prefill ran at {share:.3f} of the {declared} compute peak "
                      f"({e.prompt_tokens:.0f} tokens in {e.ttft_ms:.1f} ms TTFT, ideal "
                      f"{e.prefill_flops / (e.peak_tflops * 1e12) * 1e3:.1f} ms){ratios}: the arithmetic itself is "
                      f"heavier than declared: fp32 or bf16 served where the SLO says {declared}, an unmerged LoRA")
    if share is not None:
        return Reason(name, "possible", f"prefill ran at {share:.2f} of the {declared} compute peak, as a "
                      f"{declared} model would{ratios}; an unmerged LoRA or heavier copy that prefill hides is left")
    return Reason(name, "possible", f"no prefill figure to tell (TTFT, prompt FLOPs or the peak unknown){ratios}; "
                  f"check the served dtype against {declared} (fp32/bf16 where fp8 was meant, an unmerged LoRA)")


def _ratios(r: RooflineResult, e: DecodeEvidence) -> str:
    """The step-time (TPOT p50) and TTFT p50 ratios against the baseline, same workload (context and
    batch); a speculating run's steps are not comparable with a baseline's tokens, so none."""
    if not e.baseline_step_ms or r.steps is not None:
        return ""
    step = _step_ms(r) / e.baseline_step_ms
    ttft = f", TTFT {e.ttft_ms / e.baseline_ttft_ms:.2f}x" if e.ttft_ms and e.baseline_ttft_ms else ""
    return f"; against the {e.baseline_label or 'baseline'}: step {step:.2f}x{ttft}"


def _fixed(r: RooflineResult, e: DecodeEvidence, heavier: Reason) -> Reason:
    name = "fixed cost per step"
    hw = r.ceiling.hardware
    bw, which = (hw.measured_gb_s, "measured") if hw.measured_gb_s else (hw.mem_bandwidth_gb_s, hw.efficiency_of)
    nbytes = r.steps.step_bytes if r.steps is not None else r.ceiling.step_bytes
    read_ms = nbytes / (bw * 1e9) * 1e3
    step = _step_ms(r)
    rest = step - read_ms
    share = rest / step if step > 0 else 0.0
    what = (f"reading {format_bytes(nbytes)} at {_gb_s(bw)} ({which}) takes {read_ms:.3g} ms; the step takes "
            f"{step:.3g} ms: {rest:.3g} ms per step is not bytes ({share:.0%})")
    if share < FIXED_POSSIBLE:
        return Reason(name, "ruled out", f"{what}, under {FIXED_POSSIBLE:.0%}")
    causes = "CUDA graphs off (--enforce-eager), an unfused attention backend, a CPU-bound scheduler"
    if share >= FIXED_LIKELY and heavier.status != "likely":
        return Reason(name, "likely", f"{what}{_ratios(r, e)}: {causes}")
    also = "; heavier arithmetic explains part of it (above)" if heavier.status == "likely" else ""
    return Reason(name, "possible", f"{what}{also}: {causes}")


def _batching(r: RooflineResult, e: DecodeEvidence) -> Reason:
    name, batch = "batching", r.ceiling.batch
    if e.running_max is not None and e.running_max > batch:
        return Reason(name, "likely", f"the server ran up to {e.running_max:.0f} requests at once against a counted "
                      f"batch of {batch}: other traffic shared the decode steps")
    if batch > 1 or e.open_loop:
        return Reason(name, "possible", f"counted batch {batch}: each step serves several streams, and per-stream "
                      "speed falls as the batch grows (its ceiling counts the batch's KV)")
    if e.running_max is not None and e.running_samples:
        return Reason(name, "ruled out", f"counted batch 1; the server's running gauge never exceeded "
                      f"{e.running_max:.0f} ({e.running_samples} samples)")
    return Reason(name, "possible", "counted batch 1, but the server reports no running gauge: other clients' "
                  "traffic on the same server is not seen")


def _interleaved(e: DecodeEvidence) -> Reason:
    name = "interleaved prefill"
    one_stream = e.concurrency <= 1 and not e.open_loop
    if one_stream and e.running_max is not None and e.running_max <= 1 and e.running_samples:
        return Reason(name, "ruled out", "a one-stream closed loop and the server never ran two requests at once: "
                      "no other prompt's prefill could interleave with decode")
    who = "one stream, but the server's running gauge is not seen" if one_stream else \
        ("an open loop" if e.open_loop else f"concurrency {e.concurrency}")
    return Reason(name, "possible", f"{who}: other requests' prefill chunks stall every decoding stream; lower "
                  "--max-num-batched-tokens (vLLM, e.g. 2048)")


def _kv(r: RooflineResult) -> Reason:
    c, mb = r.ceiling, r.ceiling.model
    if mb.kv_not_counted or not mb.kv_known:
        return Reason("KV cache", "possible", "the KV cache is not counted in this ceiling, so it is higher than the "
                      "real one")
    share = c.kv_bytes / c.step_bytes if c.step_bytes else 0.0
    where = f"the KV cache is {share:.1%} of the bytes read per step at {c.context:g} ctx"
    if share < KV_FEW:
        return Reason("KV cache", "ruled out", where)
    return Reason("KV cache", "possible", f"{where}; attention reads it less efficiently than the weights: shorten "
                  "the context (long system prompts) or use an fp8 KV cache")


def _bandwidth(r: RooflineResult) -> Reason:
    name, hw = "bandwidth below the datasheet", r.ceiling.hardware
    if hw.efficiency_of == "measured":
        return Reason(name, "ruled out", f"the floor is against the measured {_gb_s(hw.mem_bandwidth_gb_s)} "
                      f"({hw.datasheet_gb_s / hw.mem_bandwidth_gb_s if hw.datasheet_gb_s else 0:.2f}x of it is the "
                      "datasheet's)")
    if hw.key == "local-cpu":
        return Reason(name, "ruled out", f"the ceiling is this host's measured {_gb_s(hw.mem_bandwidth_gb_s)}")
    if hw.measured_gb_s is None:
        return Reason(name, "possible", f"the floor is against {_gb_s(hw.mem_bandwidth_gb_s)} "
                      f"({hw.source or 'given'}); no chip reaches its datasheet (an H200 read 0.88 of it): "
                      "measure it with hardware: local-gpu")
    ratio = hw.measured_gb_s / hw.mem_bandwidth_gb_s
    of_measured = r.efficiency / ratio
    what = (f"this chip reads {_gb_s(hw.measured_gb_s)}, {ratio:.2f} of the datasheet's "
            f"{_gb_s(hw.mem_bandwidth_gb_s)}: decode is {of_measured:.2f} of what it reads")
    if r.min_efficiency is not None and of_measured >= r.min_efficiency:
        return Reason(name, "likely", f"{what}, above the floor {r.min_efficiency:.2f}: set efficiency_of: measured")
    return Reason(name, "possible", what)


def diagnose_decode(r: RooflineResult, e: DecodeEvidence | None = None) -> list[Reason]:
    """Every reason with its status, likely first (``ORDER`` within a status)."""
    e = e or DecodeEvidence(concurrency=r.ceiling.batch)
    heavier = _heavier(r, e)
    reasons = [heavier, _fixed(r, e, heavier), _batching(r, e), _bandwidth(r), _interleaved(e), _kv(r)]
    return sorted(reasons, key=lambda x: (STATUSES.index(x.status), ORDER.index(x.reason)))


def efficiency_bases(r: RooflineResult) -> dict:
    """Where the GPU was probed (``Hardware.measured_gb_s``): the judged efficiency against the
    datasheet and against the measured figure, and which one the floor applies to; else {}."""
    hw = r.ceiling.hardware
    if hw.measured_gb_s is None:
        return {}
    datasheet = hw.datasheet_gb_s if hw.datasheet_gb_s is not None else hw.mem_bandwidth_gb_s
    return {"efficiency_of": hw.efficiency_of, "datasheet_gb_s": datasheet, "measured_gb_s": hw.measured_gb_s,
            "decode_efficiency_datasheet": r.efficiency * hw.mem_bandwidth_gb_s / datasheet,
            "decode_efficiency_measured": r.efficiency * hw.mem_bandwidth_gb_s / hw.measured_gb_s}
