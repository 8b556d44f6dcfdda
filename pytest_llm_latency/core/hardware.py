"""Hardware and model descriptions used by the roofline math and the reference target.

Pure dataclasses.  The catalog *data* lives in ``pytest_llm_latency/data/``;
``pytest_llm_latency.catalog`` loads it into these types.
"""
from __future__ import annotations

from dataclasses import dataclass, field

GB = 1e9


@dataclass(frozen=True)
class Hardware:
    key: str                      # canonical catalog key, e.g. "h100-sxm"
    name: str                     # display name, e.g. "H100-SXM"
    mem_bandwidth_gb_s: float     # published peak memory bandwidth, GB/s (1e9 B/s)
    peak_bf16_tflops: float | None = None  # dense bf16, for prefill ceilings
    memory_gb: float | None = None
    source: str = ""              # where the figure comes from (datasheet)
    aliases: tuple[str, ...] = ()

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.mem_bandwidth_gb_s * GB


@dataclass(frozen=True)
class ModelSpec:
    """What decode reads per token: the weights once, plus the KV cache of the context."""

    name: str
    params: float                  # parameters read per decode step (active params for MoE)
    weight_bytes_per_param: float  # 2 for fp16/bf16, 0.5 for int4, 4.5/8 for Q4_0 ...
    layers: int
    kv_heads: int
    head_dim: int
    kv_bytes_per_elem: float = 2.0
    total_params: float | None = None  # MoE: all experts (memory footprint)
    max_model_len: int = 131072
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def weight_bytes(self) -> float:
        return self.params * self.weight_bytes_per_param

    @property
    def kv_bytes_per_token(self) -> float:
        """2 (K and V) x layers x kv_heads x head_dim x bytes per element."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.kv_bytes_per_elem
