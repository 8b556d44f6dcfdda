"""How many bytes decode reads per token: weights (once per step) and KV cache (per context token).

Pure: no I/O, no pytest/httpx/yaml.  Sources of the byte counts:

* ``bytes_per_param(dtype=..., bits=...)``: torch-style dtypes and GGUF quant types;
* ``core.roofline.archs.model_bytes_from_hf_config(cfg)``: per-architecture arithmetic of an HF ``config.json``;
* ``model_bytes_from_llamacpp_models(payload)``: llama.cpp ``/v1/models`` ``meta`` (``n_params``, ``size``);
* ``kv_bytes_per_token(...)``: the one KV formula every layer uses.

A GGUF file's tensor table is read by ``pytest_llm_latency.roofline.gguf_reader`` and a model
directory's safetensors headers by ``pytest_llm_latency.roofline.safetensors_reader`` (I/O; the
preferred source where a directory has them, config arithmetic the fallback).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..errors import ConfigError
from .kv_layout import KVLayout
# re-exported: many modules import it from here
from .kv_layout import format_bytes

# Bytes per element of plain (unquantized or uniformly quantized) dtypes.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0, "float32": 4.0, "f32": 4.0,
    "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "float16": 2.0, "f16": 2.0, "half": 2.0,
    "fp8": 1.0, "float8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0, "w8a8": 1.0,
    "int4": 0.5, "w4a16": 0.5, "awq": 0.5, "gptq": 0.5, "fp4": 0.5, "nf4": 0.5,
}

# GGML tensor types: exact bits per weight from the block layout (ggml-common.h block structs:
# bytes per block x 8 / weights per block), scales included.  Q4_0 = (2 + 16) B / 32 = 4.5 bpw.
GGML_TYPE_BITS: dict[str, float] = {
    "F32": 32.0, "F16": 16.0, "BF16": 16.0,
    "Q4_0": 4.5, "Q4_1": 5.0, "Q5_0": 5.5, "Q5_1": 6.0, "Q8_0": 8.5,
    "Q2_K": 2.625, "Q3_K": 3.4375, "Q4_K": 4.5, "Q5_K": 5.5, "Q6_K": 6.5625, "Q8_K": 9.125,
    "IQ1_S": 1.5625, "IQ1_M": 1.75, "IQ2_XXS": 2.0625, "IQ2_XS": 2.3125, "IQ2_S": 2.5625,
    "IQ3_XXS": 3.0625, "IQ3_S": 3.4375, "IQ4_NL": 4.5, "IQ4_XS": 4.25,
    "TQ1_0": 1.6875, "TQ2_0": 2.0625, "MXFP4": 4.25,
}

# llama-quantize *file types* mix tensor types (attention/output tensors kept at higher precision),
# so their average bits per weight depend on the model.  Figures: llama.cpp quantize README,
# "Llama 2 7B" bits-per-weight table.  For the exact figure of one file, read its tensor table.
GGUF_FILE_TYPE_BITS: dict[str, float] = {
    "Q2_K": 3.35, "Q3_K_S": 3.50, "Q3_K_M": 3.91, "Q3_K_L": 4.27,
    "Q4_K_S": 4.58, "Q4_K_M": 4.84, "Q5_K_S": 5.52, "Q5_K_M": 5.68,
}
# llama-quantize's aliases: Q3_K means Q3_K_M, Q4_K means Q4_K_M, Q5_K means Q5_K_M.
_FILE_TYPE_ALIASES = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}


def _gguf_bits(name: str) -> float | None:
    up = name.upper()
    up = _FILE_TYPE_ALIASES.get(up, up)
    return GGUF_FILE_TYPE_BITS.get(up, GGML_TYPE_BITS.get(up))


def bytes_per_param(dtype: str | None = None, bits: float | None = None, *, where: str = "dtype") -> float:
    """Bytes per weight for a dtype name (``fp16``, ``int4``, ``Q4_K_M``, ...) or explicit ``bits``."""
    if bits is not None:
        if dtype is not None:
            raise ConfigError(f"{where}: give either a dtype ({dtype!r}) or bits ({bits}), not both")
        if not isinstance(bits, (int, float)) or isinstance(bits, bool) or not 0 < bits <= 64:
            raise ConfigError(f"{where}: bits must be a number in (0, 64], got {bits!r}; e.g. bits: 4.5 for Q4_0")
        return float(bits) / 8.0
    if not dtype:
        raise ConfigError(f"{where}: no dtype given; set it (fp16, bf16, fp8, int4, Q4_K_M, ...) or bits")
    key = str(dtype).strip()
    if key.lower() in DTYPE_BYTES:
        return DTYPE_BYTES[key.lower()]
    gg = _gguf_bits(key)
    if gg is not None:
        return gg / 8.0
    known = sorted(DTYPE_BYTES) + sorted(set(GGML_TYPE_BITS) | set(GGUF_FILE_TYPE_BITS) | set(_FILE_TYPE_ALIASES))
    close = difflib.get_close_matches(key.upper(), [k.upper() for k in known], n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"{where}: unknown dtype {dtype!r}{hint} (known: fp32, bf16, fp16, fp8, int8, int4, "
                      f"GGUF types {', '.join(sorted(set(GGML_TYPE_BITS) | set(GGUF_FILE_TYPE_BITS)))}; "
                      "or give bits)")


_FLOAT_DTYPES = ("fp32", "float32", "f32", "bf16", "bfloat16", "fp16", "float16", "f16", "half")


def kv_elem_bytes(kv_dtype: str | None, weight_dtype: str | None = None, *, where: str = "kv_dtype") -> float:
    """Bytes per KV-cache element.  The KV dtype is separate from the weights': by default it is the
    weights' dtype when that is a 16/32-bit float, else fp16 (int4/GGUF/fp8 weights keep a 16-bit KV
    cache unless the server is told otherwise, e.g. vLLM ``--kv-cache-dtype fp8``)."""
    if kv_dtype is None:
        kv_dtype = weight_dtype if str(weight_dtype or "").lower() in _FLOAT_DTYPES else "fp16"
    elem = DTYPE_BYTES.get(str(kv_dtype).lower())
    if elem is None or elem < 1:
        raise ConfigError(f"{where}: unknown KV cache dtype {kv_dtype!r}; use fp16, bf16, fp8 or int8")
    return elem


#: How the ceiling charges the input embedding wherever the model's structure is known (config.json,
#: safetensors headers, GGUF tensor table): a decode step gathers ONE row of an untied input
#: embedding table per sequence; the output head (lm_head, or the tied table serving as it) is read
#: whole.  A bare parameter count (``params``, a catalog entry with ``params``) has no structure and
#: is charged whole, so ``--params 8e9 --dtype fp16`` stays 16 GB (about 209 tok/s on an H100 SXM).
EMBEDDING_CONVENTION = ("input embedding: one row per step (untied table gathered, not read); "
                        "output head read whole")


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_elem: float) -> float:
    """K and V for every layer: 2 x layers x kv_heads x head_dim x bytes per element."""
    return 2.0 * layers * kv_heads * head_dim * bytes_per_elem


@dataclass(frozen=True)
class ModelBytes:
    """Bytes one decode step reads for one sequence: the weights, plus ``kv_bytes_per_token`` x context.

    ``weight_bytes`` is the single-stream figure (active experts only for MoE).  For MoE the
    routed experts' bytes are kept so that a batch can be charged the experts it touches.
    ``kv_bytes_per_token`` is None when the KV shape is unknown.  ``kv_layout`` (per-layer kinds:
    full, sliding, chunked, latent, state; ``core.roofline.kv_layout``), when given, is what a step reads at
    a context, and ``kv_bytes_per_token`` its growth per token far past every window.
    ``embedding`` says which input-embedding convention the weights follow (``EMBEDDING_CONVENTION``).
    """

    weight_bytes: float
    kv_bytes_per_token: float | None
    name: str = "model"
    params: float | None = None              # params read per token (active for MoE)
    total_params: float | None = None
    bytes_per_param: float | None = None
    routed_weight_bytes: float = 0.0         # MoE: bytes of all routed experts (0 for dense)
    experts: int = 0
    experts_per_token: int = 0
    source: str = ""
    kv_not_counted: str = ""                 # why the KV cache is left out of the step (counted as 0)
    kv_layout: KVLayout | None = None        # per-layer KV / state; None: kv_bytes_per_token x context
    embedding: str = ""                      # how the input embedding is charged ("" : as part of params)

    @property
    def kv_known(self) -> bool:
        return self.kv_layout is not None or self.kv_bytes_per_token is not None

    def kv_bytes_at(self, context: float) -> float:
        """KV (and recurrent-state) bytes one sequence's decode step reads at ``context`` tokens:
        the layout's per-layer sum, else ``kv_bytes_per_token x context`` (0 when not counted)."""
        if self.kv_not_counted:
            return 0.0
        if self.kv_layout is not None:
            return self.kv_layout.bytes_at(context)
        return (self.kv_bytes_per_token or 0.0) * context

    def describe_kv(self, context: float) -> str:
        """The KV arithmetic at ``context``: the layout's split, or ``B/token x context``."""
        if self.kv_layout is not None and not self.kv_layout.uniform_full:
            return self.kv_layout.describe(context)
        if self.kv_bytes_per_token is None:
            return "KV shape unknown"
        return f"KV: {self.kv_bytes_per_token:,.0f} B/token × {context:g}"

    def with_kv(self, kv_bytes_per_token: float | None, *, layout: KVLayout | None = None) -> "ModelBytes":
        """The same weights with another KV cache (an explicit shape or bytes per token)."""
        from dataclasses import replace

        return replace(self, kv_bytes_per_token=kv_bytes_per_token, kv_layout=layout, kv_not_counted="")

    def weight_bytes_at_batch(self, batch: int) -> float:
        """Weights read by one step of ``batch`` sequences (read once, shared by the batch).

        Dense: ``weight_bytes``.  MoE: shared weights plus the expected share of routed experts
        touched, assuming uniform routing: ``1 - (1 - k/E)**batch`` (= k/E at batch 1).
        """
        if not self.experts or not self.routed_weight_bytes:
            return self.weight_bytes
        share = self.experts_per_token / self.experts
        shared = self.weight_bytes - self.routed_weight_bytes * share
        return shared + self.routed_weight_bytes * (1.0 - (1.0 - share) ** batch)


