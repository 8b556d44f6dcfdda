"""Per-architecture arithmetic of a Hugging Face ``config.json``: a registry keyed by ``model_type``.

Each family module registers a function ``(Cfg) -> Architecture`` for the model types it knows,
applying the transformers class defaults where a config is silent (``Cfg.int(key, default=...)``
records each).  A ``model_type`` not in the registry is refused before any request, naming the
ways out; it is never counted as if it were Llama.

``model_bytes_from_hf_config`` is the entry point (``roofline.resolve`` calls it).

Pure: no I/O.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigError
from ..modelbytes import ModelBytes, kv_elem_bytes
from .inventory import Architecture, Cfg

#: model_type -> the function that reads its config
REGISTRY: dict[str, Callable[[Cfg], Architecture]] = {}


def register(*model_types: str):
    def deco(fn: Callable[[Cfg], Architecture]) -> Callable[[Cfg], Architecture]:
        for t in model_types:
            REGISTRY[t] = fn
        return fn
    return deco


def _load_families() -> None:
    from . import deepseek, dense, gpt_oss, moe, qwen3_next  # noqa: F401  (each registers its model types)


def known_model_types() -> list[str]:
    _load_families()
    return sorted(REGISTRY)


def text_config(cfg: dict) -> dict:
    """The language model's config: a multimodal config's nested ``text_config`` (its
    ``model_type``, e.g. ``gemma3_text``), the top-level keys it omits taken from the outer config
    (``torch_dtype``, ``quantization_config``)."""
    inner = cfg.get("text_config")
    if isinstance(inner, dict):
        merged = dict(inner)
        for key in ("torch_dtype", "dtype", "quantization_config", "tie_word_embeddings"):
            if key not in merged and key in cfg:
                merged[key] = cfg[key]
        merged.setdefault("_outer_model_type", cfg.get("model_type"))
        return merged
    return cfg


def architecture(cfg: dict, *, where: str = "config.json") -> Architecture:
    """The ``Architecture`` of a config dict; a ConfigError naming the file, the key and the ways out."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
    _load_families()
    text = text_config(cfg)
    model_type = text.get("model_type") or cfg.get("model_type")
    if not model_type:
        raise ConfigError(f"{where}: no model_type key, so the architecture is unknown; is this a transformers "
                          "config.json? otherwise give a safetensors model directory, a GGUF file, params with the "
                          "KV keys (layers, kv_heads, head_dim or kv_bytes_per_token), or model_bytes")
    fn = REGISTRY.get(str(model_type)) or REGISTRY.get(str(text.get("_outer_model_type") or ""))
    if fn is None:
        raise ConfigError(f"{where}: model_type {model_type!r} is not modelled (known: {', '.join(sorted(REGISTRY))}); "
                          "it is not counted as Llama: give the model directory with its *.safetensors (exact bytes "
                          "from the headers, KV from the config's attention keys), a GGUF file, params with the KV "
                          "keys (layers, kv_heads, head_dim or kv_bytes_per_token), or model_bytes")
    c = Cfg(text, where, str(model_type))
    arch = fn(c)
    return arch


def model_bytes_from_hf_config(cfg: dict, *, dtype: str | None = None, bits: float | None = None,
                               kv_dtype: str | None = None, name: str | None = None,
                               where: str = "config.json", names: tuple[str, str] = ("dtype", "bits")) -> ModelBytes:
    """ModelBytes from an HF config dict: the architecture's groups at their stored widths
    (``quantization_config``, else ``torch_dtype``; the user's ``dtype`` / ``bits`` override), the
    per-layer KV layout at ``kv_dtype`` (default: a 16-bit float cache)."""
    from .quant import weight_format
    from .weights import model_bytes

    arch = architecture(cfg, where=where)
    text = text_config(cfg)
    fmt = weight_format(text, dtype=dtype, bits=bits, where=where, names=names)
    weight_dtype = dtype if dtype is not None else (text.get("torch_dtype") or text.get("dtype"))
    elem = kv_elem_bytes(kv_dtype, None if bits is not None else weight_dtype, where=f"{where}: kv_dtype")
    label = name or str(cfg.get("_name_or_path") or text.get("_name_or_path") or arch.model_type)
    return model_bytes(arch, fmt, kv_elem_bytes=elem, name=label, where=where)
