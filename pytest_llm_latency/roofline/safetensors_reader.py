"""Exact weight bytes of a Hugging Face model directory from its ``*.safetensors`` headers: the first
source of docs/roofline.md#bytes-per-step-layer-by-layer-tensor-by-tensor (``roofline.resolve`` picks;
config arithmetic, ``core.roofline.archs``, is the fallback).

A safetensors file is an 8-byte little-endian header length, a JSON header (per tensor: dtype,
shape, ``data_offsets``), then the data.  Only the first 8 + n bytes of each file are read, never
the weights; a header over ``MAX_HEADER_BYTES`` or past the file's end is refused.  With
``model.safetensors.index.json`` only the shards its ``weight_map`` names are read; without it,
``model.safetensors`` when present (what transformers loads), else every ``*.safetensors``.

What a step is charged of each tensor is ``core.roofline.checkpoint_tensors``; k, E and the KV
layout come from the directory's ``config.json`` (a ``model_type`` not modelled: k and E from the
usual keys, the KV unknown).  No dependency on the ``safetensors`` package: ``json`` + ``struct``.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

from ..core.roofline.checkpoint_tensors import CheckpointBytes, Tensor, charge, tensor_nbytes
from ..core.errors import ConfigError
from ..core.roofline.modelbytes import EMBEDDING_CONVENTION, ModelBytes, format_bytes, kv_elem_bytes

#: a header longer than this is refused (the safetensors library's own limit is 100 MB)
MAX_HEADER_BYTES = 100_000_000
INDEX_NAME = "model.safetensors.index.json"
_WAY_OUT = "re-download it, or point config at the config.json file for config arithmetic"
#: config keys of E and k when the model_type is not modelled in core.roofline.archs
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
TOPK_KEYS = ("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_topk")


def read_header(path: str | Path) -> list[Tensor]:
    """The tensors of one safetensors file, from its header only (8 + n bytes read)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ConfigError(f"{p}: truncated safetensors file ({len(head)} bytes, shorter than the 8-byte "
                                  f"header length); {_WAY_OUT}")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise ConfigError(f"{p}: header length {n:,} bytes is over the {MAX_HEADER_BYTES:,}-byte limit: not a "
                                  f"safetensors file (a Git LFS pointer? run git lfs pull); {_WAY_OUT}")
            if 8 + n > size:
                raise ConfigError(f"{p}: header length {n:,} bytes runs past the file's end ({size:,} bytes): "
                                  f"truncated, or not a safetensors file; {_WAY_OUT}")
            raw = f.read(n)
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such file; give the model directory holding its *.safetensors") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read it ({exc}); {_WAY_OUT}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{p}: the safetensors header is not valid JSON ({exc}); {_WAY_OUT}") from None
    if not isinstance(header, dict):
        raise ConfigError(f"{p}: the safetensors header is not a JSON object; {_WAY_OUT}")
    data_size = size - 8 - n
    return [_tensor(p, name, entry, data_size) for name, entry in header.items() if name != "__metadata__"]


def _tensor(p: Path, name: str, entry, data_size: int) -> Tensor:
    where = f"{p}: tensor {name!r}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected {{dtype, shape, data_offsets}}, got {entry!r}; {_WAY_OUT}")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str):
        raise ConfigError(f"{where}: no dtype; {_WAY_OUT}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        raise ConfigError(f"{where}: shape must be a list of sizes >= 0, got {shape!r}; {_WAY_OUT}")
    nbytes = tensor_nbytes(dtype, tuple(shape), where=where)
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) and not isinstance(o, bool)
                                                                    for o in offsets)
            and 0 <= offsets[0] <= offsets[1]):
        raise ConfigError(f"{where}: data_offsets must be [begin, end], got {offsets!r}; {_WAY_OUT}")
    if offsets[1] - offsets[0] != nbytes:
        raise ConfigError(f"{where}: data_offsets span {offsets[1] - offsets[0]:,} bytes but {dtype} {shape} is "
                          f"{nbytes:,}; the header is corrupt: {_WAY_OUT}")
    if offsets[1] > data_size:
        raise ConfigError(f"{where}: its data ends at byte {offsets[1]:,} of a {data_size:,}-byte data section: the "
                          f"file is truncated; {_WAY_OUT}")
    return Tensor(name, dtype, tuple(shape), nbytes, str(p))


