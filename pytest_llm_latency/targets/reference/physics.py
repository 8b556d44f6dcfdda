"""Roofline timing model of one LLM inference engine step.  Pure: no I/O, no clock, no asyncio.

Every duration the reference server models comes from ``Physics.step``; the scheduler
multiplies it by ``time_scale`` before sleeping.  The formulas, symbols and what they
give: docs/servers.md#timing-model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from ...core.roofline.hardware import Hardware, ModelSpec
from ...core.roofline.modelbytes import ModelBytes
from ...core.roofline.prefill import attention_width

DEFAULT_DECODE_EFFICIENCY = 0.7    # fraction of peak memory bandwidth reached by decode
DEFAULT_PREFILL_EFFICIENCY = 0.5   # model FLOP utilisation (MFU) of compute-bound work
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's --gpu-memory-utilization default
FALLBACK_RIDGE_FLOP_PER_BYTE = 10.0  # F = 10 x B where the catalog has no peak FLOP/s (CPUs)


def hidden_size(model: ModelSpec) -> int:
    """Hidden size ``H`` of the attention FLOP term: the spec's, else ``sqrt(P / (12 L))``
    (docs/servers.md#timing-model)."""
    for value in (getattr(model, "hidden_size", None), (model.extra or {}).get("hidden_size")):
        if value:
            return int(value)
    return attention_width(model.params, model.layers)  # the prefill roofline's estimate: one formula


@dataclass(frozen=True)
class StepCost:
    """The work of one engine step and its modelled duration (seconds, unscaled)."""

    tokens: int
    flops: float
    bytes: float
    compute_s: float
    memory_s: float

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s > self.memory_s else "memory"


@dataclass(frozen=True)
class Drafter:
    """What drafting reads: ``weight_bytes`` once per drafting forward pass (shared by the
    batch), ``kv_bytes_per_token`` per drafted token per context token (a draft model's own
    KV cache; 0 for EAGLE/MTP heads), ``params`` for the 2 P FLOPs per drafted token."""

    weight_bytes: float
    kv_bytes_per_token: float = 0.0
    params: float = 0.0
    name: str = ""


@dataclass(frozen=True)
class Physics:
    """Roofline constants of one (hardware, model, efficiency) triple."""

    params: float
    weight_bytes: float
    kv_bytes_per_token: float
    layers: int
    hidden: int
    peak_flops: float          # F, FLOP/s
    bandwidth: float           # B, bytes/s
    decode_efficiency: float = DEFAULT_DECODE_EFFICIENCY    # e_m
    prefill_efficiency: float = DEFAULT_PREFILL_EFFICIENCY  # e_c
    moe: ModelBytes | None = None  # MoE: a step of t tokens reads the experts they touch
    drafter: Drafter | None = None  # speculative decoding: what each drafted token reads

    def weights_read(self, tokens: int) -> float:
        """Weight bytes one step reads: all (dense), or the shared ones plus the experts
        ``tokens`` tokens touch (MoE: ``ModelBytes.weight_bytes_at_batch``)."""
        return self.moe.weight_bytes_at_batch(tokens) if self.moe is not None else self.weight_bytes

    @classmethod
    def from_specs(cls, hw: Hardware, model: ModelSpec, *,
                   decode_efficiency: float = DEFAULT_DECODE_EFFICIENCY,
                   prefill_efficiency: float = DEFAULT_PREFILL_EFFICIENCY,
                   peak_tflops: float | None = None, drafter: Drafter | None = None) -> "Physics":
        bandwidth = hw.mem_bandwidth_gb_s * 1e9
        tflops = peak_tflops or hw.peak_bf16_tflops
        peak = tflops * 1e12 if tflops else FALLBACK_RIDGE_FLOP_PER_BYTE * bandwidth
        mb = model.model_bytes()
        return cls(params=model.params, weight_bytes=model.weight_bytes,
                   kv_bytes_per_token=model.kv_bytes_per_token, layers=model.layers,
                   hidden=hidden_size(model), peak_flops=peak, bandwidth=bandwidth,
                   decode_efficiency=decode_efficiency, prefill_efficiency=prefill_efficiency,
                   moe=mb if mb.experts else None, drafter=drafter)

    # -- the one formula -------------------------------------------------------------
    def step(self, decode_contexts: Iterable[int] = (),
             prefill_chunks: Iterable[tuple[int, int]] = (),
             decode_drafts: Sequence[int] = ()) -> StepCost:
        """Cost of one step: ``decode_contexts`` = ``c`` per decoding sequence,
        ``prefill_chunks`` = ``(n, c)`` per prefilling sequence, ``decode_drafts`` = the
        drafted tokens each decode verifies (same order; missing = 0)."""
        tokens = 0
        pairs = 0.0
        kv_read_tokens = 0
        drafted = longest = 0
        draft_kv_tokens = 0.0
        for i, c in enumerate(decode_contexts):
            d = decode_drafts[i] if i < len(decode_drafts) else 0
            tokens += 1
            pairs += c + 1
            kv_read_tokens += c
            if d > 0:
                tokens += d
                pairs += d * (c + 1) + d * (d + 1) / 2.0
                drafted += d
                longest = max(longest, d)
                draft_kv_tokens += d * c
        for n, c in prefill_chunks:
            if n <= 0:
                continue
            tokens += n
            pairs += n * c + n * (n + 1) / 2.0
            kv_read_tokens += c
        flops = 2.0 * self.params * tokens + 4.0 * self.layers * self.hidden * pairs
        nbytes = self.weights_read(tokens) + self.kv_bytes_per_token * kv_read_tokens if tokens else 0.0
        if drafted and self.drafter is not None:
            dr = self.drafter
            flops += 2.0 * dr.params * drafted
            nbytes += dr.weight_bytes * longest + dr.kv_bytes_per_token * draft_kv_tokens
        return StepCost(tokens=tokens, flops=flops, bytes=nbytes,
                        compute_s=flops / (self.peak_flops * self.prefill_efficiency),
                        memory_s=nbytes / (self.bandwidth * self.decode_efficiency))

    # -- convenience views of the same formula ------------------------------------------
    def prefill_seconds(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        """A lone prefill of ``prompt_tokens`` of which ``cached_tokens`` hit the prefix cache."""
        return self.step(prefill_chunks=[(prompt_tokens - cached_tokens, cached_tokens)]).seconds

    def decode_step_seconds(self, contexts: Sequence[int]) -> float:
        """One decode step of a batch whose sequences have these contexts."""
        return self.step(decode_contexts=contexts).seconds

    def single_stream_tok_s(self, context: int) -> float:
        """Decode rate of one sequence at ``context`` tokens: ~ B e_m / (Wb + kv c)."""
        return 1.0 / self.decode_step_seconds([context])

    # -- a prefill/decode pair (disagg.py) ----------------------------------------------------
    def kv_bytes(self, prompt_tokens: int) -> float:
        """The KV cache a prefill ships to the decode pool: ``kv × n`` (every layer full attention, the
        catalog models'; ``core.roofline.kv_transfer.kv_cache_bytes`` is the general form)."""
        return self.kv_bytes_per_token * prompt_tokens

    def kv_transfer_seconds(self, prompt_tokens: int, link_gb_s: float) -> float:
        """One transfer alone on the link: ``kv × n ÷ link`` (docs/servers.md#a-prefilldecode-pair), the
        plugin's transfer floor exactly; a transfer queued behind others waits for the link first."""
        return self.kv_bytes(prompt_tokens) / (link_gb_s * 1e9)


def jitter_factor(rng, cv: float) -> float:
    """A step duration's noise factor: lognormal, mean 1, coefficient of variation ``cv``
    (docs/servers.md#timing-model); ``cv <= 0``: exactly 1, nothing drawn from the caller's ``rng``."""
    if cv <= 0:
        return 1.0
    sigma2 = math.log1p(cv * cv)
    return rng.lognormvariate(-sigma2 / 2.0, math.sqrt(sigma2))


def kv_pool_tokens(hw: Hardware, model: ModelSpec,
                   gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
                   draft: ModelSpec | None = None) -> int | None:
    """KV pool capacity in tokens (docs/servers.md#timing-model): ``None`` when the catalog
    has no device memory, ``0`` or less when the resident weights do not fit."""
    if not hw.memory_gb:
        return None
    resident = (model.total_params or model.params) * model.weight_bytes_per_param
    free = hw.memory_gb * 1e9 * gpu_memory_utilization - resident
    if draft is not None:
        free -= (draft.total_params or draft.params) * draft.weight_bytes_per_param
        return int(free // (model.kv_bytes_per_token + draft.kv_bytes_per_token))
    return int(free // model.kv_bytes_per_token)
