"""Hardware and model descriptions used by the roofline math and the reference target.

Pure dataclasses.  The catalog *data* lives in ``pytest_llm_latency/roofline/hardware.yaml``;
``pytest_llm_latency.roofline.catalog`` loads it into these types.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import ConfigError
from .modelbytes import ModelBytes, kv_bytes_per_token

#: A measurement this far above a ceiling (decode's bandwidth, prefill's compute) means the inputs
#: are wrong, not that the server is fast.
CONFIG_ERROR_RATIO = 1.05

@dataclass(frozen=True)
class Hardware:
    key: str                      # canonical catalog key, e.g. "h100-sxm"
    name: str                     # display name, e.g. "H100-SXM"
    mem_bandwidth_gb_s: float     # published peak memory bandwidth, GB/s (1e9 B/s)
    peak_bf16_tflops: float | None = None  # dense bf16, for prefill ceilings
    memory_gb: float | None = None
    source: str = ""              # where the figure comes from (datasheet)
    aliases: tuple[str, ...] = ()
    devices: int = 1              # >1: a tensor-parallel group; figures are the group's totals
    note: str = ""                # a caveat about the figure (e.g. a probe not cached: why), shown with it
    peak_tflops_by_dtype: tuple[tuple[str, float], ...] = ()  # dense figures of other dtypes, e.g. (("fp8", 1979),)
    measured_gb_s: float | None = None    # a probe's read figure for this device (local-gpu), beside the datasheet
    datasheet_gb_s: float | None = None   # set when the judged figure is the measured one (efficiency_of: measured)

    @property
    def efficiency_of(self) -> str:
        """Which figure ``mem_bandwidth_gb_s`` is: ``measured`` or ``datasheet``."""
        return "measured" if self.datasheet_gb_s is not None else "datasheet"

    def judged_on(self, basis: str) -> "Hardware":
        """The same device judged against its ``datasheet`` or ``measured`` figure."""
        if basis == self.efficiency_of or (basis == "datasheet" and self.measured_gb_s is None):
            return self
        if basis != "measured" or self.measured_gb_s is None:
            raise ConfigError(f"efficiency_of: {basis!r} needs a measured bandwidth ('measured' or 'datasheet'; "
                              "measured: hardware local-gpu, which probes the GPU)")
        return replace(self, mem_bandwidth_gb_s=self.measured_gb_s, datasheet_gb_s=self.mem_bandwidth_gb_s)

    def peak_tflops(self, dtype: str | None = None) -> tuple[float | None, str]:
        """Peak dense TFLOPS for the model's compute dtype: the dtype's own figure where the catalog
        has one, else the bf16 figure (None: unknown); with the field it came from."""
        key = (dtype or "").strip().lower().replace("float", "fp").replace("bfp16", "bf16")
        for name, value in self.peak_tflops_by_dtype:
            if name == key:
                return value, f"peak_tflops_by_dtype.{name}"
        return self.peak_bf16_tflops, "peak_bf16_tflops"

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.mem_bandwidth_gb_s * 1e9

    def tensor_parallel(self, tp: int) -> "Hardware":
        """A group of ``tp`` such devices: each reads its 1/tp shard of the weights and KV at the
        same time, so the group's bandwidth (and FLOPs, memory) is tp x the per-device figure."""
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise ConfigError(f"tensor-parallel size must be an integer >= 1, got {tp!r}")
        if tp == 1:
            return self
        if self.devices != 1:
            raise ConfigError(f"{self.name} is already a group of {self.devices} devices; give tp once")
        return replace(
            self, name=f"{tp}x {self.name}", mem_bandwidth_gb_s=self.mem_bandwidth_gb_s * tp,
            peak_bf16_tflops=None if self.peak_bf16_tflops is None else self.peak_bf16_tflops * tp,
            peak_tflops_by_dtype=tuple((k, v * tp) for k, v in self.peak_tflops_by_dtype),
            memory_gb=None if self.memory_gb is None else self.memory_gb * tp,
            measured_gb_s=None if self.measured_gb_s is None else self.measured_gb_s * tp,
            source=f"{tp} x ({self.source})", devices=tp)


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
    source: str = ""
    aliases: tuple[str, ...] = ()
    experts: int = 0               # MoE: routed experts per layer (0: dense)
    experts_per_token: int = 0     # MoE: experts each token is routed to

    @property
    def weight_bytes(self) -> float:
        return self.params * self.weight_bytes_per_param

    @property
    def kv_bytes_per_token(self) -> float:
        """2 (K and V) x layers x kv_heads x head_dim x bytes per element."""
        return kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, self.kv_bytes_per_elem)

    def model_bytes(self) -> ModelBytes:
        """What the roofline needs: weight bytes per step and KV bytes per context token."""
        total = self.total_params if self.total_params is not None else self.params
        routed = 0.0
        if self.experts and self.experts_per_token and self.experts > self.experts_per_token:
            # total - active = (E - k) experts' params, so all routed experts = that x E / (E - k)
            routed = (total - self.params) * self.experts / (self.experts - self.experts_per_token)
        return ModelBytes(
            weight_bytes=self.weight_bytes, kv_bytes_per_token=self.kv_bytes_per_token, name=self.name,
            params=self.params, total_params=total, bytes_per_param=self.weight_bytes_per_param,
            routed_weight_bytes=routed * self.weight_bytes_per_param, experts=self.experts,
            experts_per_token=self.experts_per_token,
            source=self.source or f"{self.params:.4g} params x {self.weight_bytes_per_param:g} B")