def safetensors_directory(config) -> Path | None:
    """``config`` as a directory holding ``*.safetensors`` (or their index), else None."""
    if isinstance(config, dict):
        return None
    p = Path(config)
    if p.is_dir() and ((p / INDEX_NAME).is_file() or any(p.glob("*.safetensors"))):
        return p
    return None


def checkpoint_files(directory: str | Path) -> tuple[list[Path], Path | None, dict[str, str]]:
    """(files to read, the index if any, its weight_map): the shards the index names; without an
    index ``model.safetensors`` when present, else every ``*.safetensors`` of the directory."""
    d = Path(directory)
    index = d / INDEX_NAME
    if index.is_file():
        try:
            data = json.loads(index.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"{index}: not valid JSON ({exc}); {_WAY_OUT}") from None
        wm = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(wm, dict) or not wm or not all(isinstance(v, str) for v in wm.values()):
            raise ConfigError(f"{index}: no weight_map {{tensor: shard file}}; {_WAY_OUT}")
        files = [d / s for s in dict.fromkeys(wm.values())]
        for f in files:
            if not f.is_file():
                raise ConfigError(f"{index}: weight_map names shard {f.name!r}, which is not in {d}; download every "
                                  f"shard, or point config at the config.json file for config arithmetic")
        return files, index, wm
    single = d / "model.safetensors"
    if single.is_file():
        return [single], None, {}
    files = sorted(d.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{d}: no *.safetensors files; give the model directory or its config.json")
    return files, None, {}


def read_checkpoint(directory: str | Path) -> tuple[list[Tensor], str]:
    """Every tensor of the checkpoint's files (headers only) and a label of what was read."""
    files, index, wm = checkpoint_files(directory)
    tensors: list[Tensor] = []
    seen: dict[str, str] = {}
    for f in files:
        for t in read_header(f):
            if t.name in seen:
                raise ConfigError(f"{f}: tensor {t.name!r} is also in {seen[t.name]}; a checkpoint stores each "
                                  f"tensor once (two formats in one directory?); keep one, or give {INDEX_NAME}")
            seen[t.name] = str(f)
            tensors.append(t)
    for name, shard in wm.items():
        if seen.get(name) != str(Path(directory) / shard):
            raise ConfigError(f"{index}: weight_map puts {name!r} in {shard!r}, whose header does not have it; "
                              f"{_WAY_OUT}")
    if index is not None:
        label = f"{index.name}: {len(files)} shards' headers"
    else:
        label = f"{files[0].name} headers" if len(files) == 1 else f"{len(files)} safetensors files' headers"
    return tensors, label


def _registered_architecture(cfg: dict, where: str):
    """``core.roofline.archs.architecture(cfg)`` when its model_type is modelled, else None."""
    from ..core.roofline.archs import architecture, known_model_types, text_config

    text = text_config(cfg)
    types = {str(text.get("model_type") or cfg.get("model_type") or ""), str(text.get("_outer_model_type") or "")}
    return architecture(cfg, where=where) if types & set(known_model_types()) else None


def _int_key(cfg: dict, keys: tuple[str, ...]) -> tuple[int, str]:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v, k
    return 0, ""


def model_bytes_from_safetensors(directory: str | Path, cfg: dict | None = None, *, kv_dtype: str | None = None,
                                 where: str | None = None) -> ModelBytes:
    """ModelBytes of a model directory: weights from its safetensors headers (what a text decode step
    reads: routed experts k / E, an untied input embedding one row, towers and MTP layers left out),
    the KV layout from ``cfg`` (its ``config.json``, read here when not given)."""
    from ..core.roofline.archs import text_config

    d = Path(directory)
    where = where or str(d / "config.json")
    if cfg is None:
        try:
            cfg = json.loads((d / "config.json").read_text("utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{where}: no such file; the safetensors headers need the model's config.json beside "
                              "them (experts, layers, attention)") from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
    tensors, label = read_checkpoint(d)
    arch = _registered_architecture(cfg, where)
    text = text_config(cfg)
    if arch is not None:
        experts, k, experts_where = arch.experts, arch.experts_per_token, f"{where} ({arch.model_type})"
    else:
        (experts, ek), (k, kk) = _int_key(text, EXPERT_KEYS), _int_key(text, TOPK_KEYS)
        experts_where = f"{where} ({ek or '/'.join(EXPERT_KEYS)}, {kk or '/'.join(TOPK_KEYS)})"
    layers = text.get("num_hidden_layers")
    cb = charge(tensors, experts=experts, experts_per_token=k,
                layers=layers if isinstance(layers, int) else None,
                has_mtp="num_nextn_predict_layers" in text, experts_where=experts_where)
    if not cb.charged_bytes:
        raise ConfigError(f"{d}: the safetensors headers list no tensor a text decode step reads; give the "
                          "language model's directory, or its config.json for config arithmetic")
    model_type = str(text.get("model_type") or cfg.get("model_type") or "?")
    if arch is not None:
        elem = kv_elem_bytes(kv_dtype, text.get("torch_dtype") or text.get("dtype"), where=f"{where}: kv_dtype")
        layout = arch.kv_layout(elem, source=f"{where}: {arch.model_type} layer kinds")
        kv, kv_note = layout.growth_per_token, f"KV: {arch.model_type} layer kinds of config.json"
    else:
        layout, kv = None, None
        kv_note = (f"KV unknown: model_type {model_type!r} is not modelled, give layers, kv_heads and head_dim "
                   "(or kv_bytes_per_token) for a context > 0")
    params, total_params, params_note = _params(cb, arch)
    return ModelBytes(
        weight_bytes=cb.charged_bytes, kv_bytes_per_token=kv, name=d.resolve().name, params=params,
        total_params=total_params, bytes_per_param=cb.charged_bytes / params if params else None,
        routed_weight_bytes=float(cb.routed_bytes), experts=cb.experts, experts_per_token=cb.experts_per_token,
        kv_layout=layout, embedding=EMBEDDING_CONVENTION, source=_source(label, cb, params_note, kv_note))


def _params(cb: CheckpointBytes, arch) -> tuple[float | None, float | None, str]:
    """(params read per step, all params, a note): the headers' elements when every tensor is a plain
    float value; else config arithmetic when the architecture is modelled; else unknown."""
    if cb.plain:
        return cb.charged_elements, float(cb.total_elements), ""
    what = (f"{'/'.join(cb.packed_dtypes)} tensors hold packed values" if cb.packed_dtypes
            else "quantization scales are stored tensors") + ": stored elements are not params"
    if arch is not None:
        return arch.active_params, arch.total_params, f"params from config arithmetic ({what})"
    return None, None, f"params unknown ({what}; give params for the prefill gate)"


def _source(label: str, cb: CheckpointBytes, params_note: str, kv_note: str) -> str:
    """``model.safetensors headers: 12.80 GB of tensors (U8 10.10 GB, BF16 2.70 GB), 4 of 32 experts,
    input embedding one row; read per step 3.62 GB; ...``"""
    dtypes = ", ".join(f"{dt} {format_bytes(b)}" for dt, b in sorted(cb.by_dtype.items(), key=lambda kv_: -kv_[1]))
    head = [f"{label}: {format_bytes(cb.total_bytes)} of tensors ({dtypes})"]
    if cb.experts:
        head.append(f"{cb.experts_per_token} of {cb.experts} experts")
    if cb.embedding:
        head.append(cb.embedding)
    parts = [", ".join(head), f"read per step {format_bytes(cb.charged_bytes)}"]
    if cb.excluded:
        parts.append("not read in text decode: " + ", ".join(
            f"{what} {format_bytes(b)} ({n} tensor{'s' if n != 1 else ''})" for what, (n, b) in cb.excluded.items()))
    if params_note:
        parts.append(params_note)
    parts.append(kv_note)
    return "; ".join(parts)
