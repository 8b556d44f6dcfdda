"""Read a GGUF file's header and tensor table (the optional ``gguf`` package maps the file): the
bytes a decode step reads, as docs/roofline.md#from-a-gguf-file says; the KV cache and recurrent
state per layer kind: ``gguf_layout``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import ConfigError
from ..core.roofline.modelbytes import EMBEDDING_CONVENTION, ModelBytes, format_bytes, kv_elem_bytes
from .gguf_layout import gguf_kv_layout


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
    bytes_by_type: dict = field(default_factory=dict)
    #: ``<arch>.*`` metadata (arrays as lists), for the KV layout
    metadata: dict = field(default_factory=dict, repr=False)
    #: the untied input embedding ``token_embd.weight``: (bytes, params, rows); None when tied (the
    #: file has no ``output.weight``: the table is the output head, read whole) or absent
    input_embedding: tuple[int, int, int] | None = None
    #: tensors of MTP blocks (``nextn_predict_layers``): loaded for drafting, not read by a trunk step
    mtp_bytes: int = 0
    mtp_params: int = 0


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


def _layer_of(name: str) -> int | None:
    """``blk.12.attn_q.weight`` -> 12."""
    if not name.startswith("blk."):
        return None
    idx = name.split(".", 2)[1]
    return int(idx) if idx.isdigit() else None


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
    # the <arch>.* keys only: tokenizer arrays are large and not needed
    meta = {k: _value(f) for k, f in reader.fields.items() if arch and k.startswith(f"{arch}.")}
    blocks = meta.get(f"{arch}.block_count")
    first_mtp = None if blocks is None else int(blocks) - int(meta.get(f"{arch}.nextn_predict_layers") or 0)
    total_bytes = total_params = expert_bytes = expert_params = mtp_bytes = mtp_params = 0
    by_type: Counter = Counter()
    embd = None
    names = set()
    for t in reader.tensors:
        nb, ne = int(t.n_bytes), int(t.n_elements)
        names.add(t.name)
        total_bytes += nb
        total_params += ne
        by_type[t.tensor_type.name] += nb
        layer = _layer_of(t.name)
        if layer is not None and first_mtp is not None and layer >= first_mtp:
            mtp_bytes += nb
            mtp_params += ne
        elif "_exps" in t.name:
            expert_bytes += nb
            expert_params += ne
        if t.name == "token_embd.weight":
            embd = (nb, ne, int(t.shape[-1]) if len(t.shape) > 1 else 1)  # ggml ne = {n_embd, n_vocab}
    if not total_params:
        raise ConfigError(f"gguf: {str(p)!r} has no tensors (a vocab-only file?); give the model's weights file")
    experts = int(get(f"{arch}.expert_count") or 0)
    used = int(get(f"{arch}.expert_used_count") or 0)
    if expert_bytes and not (experts and 0 < used <= experts):
        raise ConfigError(f"gguf: {str(p)!r} has expert tensors but expert_count={experts}, "
                          f"expert_used_count={used}; give params explicitly")
    return GGUFSummary(path=str(p), architecture=arch, name=get("general.name"), tensor_bytes=total_bytes,
                       params=total_params, expert_bytes=expert_bytes, expert_params=expert_params,
                       experts=experts if expert_bytes else 0, experts_per_token=used if expert_bytes else 0,
                       layers=None if blocks is None else int(blocks), bytes_by_type=dict(by_type),
                       metadata=meta, input_embedding=embd if "output.weight" in names else None,
                       mtp_bytes=mtp_bytes, mtp_params=mtp_params)


def model_bytes_from_gguf(path: str | Path, *, kv_dtype: str | None = None, kv_layout: bool = True) -> ModelBytes:
    """ModelBytes of a GGUF file: the tensor bytes one decode step reads and the per-layer KV layout
    of its metadata (``gguf_layout``; f16 unless ``kv_dtype``, llama.cpp's default).  ``kv_layout=False``:
    the caller gives the KV shape itself, so a layout not modelled is no error (the KV is left unknown)."""
    s = read_gguf(path)
    where = f"gguf {Path(s.path).name!r}"
    layout = None
    if kv_layout:
        layout = gguf_kv_layout(s.metadata, s.architecture, where=where,
                                elem_bytes=kv_elem_bytes(kv_dtype, None, where="gguf: kv_dtype"))
    unread = 1 - s.experts_per_token / s.experts if s.experts else 0.0  # the routed experts a step skips
    read_bytes = s.tensor_bytes - s.expert_bytes * unread - s.mtp_bytes
    read_params = s.params - s.expert_params * unread - s.mtp_params
    notes = []
    if s.experts:
        notes.append(f"routed experts {s.experts_per_token} of {s.experts} "
                     f"({format_bytes(s.expert_bytes * s.experts_per_token / s.experts)} of "
                     f"{format_bytes(s.expert_bytes)})")
    if s.input_embedding is not None:
        nb, ne, rows = s.input_embedding
        read_bytes -= nb - nb / rows
        read_params -= ne - ne / rows
        notes.append(f"input embedding one row of {rows} ({format_bytes(nb / rows)} of {format_bytes(nb)}), "
                     "output head whole")
    else:
        notes.append("input embedding tied to the output head: read whole")
    if s.mtp_bytes:
        notes.append(f"MTP blocks not read ({format_bytes(s.mtp_bytes)})")
    types = ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted(s.bytes_by_type.items(), key=lambda kv_: -kv_[1]))
    return ModelBytes(
        weight_bytes=read_bytes, kv_bytes_per_token=None if layout is None else layout.growth_per_token,
        name=s.name or Path(s.path).stem, params=read_params, total_params=float(s.params),
        bytes_per_param=s.tensor_bytes / s.params, routed_weight_bytes=float(s.expert_bytes), experts=s.experts,
        experts_per_token=s.experts_per_token, kv_layout=layout, embedding=EMBEDDING_CONVENTION,
        source=f"{Path(s.path).name}: {format_bytes(s.tensor_bytes)} of tensors ({types}), {s.params:.4g} params; "
               f"read per step {format_bytes(read_bytes)}: {'; '.join(notes)}")