def model_bytes_from_params(params: float, *, dtype: str | None = None, bits: float | None = None,
                            layers: int | None = None, kv_heads: int | None = None,
                            head_dim: int | None = None, kv_dtype: str | None = None,
                            name: str = "model", where: str = "params",
                            dtype_where: str = "dtype") -> ModelBytes:
    """Explicit ``params`` + ``dtype``/``bits``; KV from the shape when all three are given."""
    _positive(params, where)
    bpp = bytes_per_param(dtype, bits, where=dtype_where)
    kv = kv_from_shape(layers, kv_heads, head_dim, kv_elem_bytes(kv_dtype, dtype, where="kv_dtype"),
                       where="KV shape")
    label = dtype if dtype else f"{bits:g}-bit"
    return ModelBytes(weight_bytes=params * bpp, kv_bytes_per_token=kv, name=name, params=float(params),
                      total_params=float(params), bytes_per_param=bpp,
                      source=f"{params:.4g} params x {bpp:g} B ({label})")


def kv_from_shape(layers, kv_heads, head_dim, elem_bytes: float, *, where: str = "kv") -> float | None:
    """KV bytes per token from a shape; None when no part is given, ConfigError when only some are."""
    given = {"layers": layers, "kv_heads": kv_heads, "head_dim": head_dim}
    if all(v is None for v in given.values()):
        return None
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise ConfigError(f"{where}: the KV shape needs layers, kv_heads and head_dim; missing {', '.join(missing)}")
    for k, v in given.items():
        _positive(v, f"{where}: {k}")
    return kv_bytes_per_token(int(layers), int(kv_heads), int(head_dim), elem_bytes)


