"""Gemma 2 and Gemma 3 decoders: sliding-window and global attention layers, tied embeddings.

The arithmetic, config key by config key: docs/roofline.md#from-a-configjson-architecture-by-architecture.

Pure: no I/O.
"""
from __future__ import annotations

from ...errors import ConfigError
from . import register
from .inventory import (Architecture, Cfg, TensorGroup, attention_groups, embedding_groups, gated_members, kv_by_kind,
    layered)

#: transformers class defaults that change the byte count (``Gemma3TextConfig`` / ``Gemma2Config``)
DEFAULTS = {
    "gemma3": {"vocab_size": 262_208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
               "sliding_window": 4096, "sliding_window_pattern": 6},
    "gemma2": {"vocab_size": 256_000, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
               "sliding_window": 4096},
}
_KINDS = {"sliding_attention": "sliding", "full_attention": "full"}


def layer_kinds(c: Cfg, layers: int, gemma3: bool) -> list[str]:
    """``full`` / ``sliding`` per layer: ``layer_types``, else the pattern transformers derives."""
    listed = c.get("layer_types")
    if listed is not None:
        if not isinstance(listed, list) or len(listed) != layers:
            raise ConfigError(f"{c.where}: layer_types must list one of {', '.join(_KINDS)} for each of the "
                              f"{layers} layers (num_hidden_layers), got {listed!r}")
        unknown = sorted({str(t) for t in listed if t not in _KINDS})
        if unknown:
            raise ConfigError(f"{c.where}: layer_types has {', '.join(unknown)}, which {c.model_type} does not "
                              f"have (known: {', '.join(_KINDS)}); give a safetensors model directory or "
                              "params with the KV keys")
        return [_KINDS[t] for t in listed]
    if gemma3:
        pattern = c.int("sliding_window_pattern", default=DEFAULTS["gemma3"]["sliding_window_pattern"])
        if pattern < 1:
            raise ConfigError(f"{c.where}: sliding_window_pattern must be >= 1 (every Nth layer global), "
                              f"got {pattern}")
    else:
        pattern = 2  # Gemma2Config: sliding_attention on even layers, full_attention on odd ones
    return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]


@register("gemma2", "gemma3", "gemma3_text")
def gemma(c: Cfg) -> Architecture:
    gemma3 = c.model_type in ("gemma3", "gemma3_text")
    if c.model_type == "gemma3" and c.get("_outer_model_type") is None and c.get("hidden_size") is None:
        raise ConfigError(f"{c.where}: a gemma3 config keeps its language model in text_config, and this one "
                          "has none; give the model's full config.json, a safetensors model directory, or a "
                          "GGUF file")
    d = DEFAULTS["gemma3" if gemma3 else "gemma2"]
    hidden = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    inter = c.int("intermediate_size")
    heads = c.int("num_attention_heads", default=d["num_attention_heads"])
    kv_heads = c.int("num_key_value_heads", default=d["num_key_value_heads"])
    head_dim = c.int("head_dim", default=d["head_dim"])
    vocab = c.int("vocab_size", default=d["vocab_size"])
    tied = c.flag("tie_word_embeddings", True)
    kinds = layer_kinds(c, layers, gemma3)
    window = c.int("sliding_window", default=d["sliding_window"]) if "sliding" in kinds else None
    if window is not None and window < 1:
        raise ConfigError(f"{c.where}: sliding_window must be >= 1 token, got {window}")

    o_bias = bool(c.get("attention_bias"))
    groups = [*embedding_groups(vocab, hidden, tied),
              *attention_groups(layers, hidden, heads, kv_heads, head_dim, qkv_bias=o_bias, o_bias=o_bias,
                                qk_norm=gemma3),
              layered("mlp gate/up/down (GeGLU)", "mlp", "model.layers.{i}.mlp", range(layers),
                      gated_members(hidden, inter)),
              TensorGroup("norms (4 per layer + final)", layers * 4 * hidden + hidden, "norm",
                          "model.layers.0.input_layernorm", linear=False)]

    source = "layer_types" if c.get("layer_types") is not None else (
        "sliding_window_pattern" if gemma3 else "gemma2 alternation")
    notes = (f"{kinds.count('full')} full / {kinds.count('sliding')} windowed layers ({source})",)
    return Architecture(c.model_type, tuple(groups), kv_by_kind(kinds, kv_heads, head_dim, window), hidden, layers,
                        tied, defaults=tuple(c.defaults), notes=notes)
