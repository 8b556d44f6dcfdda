"""Dense decoders with grouped-query attention: llama, mistral, qwen2, qwen3, phi3.

The arithmetic, config key by config key: docs/roofline.md#from-a-configjson-architecture-by-architecture.

Pure: no I/O.
"""
from __future__ import annotations

from . import register
from .inventory import (Architecture, Cfg, KVShape, TensorGroup, attention_groups, embedding_groups, full_kv,
    gated_members, kv_by_kind, layered)
from .inventory import Member


def dims(c: Cfg) -> tuple[int, int, int, int, int, int]:
    """(hidden, layers, heads, kv_heads, head_dim, vocab) with the usual fallbacks."""
    hidden = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    heads = c.int("num_attention_heads")
    kv_heads = c.int("num_key_value_heads", default=heads)
    head_dim = int(c.get("head_dim") or hidden // heads)  # derived, not a class default
    vocab = c.int("vocab_size")
    return hidden, layers, heads, kv_heads, head_dim, vocab


def dense_architecture(c: Cfg, *, qkv_bias: bool = False, qk_norm: bool = False,
                       kv: tuple[KVShape, ...] | None = None, notes: tuple[str, ...] = ()) -> Architecture:
    hidden, layers, heads, kv_heads, head_dim, vocab = dims(c)
    inter = c.int("intermediate_size")
    tied = c.flag("tie_word_embeddings", False)
    o_bias = bool(c.get("attention_bias"))
    phi3 = c.model_type == "phi3"  # fused qkv_proj and gate_up_proj modules
    mlp: list[Member] = ([("gate_up_proj", 2 * hidden * inter), ("down_proj", inter * hidden)] if phi3
                         else gated_members(hidden, inter))
    groups = [*embedding_groups(vocab, hidden, tied),
              *attention_groups(layers, hidden, heads, kv_heads, head_dim, qkv_bias=qkv_bias or o_bias,
                                o_bias=o_bias, qk_norm=qk_norm, fused_qkv=phi3),
              layered("mlp gate/up/down", "mlp", "model.layers.{i}.mlp", range(layers), mlp),
              TensorGroup("norms", layers * 2 * hidden + hidden, "norm", "model.layers.0.input_layernorm",
                          linear=False)]
    return Architecture(c.model_type, tuple(groups), kv or (full_kv(layers, kv_heads, head_dim),), hidden, layers,
                        tied, defaults=tuple(c.defaults), notes=notes)


@register("llama", "mistral", "phi3")
def llama(c: Cfg) -> Architecture:
    window = c.get("sliding_window")
    if window and c.model_type in ("mistral", "phi3"):  # every layer windowed when set (vLLM, transformers)
        hidden, layers, heads, kv_heads, head_dim, _ = dims(c)
        return dense_architecture(c, kv=(KVShape("sliding", layers, 2 * kv_heads * head_dim, window=int(window)),))
    return dense_architecture(c)


@register("qwen2")
def qwen2(c: Cfg) -> Architecture:
    """q/k/v biases; a sliding window only with ``use_sliding_window`` (layers from ``max_window_layers`` on)."""
    if c.get("use_sliding_window") and c.get("sliding_window"):
        hidden, layers, heads, kv_heads, head_dim, _ = dims(c)
        full = min(c.int("max_window_layers", default=layers), layers)
        kinds = ["full"] * full + ["sliding"] * (layers - full)
        window = int(c.get("sliding_window"))
        return dense_architecture(c, qkv_bias=True, kv=kv_by_kind(kinds, kv_heads, head_dim, window))
    return dense_architecture(c, qkv_bias=True)


@register("qwen3")
def qwen3(c: Cfg) -> Architecture:
    """Per-head q/k RMSNorms, no biases (``attention_bias`` false)."""
    return dense_architecture(c, qk_norm=True)
