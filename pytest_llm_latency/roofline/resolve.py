"""One model-bytes resolver, used by the pytest roofline gate and by the ``ceiling`` CLI.

``resolve_model_bytes`` turns the user's model description (catalog name, params + dtype/bits,
HF config.json, GGUF file, KV shape overrides) into ``ModelBytes``; ``roofline_inputs`` reads a
whole YAML ``roofline:`` mapping into (Hardware, ModelBytes).  ``names`` maps keyword names to
how the user wrote them (``--kv-heads``, ``roofline.kv_heads``) so that errors name the right
flag or key.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ..core.errors import ConfigError
from ..core.roofline.hardware import Hardware
from ..core.roofline.archs import model_bytes_from_hf_config
from ..core.roofline.modelbytes import (ModelBytes, bytes_per_param, format_bytes, kv_elem_bytes, kv_from_shape,
    model_bytes_from_params)
from . import catalog

FLAGS = {"model": "--model", "model_bytes": "--model-bytes", "params": "--params", "dtype": "--dtype", "bits": "--bits",
         "config": "--config", "gguf": "--gguf", "layers": "--layers", "kv_heads": "--kv-heads",
         "head_dim": "--head-dim", "kv_dtype": "--kv-dtype", "kv_bytes_per_token": "--kv-bytes-per-token",
         "window": "--window"}


def resolve_model_bytes(*, model: str | None = None, model_bytes: float | None = None,
                        params: float | None = None, dtype: str | None = None,
                        bits: float | None = None, config: str | Path | dict | None = None,
                        gguf: str | Path | None = None, layers: int | None = None, kv_heads: int | None = None,
                        head_dim: int | None = None, kv_dtype: str | None = None,
                        kv_bytes_per_token: float | None = None, window: int | None = None,
                        names: dict | None = None, name: str | None = None) -> ModelBytes:
    """One weights source (``model``, ``model_bytes``, ``params``, ``config``, ``gguf``) plus KV overrides;
    ``kv_bytes_per_token`` (+ ``window``) gives the KV cache of any model directly, replacing the source's."""
    n = {**{k: k for k in FLAGS}, **(names or {})}
    explicit_kv = explicit_kv_layout(kv_bytes_per_token, window, (layers, kv_heads, head_dim, kv_dtype), n)
    sources = {k: v for k, v in (("model", model), ("model_bytes", model_bytes), ("params", params),
                                  ("config", config), ("gguf", gguf)) if v is not None}
    if len(sources) != 1:
        given = ", ".join(n[k] for k in sources) or "none"
        raise ConfigError(f"model bytes: give exactly one of {n['model']} (catalog name), {n['params']} "
                          f"(+ {n['dtype']}/{n['bits']}), {n['config']} (config.json), {n['gguf']} (file) or "
                          f"{n['model_bytes']} (weight bytes per token); given: {given}")
    if dtype is not None and bits is not None:
        raise ConfigError(f"{n['dtype']} and {n['bits']}: give one of them, not both")
    if model_bytes is not None:
        if isinstance(model_bytes, bool) or not isinstance(model_bytes, (int, float)) or not 0 < model_bytes < 1e15:
            raise ConfigError(f"{n['model_bytes']}: expected the weight bytes read per token (e.g. 16.06e9), "
                              f"got {model_bytes!r}")
        if dtype is not None or bits is not None:
            raise ConfigError(f"{n['model_bytes']} is already in bytes; drop {n['dtype']}/{n['bits']}")
        mb = ModelBytes(weight_bytes=float(model_bytes), kv_bytes_per_token=None,
                        source=f"explicit {n['model_bytes']} {format_bytes(model_bytes)}")
    elif params is not None:
        if dtype is None and bits is None:
            raise ConfigError(f"{n['params']} needs {n['dtype']} (fp16, bf16, fp8, int4, Q4_K_M, ...) or {n['bits']}")
        mb = model_bytes_from_params(params, dtype=dtype, bits=bits, where=n["params"],
                                    dtype_where=n["dtype"] if dtype is not None else n["bits"])
    elif config is not None:
        from .safetensors_reader import model_bytes_from_safetensors, safetensors_directory
        cfg, where = _load_config(config, n["config"])
        st_dir = safetensors_directory(config)
        if st_dir is not None and dtype is None and bits is None:  # exact bytes from the headers
            mb = model_bytes_from_safetensors(st_dir, cfg, kv_dtype=kv_dtype, where=where)
        else:
            mb = model_bytes_from_hf_config(cfg, dtype=dtype, bits=bits, kv_dtype=kv_dtype, where=where,
                                            names=(n["dtype"], n["bits"]), name=name)
            if st_dir is not None:
                given = f"{n['dtype']} {dtype}" if dtype is not None else f"{n['bits']} {bits:g}"
                mb = replace(mb, source=f"{given} given: config arithmetic used instead of the safetensors "
                                        f"headers; {mb.source}")
    elif gguf is not None:
        if dtype is not None or bits is not None:
            raise ConfigError(f"{n['gguf']}: the file's tensor table gives the bytes; drop {n['dtype']}/{n['bits']}")
        from .gguf_reader import model_bytes_from_gguf
        # an explicit KV shape replaces the file's layout (the way out for a layout not modelled)
        mb = model_bytes_from_gguf(gguf, kv_dtype=kv_dtype,
                                   kv_layout=all(v is None for v in (layers, kv_heads, head_dim)))
    else:
        entry = catalog.model_entry(str(model))
        if isinstance(entry, catalog.ConfigModel):
            return resolve_model_bytes(config=entry.config(), dtype=dtype, bits=bits, kv_dtype=kv_dtype, layers=layers,
                                       kv_heads=kv_heads, head_dim=head_dim, kv_bytes_per_token=kv_bytes_per_token,
                                       window=window, names={**n, "config": entry.source}, name=entry.name)
        spec = entry
        if kv_dtype is not None:
            spec = replace(spec, kv_bytes_per_elem=kv_elem_bytes(kv_dtype, where=n["kv_dtype"]))
        if dtype is not None or bits is not None:
            bpp = bytes_per_param(dtype, bits, where=n["dtype"] if dtype is not None else n["bits"])
            spec = replace(spec, weight_bytes_per_param=bpp,
                           source=f"{spec.name}: {spec.params:.4g} params x {bpp:.4g} B ({dtype or f'{bits:g}-bit'})")
        mb = spec.model_bytes()
    if explicit_kv is not None:
        mb = mb.with_kv(explicit_kv.growth_per_token or None, layout=explicit_kv)
    elif any(v is not None for v in (layers, kv_heads, head_dim)):
        where = f"{n['layers']}/{n['kv_heads']}/{n['head_dim']}"
        elem = kv_elem_bytes(kv_dtype, dtype, where=n["kv_dtype"])
        mb = mb.with_kv(kv_from_shape(layers, kv_heads, head_dim, elem, where=where))
    elif kv_dtype is not None and (params is not None or model_bytes is not None):
        raise ConfigError(f"{n['kv_dtype']} needs the KV shape: {n['layers']}, {n['kv_heads']}, {n['head_dim']}")
    return mb


