"""Read a GGUF file's header and tensor table: total tensor bytes, parameter count, KV shape.

Uses the optional ``gguf`` package (``pip install 'pytest-llm-latency[gguf]'``), which maps the
file instead of loading it, so multi-GB files are cheap to inspect.  MoE files: routed-expert
tensors (``blk.N.ffn_{gate,up,down}_exps``) are charged only ``expert_used_count / expert_count``
of their bytes per token.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import ConfigError
from ..core.modelbytes import ModelBytes, format_bytes, kv_bytes_per_token, kv_elem_bytes


@dataclass(frozen=True)
class GGUFSummary:
    path: str
    architecture: str | None
    name: str | None
    tensor_bytes: int            # all tensors (what llama.cpp reports as "size")
    params: int                  # all tensor elements
    expert_bytes: int            # routed-expert tensors (MoE), included in tensor_bytes
    expert_params: int
    experts: int
    experts_per_token: int
    layers: int | None
    kv_heads_total: int | None   # summed over layers (a per-layer array is allowed)
    head_dim: int | None
    bytes_by_type: dict = field(default_factory=dict)

    @property
    def active_params(self) -> float:
        if not self.experts:
            return float(self.params)
        return self.params - self.expert_params * (1 - self.experts_per_token / self.experts)

    @property
    def active_bytes(self) -> float:
        if not self.experts:
            return float(self.tensor_bytes)
        return self.tensor_bytes - self.expert_bytes * (1 - self.experts_per_token / self.experts)


def _import_gguf():
    try:
        import gguf
    except ImportError:
        raise ConfigError("reading a GGUF file needs the 'gguf' package: pip install 'pytest-llm-latency[gguf]' "
                          "(or give params and dtype instead)") from None
    return gguf


def _value(f):
    """A field's value across gguf versions (``contents()`` is recent)."""
    if f is None:
        return None
    if hasattr(f, "contents"):
        return f.contents()
    part = f.parts[f.data[0]] if f.data else f.parts[-1]  # pragma: no cover - old gguf
    if getattr(part, "dtype", None) is not None and part.dtype.kind == "u" and part.dtype.itemsize == 1:
        return bytes(part).decode("utf-8")
    return part.tolist()[0] if len(f.data) == 1 else [f.parts[i].tolist()[0] for i in f.data]


def read_gguf(path: str | Path) -> GGUFSummary:
    gguf = _import_gguf()
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"gguf: no such file {str(p)!r}; give the path of the model's .gguf file")
    try:
        reader = gguf.GGUFReader(str(p), "r")
    except Exception as exc:  # the package raises ValueError/struct errors on bad files
        raise ConfigError(f"gguf: {str(p)!r} is not a readable GGUF file ({exc}); check the path") from None

    def get(key):
        return _value(reader.fields.get(key))

    arch = get("general.architecture")
    total_bytes = total_params = expert_bytes = expert_params = 0
    by_type: Counter = Counter()
    for t in reader.tensors:
        nb, ne = int(t.n_bytes), int(t.n_elements)
        total_bytes += nb
        total_params += ne
        by_type[t.tensor_type.name] += nb
        if "_exps" in t.name:
            expert_bytes += nb
            expert_params += ne
    if not total_params:
        raise ConfigError(f"gguf: {str(p)!r} has no tensors (a vocab-only file?); give the model's weights file")
    experts = int(get(f"{arch}.expert_count") or 0)
    used = int(get(f"{arch}.expert_used_count") or 0)
    if expert_bytes and not (experts and 0 < used <= experts):
        raise ConfigError(f"gguf: {str(p)!r} has expert tensors but expert_count={experts}, "
                          f"expert_used_count={used}; give params explicitly")
    layers = get(f"{arch}.block_count")
    heads = get(f"{arch}.attention.head_count")
    kv_heads = get(f"{arch}.attention.head_count_kv")
    if kv_heads is None:
        kv_heads = heads
    head_dim = get(f"{arch}.attention.key_length")
    if head_dim is None and heads and get(f"{arch}.embedding_length"):
        h = heads if isinstance(heads, int) else max(heads)
        head_dim = int(get(f"{arch}.embedding_length")) // h
    kv_total = None
    if layers is not None and kv_heads is not None:
        kv_total = int(sum(kv_heads)) if isinstance(kv_heads, list) else int(kv_heads) * int(layers)
    return GGUFSummary(path=str(p), architecture=arch, name=get("general.name"), tensor_bytes=total_bytes,
                       params=total_params, expert_bytes=expert_bytes, expert_params=expert_params,
                       experts=experts if expert_bytes else 0, experts_per_token=used if expert_bytes else 0,
                       layers=None if layers is None else int(layers), kv_heads_total=kv_total,
                       head_dim=None if head_dim is None else int(head_dim), bytes_by_type=dict(by_type))


def model_bytes_from_gguf(path: str | Path, *, kv_dtype: str | None = None) -> ModelBytes:
    """ModelBytes of a GGUF file: its tensor bytes (active experts for MoE) and the KV shape of its
    metadata; the KV cache defaults to f16, llama.cpp's default (``--cache-type-k/v``)."""
    s = read_gguf(path)
    kv = None
    if s.kv_heads_total and s.head_dim:
        kv = kv_bytes_per_token(1, s.kv_heads_total, s.head_dim, kv_elem_bytes(kv_dtype, None, where="gguf: kv_dtype"))
    types = ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted(s.bytes_by_type.items(), key=lambda kv_: -kv_[1]))
    moe = f", {s.experts_per_token} of {s.experts} experts" if s.experts else ""
    return ModelBytes(
        weight_bytes=s.active_bytes, kv_bytes_per_token=kv, name=s.name or Path(s.path).stem,
        params=s.active_params, total_params=float(s.params), bytes_per_param=s.tensor_bytes / s.params,
        routed_weight_bytes=float(s.expert_bytes), experts=s.experts, experts_per_token=s.experts_per_token,
        source=f"{Path(s.path).name}: {format_bytes(s.tensor_bytes)} of tensors ({types}), "
               f"{s.params:.4g} params{moe}")
