"""Roofline timing model of one LLM inference engine step.  Pure: no I/O, no clock, no asyncio.

Every duration the reference server models comes from ``Physics.step`` below.  The
scheduler multiplies it by ``time_scale`` before sleeping; nothing else adds time.

Symbols (all SI: bytes, FLOP, seconds)
--------------------------------------
* ``P``   parameters read per token            ``ModelSpec.params``
* ``Wb``  weight bytes                         ``ModelSpec.weight_bytes`` (= P x bytes/param)
* ``kv``  KV-cache bytes per token             ``ModelSpec.kv_bytes_per_token``
          (2 x layers x kv_heads x head_dim x bytes/elem; 131,072 B for Llama-3.1-8B fp16)
* ``L``   layers;  ``H`` hidden size (see ``hidden_size``)
* ``F``   peak dense bf16 FLOP/s               ``Hardware.peak_bf16_tflops`` x 1e12
* ``B``   memory bandwidth, bytes/s            ``Hardware.mem_bandwidth_gb_s`` x 1e9
* ``e_c`` compute efficiency (MFU);  ``e_m`` bandwidth efficiency

One engine step (continuous batching, vLLM-V1 style)
----------------------------------------------------
A step processes, in one forward pass, one new token for every decoding sequence and a
chunk of ``n`` new prompt tokens for every sequence being prefilled (the whole prompt
when chunked prefill is off).  ``c`` is the number of tokens whose KV already exists
before the token(s) of this step: ``c`` = context for a decode (prompt + tokens
generated so far), the cached/already-computed prefix for a prefill chunk.

    T      = (#decodes) + sum(n)                                 tokens in the step
    pairs  = sum_decode (c + 1) + sum_prefill (n*c + n(n+1)/2)   causal (query, key) pairs
    FLOPs  = 2 P T + 4 L H pairs
    Bytes  = Wb + kv * (sum_decode c + sum_prefill c)
    time   = max(FLOPs / (F e_c), Bytes / (B e_m))

* ``2 P T``: a matmul does one multiply-add (2 FLOP) per weight per token.
* ``4 L H`` per (query, key) pair: ``QK^T`` and ``AV`` are each 2 H FLOP per pair per
  layer.  For a lone prefill of ``N`` tokens (``c`` = 0) the attention term is
  ``2 L H N(N+1)`` -- it grows with the square of the prompt, so doubling the prompt
  more than doubles the prefill time.
* The weights are read once per step and shared by the whole batch; every decode
  re-reads its own KV cache, a prefill chunk reads the KV of the prefix before it.
  KV *writes* (n x kv per step) and activations are ignored (<1 % of Wb for n < 1000).
* The ``max`` is the roofline: a step is memory-bound until the batch is large
  (about ``F e_c Wb / (2 P B e_m)`` = 148 decodes for Llama-3.1-8B fp16 on an H100 at
  e_c 0.5, e_m 1.0), then compute-bound.

Consequences the acceptance tests check (H100-SXM, Llama-3.1-8B fp16, e_m = 1):
single-stream decode = B / (Wb + kv c) = 3.35e12 / (16.06e9 + 131072 c) ~ 208.6 tok/s at
short context; 167 tok/s at e_m 0.8; at c = 8000 the step is 1.065x slower than at 100.

Speculative decoding / multi-token prediction (``decode_drafts``)
----------------------------------------------------------------
A decode that verifies ``d`` drafted tokens runs ``1 + d`` query positions through the
target in the same step: ``T`` counts them (so an MoE step touches the experts of batch x
(k + 1) positions, ``weights_read``), each position attends to its own prefix
(``pairs`` += (d + 1)(c + 1) + d(d + 1)/2), the target's weights and the sequence's KV
are still read once.  The drafter (``Drafter``) adds, per drafting forward pass (as many
as the longest draft in the batch; the batch shares one pass), its weight bytes ``Wd``,
and per drafted token its own KV at the context:

    Bytes += Wd x max(d) + kv_d x sum_decode d x c      FLOPs += 2 P_d x sum(d)

A draft model: ``Wd`` its weights, ``kv_d`` its KV per token.  EAGLE / MTP heads:
``Wd`` = the head's bytes (its layers and the LM head), no KV.  n-gram / prompt lookup:
``Drafter`` None (reads nothing).  The drafting passes are charged to the step that
verifies their tokens (vLLM runs them right after the step before, in the same engine
iteration).  Single stream, a step verifying ``k`` drafts reads
``Wb + kv c + k (Wd + kv_d c)``.  With no drafts every figure is exactly the formula above.

Efficiency defaults (documented in ``DEFAULT_DECODE_EFFICIENCY`` /
``DEFAULT_PREFILL_EFFICIENCY``): 0.7 of bandwidth and 0.5 MFU, typical of a tuned vLLM
deployment.  ``efficiency=x`` in the config sets both.
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
#: Used only when the catalog has no peak FLOP/s for a device (CPUs): an arithmetic
#: intensity ridge of 10 FLOP/byte, i.e. F = 10 x B.  Override with ``peak_tflops``.
FALLBACK_RIDGE_FLOP_PER_BYTE = 10.0


def hidden_size(model: ModelSpec) -> int:
    """Hidden size ``H`` used only by the attention FLOP term.

    ``ModelSpec`` has no hidden size, so it is taken from ``hidden_size`` on the spec or
    in ``spec.extra`` when present, else estimated from the dense-transformer identity
    ``P ~ 12 L H^2``: ``H = sqrt(P / (12 L))``.  For Llama-3.1-8B that gives 4573 (true
    value 4096): the attention term is then ~12 % high, i.e. conservative.
    """
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
        """Weight bytes one step reads: all of them (dense), or, for MoE, shared weights plus
        the routed experts that ``tokens`` tokens touch (``ModelBytes.weight_bytes_at_batch``,
        the same rule as the roofline gate's ceiling)."""
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
        drafted tokens each decode verifies (same order; missing = 0) (module docstring)."""
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


def jitter_factor(rng, cv: float) -> float:
    """One multiplicative noise factor for a step's duration: lognormal with mean 1 and
    coefficient of variation ``cv`` (``sigma^2 = ln(1 + cv^2)``, ``mu = -sigma^2 / 2``).

    Lognormal because a duration is positive and its noise multiplicative (clock, cache and
    scheduling effects scale the work); mean 1 keeps the roofline's *expected* timings.
    ``cv <= 0`` returns exactly 1 without drawing (jitter off: bit-identical timings).
    ``rng`` is a ``random.Random``: the caller seeds it, so a run is reproducible.
    """
    if cv <= 0:
        return 1.0
    sigma2 = math.log1p(cv * cv)
    return rng.lognormvariate(-sigma2 / 2.0, math.sqrt(sigma2))


def kv_pool_tokens(hw: Hardware, model: ModelSpec,
                   gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
                   draft: ModelSpec | None = None) -> int | None:
    """KV pool capacity in tokens: ``(memory_gb x 1e9 x utilization - Wb) / kv``.

    Like vLLM's start-up profiling with ``--gpu-memory-utilization`` (activations
    ignored).  ``Wb`` here is the *resident* weights: all experts of a MoE
    (``total_params``), although a decode step reads only the active ones.  ``None`` when
    the catalog has no device memory (the caller then needs an explicit
    ``kv_pool_tokens``); ``0`` or less means the weights do not fit.  A ``draft`` model
    (speculative decoding) is resident too and keeps its own KV for every pooled token:
    ``(memory x utilization - Wb - Wd) / (kv + kv_d)``.
    """
    if not hw.memory_gb:
        return None
    resident = (model.total_params or model.params) * model.weight_bytes_per_param
    free = hw.memory_gb * 1e9 * gpu_memory_utilization - resident
    if draft is not None:
        free -= (draft.total_params or draft.params) * draft.weight_bytes_per_param
        return int(free // (model.kv_bytes_per_token + draft.kv_bytes_per_token))
    return int(free // model.kv_bytes_per_token)