def explicit_kv_layout(kv_bytes_per_token, window, shape: tuple, n: dict):
    """``kv_bytes_per_token`` (+ ``window``) as a one-group KV layout; None when not given."""
    from ..core.roofline.kv_layout import KVLayout, LayerKV

    if kv_bytes_per_token is None:
        if window is not None:
            raise ConfigError(f"{n['window']} needs {n['kv_bytes_per_token']} (the KV bytes of one cached token, "
                              "all layers together)")
        return None
    if isinstance(kv_bytes_per_token, bool) or not isinstance(kv_bytes_per_token, (int, float)) \
            or not 0 < kv_bytes_per_token < 1e12:
        raise ConfigError(f"{n['kv_bytes_per_token']}: expected the KV bytes of one cached token, all layers "
                          f"together (e.g. 131072 for Llama-3-8B fp16), got {kv_bytes_per_token!r}")
    clash = [n[k] for k, v in zip(("layers", "kv_heads", "head_dim", "kv_dtype"), shape) if v is not None]
    if clash:
        raise ConfigError(f"{n['kv_bytes_per_token']} is already the KV size; drop {', '.join(clash)}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ConfigError(f"{n['window']}: expected a sliding window in tokens (an integer >= 1), got {window!r}")
    kind, windowed = ("full", "") if window is None else ("sliding", f", window {window}")
    return KVLayout((LayerKV(kind, 1, float(kv_bytes_per_token), window=window),),
                    source=f"explicit {n['kv_bytes_per_token']} {kv_bytes_per_token:,.0f} B/token{windowed}")


HARDWARE_KEYS = ("hardware", "mem_bandwidth_gb_s", "tensor_parallel")
MODEL_KEYS = tuple(FLAGS)
GATE_KEYS = ("min_decode_efficiency", "min_prefill_efficiency", "batch", "peak_tflops",
             "hidden_size", "draft")  # read by the gates themselves


def roofline_inputs(mapping: dict, *, where: str = "roofline", base_dir: str | Path | None = None,
                    runner=None, **probe) -> tuple[Hardware, ModelBytes]:
    """(Hardware, ModelBytes) from a YAML ``roofline:`` mapping; errors name ``{where}.{key}``.

    Keys: hardware | mem_bandwidth_gb_s, tensor_parallel; model | model_bytes | params (+ dtype |
    bits) | config | gguf; layers, kv_heads, head_dim, kv_dtype.  ``min_decode_efficiency`` and ``batch``
    are accepted and left to the caller.  Relative ``config``/``gguf`` paths are taken from
    ``base_dir`` (the SLO file's folder).  ``runner``/``probe`` go to ``resolve_hardware``.
    """
    import difflib

    from .hwdetect import resolve_hardware
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where}: expected a mapping like {{hardware: h100-sxm, model: llama-3.1-8b}}")
    known = HARDWARE_KEYS + MODEL_KEYS + GATE_KEYS
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(known)})"
            raise ConfigError(f"{where}.{key}: unknown key{hint}")
    validate_draft(mapping.get("draft"), f"{where}.draft")  # read by the decode gate (plugin.roofline_gate)
    kw = {k: mapping.get(k) for k in MODEL_KEYS}
    for k in ("config", "gguf"):
        if kw[k] is not None and base_dir is not None and not isinstance(kw[k], dict):
            kw[k] = str(Path(base_dir) / Path(str(kw[k])).expanduser())
    mb = resolve_model_bytes(**kw, names={k: f"{where}.{k}" for k in MODEL_KEYS})
    hw = resolve_hardware(mapping.get("hardware"), mem_bandwidth_gb_s=mapping.get("mem_bandwidth_gb_s"),
                          tp=mapping.get("tensor_parallel") or 1, runner=runner, where=f"{where}.hardware", **probe)
    return hw, mb