def _positive(value, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
        raise ConfigError(f"{what} must be a positive number, got {value!r}")


# ---------------------------------------------------------------------------- llama.cpp server

def model_bytes_from_llamacpp_models(payload: dict, *, kv_bytes_per_token: float | None = None,
                                     model_id: str | None = None, where: str = "/v1/models") -> ModelBytes:
    """Weights from llama.cpp ``GET /v1/models``: ``data[i].meta`` has ``n_params`` and ``size`` (bytes).

    ``size`` is the total tensor bytes of the loaded GGUF (dense models: what decode reads per
    token).  The meta has no KV shape; pass ``kv_bytes_per_token`` if known.
    """
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{where}: expected {{'data': [{{'id': ..., 'meta': {{...}}}}]}}; "
                          "is this a llama.cpp server? otherwise give params and dtype")
    entry = data[0]
    if model_id is not None:
        matches = [d for d in data if isinstance(d, dict) and d.get("id") == model_id]
        if not matches:
            ids = [d.get("id") for d in data if isinstance(d, dict)]
            raise ConfigError(f"{where}: no model {model_id!r} (served: {ids})")
        entry = matches[0]
    meta = entry.get("meta") if isinstance(entry, dict) else None
    if not isinstance(meta, dict) or not meta.get("size") or not meta.get("n_params"):
        raise ConfigError(f"{where}: model entry has no meta.n_params/meta.size (llama.cpp reports them; "
                          "other servers do not): give params and dtype instead")
    size, n = float(meta["size"]), float(meta["n_params"])
    return ModelBytes(weight_bytes=size, kv_bytes_per_token=kv_bytes_per_token, name=str(entry.get("id", "model")),
                      params=n, total_params=n, bytes_per_param=size / n,
                      source=f"{where} meta: size {format_bytes(size)}, n_params {n:.4g}")
