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
from dataclasses import replace

from ...errors import ConfigError
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
    from . import deepseek, dense, gemma, gpt_oss, llama4, moe, qwen3_next  # noqa: F401  (each registers its types)


def known_model_types() -> list[str]:
    _load_families()
    return sorted(REGISTRY)


def text_config(cfg: dict) -> dict:
    """The language model's config: a multimodal config's nested ``text_config`` (its
    ``model_type``, e.g. ``gemma3_text``), the top-level keys it omits taken from the outer config
    (``torch_dtype``, ``quantization_config``); ``_outer_model_type`` says it was nested."""
    inner = cfg.get("text_config")
    if not isinstance(inner, dict):
        return cfg
    outer = {k: cfg[k] for k in ("torch_dtype", "dtype", "quantization_config", "tie_word_embeddings") if k in cfg}
    return {**outer, **inner, "_outer_model_type": cfg.get("model_type")}


def _language_model_only(arch: Architecture, outer: str) -> Architecture:
    """A nested language model: its modules as the checkpoints name them, which quantization
    patterns match: ``language_model.model.layers.0...`` / ``language_model.lm_head``, or since
    transformers 4.52 ``model.language_model.layers.0...`` / ``lm_head`` (``TensorGroup.nested``:
    either spelling matches); and a note that nothing else of the multimodal model is counted."""
    groups = tuple(replace(g, nested=True) for g in arch.groups)
    note = (f"language model only ({outer} text_config): the vision encoder and multimodal projector are "
            "not read by a text decode step")
    return replace(arch, groups=groups, notes=(*arch.notes, note))


_WAYS_OUT = ("it is not counted as Llama: give the model directory with its *.safetensors (exact bytes from the "
             "headers, KV from the config's attention keys), a GGUF file, params with the KV keys (layers, "
             "kv_heads, head_dim or kv_bytes_per_token), or model_bytes")


def _reader(cfg: dict, text: dict, where: str) -> tuple[str, Callable[[Cfg], Architecture]]:
    """(model_type, reader): a nested config's inner ``text_config.model_type`` when it names one
    (refused if unknown), else the outer ``model_type``'s reader (it knows its own text model)."""
    known = ", ".join(sorted(REGISTRY))
    outer = cfg.get("model_type")
    if text is not cfg:
        inner = text.get("model_type")
        if inner:
            fn = REGISTRY.get(str(inner))
            if fn is None:
                raise ConfigError(f"{where}: text_config.model_type {inner!r} (the language model of this "
                                  f"{outer!r} config) is not modelled (known: {known}); {_WAYS_OUT}")
            return str(inner), fn
        fn = REGISTRY.get(str(outer or ""))
        if fn is None:
            raise ConfigError(f"{where}: a {outer!r} config whose text_config has no model_type, so the language "
                              f"model's architecture is unknown (known model types: {known}); {_WAYS_OUT}")
        return str(outer), fn
    if not outer:
        raise ConfigError(f"{where}: no model_type key, so the architecture is unknown; is this a transformers "
                          "config.json? otherwise give a safetensors model directory, a GGUF file, params with the "
                          "KV keys (layers, kv_heads, head_dim or kv_bytes_per_token), or model_bytes")
    fn = REGISTRY.get(str(outer))
    if fn is None:
        raise ConfigError(f"{where}: model_type {outer!r} is not modelled (known: {known}); {_WAYS_OUT}")
    return str(outer), fn


def architecture(cfg: dict, *, where: str = "config.json") -> Architecture:
    """The ``Architecture`` of a config dict; a ConfigError naming the file, the key and the ways out."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
    _load_families()
    text = text_config(cfg)
    model_type, fn = _reader(cfg, text, where)
    if text is cfg:
        return fn(Cfg(text, where, model_type))
    return _language_model_only(fn(Cfg(text, f"{where} (text_config)", model_type)), str(cfg.get("model_type")))


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


def attention_shape(cfg: dict, *, where: str = "config.json") -> tuple[int | None, int | None, str]:
    """(layers, width, note) for the prefill gate's quadratic attention term: the layers whose
    attention spans the whole prompt (full and latent ones) and their width (heads × head_dim;
    MLA: heads × (qk_nope + qk_rope)).  Windowed and chunked layers attend a bounded span and
    linear-attention layers none, so they are left out of the term, and ``note`` says so."""
    text = text_config(cfg)
    try:
        arch = architecture(cfg, where=where)
    except ConfigError:
        return text.get("num_hidden_layers"), None, ""
    spanning = sum(s.layers for s in arch.kv if s.kind in ("full", "latent"))
    heads = text.get("num_attention_heads")
    if any(s.kind == "latent" for s in arch.kv):
        head_dim = (text.get("qk_nope_head_dim") or 0) + (text.get("qk_rope_head_dim") or 0)
    else:
        head_dim = text.get("head_dim") or (text.get("hidden_size", 0) // heads if heads else 0)
    width = heads * head_dim if isinstance(heads, int) and head_dim else None
    others = arch.layers - spanning
    note = (f"attention over the whole prompt on {spanning} of {arch.layers} layers (the other {others}: a "
            "window, a chunk or a linear state, left out of the quadratic term)") if others else ""
    return spanning or None, width, note