#: ``roofline.draft``: one source of the drafter's bytes per drafted token, plus ``spec_tokens`` (k)
DRAFT_SOURCE_KEYS = ("model", "params", "config", "gguf", "head_bytes")
DRAFT_SHAPE_KEYS = ("dtype", "bits", "layers", "kv_heads", "head_dim", "kv_dtype")
DRAFT_KEYS = DRAFT_SOURCE_KEYS + DRAFT_SHAPE_KEYS + ("spec_tokens",)
DRAFT_EXAMPLE = ("none (n-gram / prompt lookup), or a mapping such as {model: llama-3.2-1b, spec_tokens: 3} "
                 "(a draft model: model, params + dtype, config or gguf) or {head_bytes: 1.3e9, spec_tokens: 3} "
                 "(EAGLE / MTP heads: their layers and the LM head)")


def validate_draft(draft, where: str = "roofline.draft") -> None:
    """Collection-time checks of ``roofline.draft`` (no file is read): ``none`` or a mapping with
    one source; unknown keys with a close match; bad values name ``{where}.<key>``; a catalog
    name or params + dtype resolved (so a bad one fails before any request)."""
    _check_draft(draft, where)
    if isinstance(draft, dict) and (draft.get("model") is not None or draft.get("params") is not None):
        resolve_draft(draft, where=where)


def _check_draft(draft, where: str) -> None:
    from ..core.spec.budgets import did_you_mean

    if draft is None:
        return
    if isinstance(draft, str):
        if draft.strip().lower() != "none":
            raise ConfigError(f"{where}: unknown drafter {draft!r}; expected {DRAFT_EXAMPLE}")
        return
    if not isinstance(draft, dict):
        raise ConfigError(f"{where}: expected {DRAFT_EXAMPLE}, got {draft!r}")
    for key in draft:
        if key not in DRAFT_KEYS:
            raise ConfigError(f"{where}.{key}: unknown draft key {key!r}{did_you_mean(str(key), DRAFT_KEYS)} -- "
                              f"allowed: {', '.join(DRAFT_KEYS)}")
    sources = [k for k in DRAFT_SOURCE_KEYS if draft.get(k) is not None]
    if len(sources) != 1:
        raise ConfigError(f"{where}: give exactly one of {', '.join(DRAFT_SOURCE_KEYS)} (given: "
                          f"{', '.join(sources) or 'none'}); for n-gram / prompt lookup write draft: none")
    for key in ("params", "head_bytes", "bits"):
        v = draft.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1e15):
            raise ConfigError(f"{where}.{key}: expected a positive number, got {v!r}")
    k = draft.get("spec_tokens")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError(f"{where}.spec_tokens: expected the drafted tokens per step, an integer >= 1 "
                          f"(e.g. 3), got {k!r}")
    for key in ("layers", "kv_heads", "head_dim"):
        v = draft.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ConfigError(f"{where}.{key}: expected a positive integer, got {v!r}")
    if sources == ["head_bytes"]:
        extra = [key for key in DRAFT_SHAPE_KEYS if draft.get(key) is not None]
        if extra:
            raise ConfigError(f"{where}.{extra[0]}: head_bytes are already the bytes the heads read per drafted "
                              f"token; drop {', '.join(f'{where}.{x}' for x in extra)}")
    for key in ("config", "gguf"):
        if draft.get(key) is not None and not isinstance(draft[key], str):
            raise ConfigError(f"{where}.{key}: expected a file path, got {draft[key]!r}")


def resolve_draft(draft, *, where: str = "roofline.draft", base_dir: str | Path | None = None):
    """``roofline.draft`` as a ``core.roofline.roofline_spec.Drafter`` (the draft model's bytes by
    ``resolve_model_bytes``; relative ``config``/``gguf`` paths from ``base_dir``)."""
    from ..core.roofline.roofline_spec import NGRAM, Drafter

    _check_draft(draft, where)
    if draft is None or isinstance(draft, str):
        return None if draft is None else NGRAM
    k = draft.get("spec_tokens")
    if draft.get("head_bytes") is not None:
        return Drafter("heads", head_bytes=float(draft["head_bytes"]), spec_tokens=k,
                       source=f"{where}.head_bytes")
    keys = ("model", "params", "config", "gguf") + DRAFT_SHAPE_KEYS
    kw = {key: draft.get(key) for key in keys}
    for key in ("config", "gguf"):
        if kw[key] is not None and base_dir is not None:
            kw[key] = str(Path(base_dir) / Path(str(kw[key])).expanduser())
    try:
        mb = resolve_model_bytes(**kw, names={key: f"{where}.{key}" for key in keys})
    except ConfigError as exc:
        if str(exc).startswith(where):
            raise
        named = next(key for key in ("model", "params", "config", "gguf") if kw[key] is not None)
        raise ConfigError(f"{where}.{named}: {exc}") from None
    return Drafter("model", model=mb, spec_tokens=k, source=mb.source or mb.name)


def _load_config(config, flag: str) -> tuple[dict, str]:
    if isinstance(config, dict):
        return config, flag
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    try:
        return json.loads(path.read_text("utf-8")), str(path)
    except FileNotFoundError:
        raise ConfigError(f"{flag}: no such file {str(path)!r}; give the model's config.json") from None
    except ValueError as exc:
        raise ConfigError(f"{flag}: {str(path)!r} is not valid JSON ({exc})") from None
