"""Llama 4 (Scout, Maverick): mixture of experts with a shared expert, chunked and NoPE attention.

The arithmetic, config key by config key: docs/roofline.md#from-a-configjson-architecture-by-architecture.

Pure: no I/O.
"""
from __future__ import annotations

from ...errors import ConfigError
from . import register
from .inventory import (Architecture, Cfg, TensorGroup, attention_groups, embedding_groups, gated_members, kv_by_kind,
    layered)
from .moe import check_experts

_KINDS = {"chunked_attention": "chunked", "full_attention": "full"}


def moe_layer_indices(c: Cfg, layers: int) -> list[int]:
    listed = c.get("moe_layers")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(i, int) and 0 <= i < layers for i in listed):
            raise ConfigError(f"{c.where}: moe_layers must list layer indices in 0..{layers - 1}, got {listed!r}")
        return sorted(set(listed))
    step = c.int("interleave_moe_layer_step", default=1)
    if step < 1:
        raise ConfigError(f"{c.where}: interleave_moe_layer_step must be >= 1 (every Nth layer MoE), got {step}")
    return list(range(step - 1, layers, step))


def attention_kinds(c: Cfg, layers: int) -> tuple[list[str], str]:
    """(``chunked`` / ``full`` per layer, where the split came from)."""
    listed = c.get("layer_types")
    if listed is not None:
        if not isinstance(listed, list) or len(listed) != layers or any(t not in _KINDS for t in listed):
            raise ConfigError(f"{c.where}: layer_types must list one of {', '.join(_KINDS)} for each of the "
                              f"{layers} layers (num_hidden_layers), got {listed!r}")
        return [_KINDS[t] for t in listed], "layer_types"
    rope = c.get("no_rope_layers")
    if rope:  # transformers treats an absent or empty list alike
        if not isinstance(rope, list) or len(rope) < layers or any(v not in (0, 1) for v in rope[:layers]):
            raise ConfigError(f"{c.where}: no_rope_layers must give 1 (RoPE) or 0 (NoPE) for each of the "
                              f"{layers} layers, got {rope!r}")
        uses_rope = [bool(v) for v in rope[:layers]]
        how = "no_rope_layers"
    else:
        interval = c.int("no_rope_layer_interval", default=4)
        if interval < 1:
            raise ConfigError(f"{c.where}: no_rope_layer_interval must be >= 1, got {interval}")
        uses_rope = [(i + 1) % interval != 0 for i in range(layers)]
        how = f"no_rope_layers {'empty' if rope is not None else 'absent'}: a NoPE layer every {interval}"
    return ["chunked" if r else "full" for r in uses_rope], how


@register("llama4", "llama4_text")
def llama4(c: Cfg) -> Architecture:
    if c.model_type == "llama4" and c.get("_outer_model_type") is None and c.get("hidden_size") is None:
        raise ConfigError(f"{c.where}: a llama4 config keeps its language model in text_config, and this one "
                          "has none; give the model's full config.json, a safetensors model directory, or a "
                          "GGUF file")
    hidden = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    heads = c.int("num_attention_heads")
    kv_heads = c.int("num_key_value_heads", default=8)   # Llama4TextConfig's class defaults
    head_dim = c.int("head_dim", default=128)
    vocab = c.int("vocab_size")
    experts = c.int("num_local_experts")
    k = c.int("num_experts_per_tok")
    check_experts(c, experts, k)
    inter = c.int("intermediate_size")          # each routed expert and the shared expert
    tied = c.flag("tie_word_embeddings", False)
    sparse = moe_layer_indices(c, layers)
    n_moe, n_dense = len(sparse), layers - len(sparse)
    dense_inter = c.int("intermediate_size_mlp", default=16384) if n_dense else 0

    ff = "model.layers.{i}.feed_forward"   # each group over its own layers: MoE or dense (Maverick interleaves)
    dense = [i for i in range(layers) if i not in set(sparse)]
    o_bias = bool(c.get("attention_bias"))
    groups = [*embedding_groups(vocab, hidden, tied),
              *attention_groups(layers, hidden, heads, kv_heads, head_dim, qkv_bias=o_bias, o_bias=o_bias),
              # fused expert Parameters, not nn.Linear (bitsandbytes leaves them at the model dtype)
              layered("routed experts gate_up/down", "routed_experts", ff, sparse,
                      [("experts.gate_up_proj", experts * hidden * 2 * inter),
                       ("experts.down_proj", experts * inter * hidden)], nn_linear=False),
              layered("shared expert gate/up/down", "shared_experts", ff, sparse,
                      gated_members(hidden, inter, prefix="shared_expert.")),
              layered("router", "router", ff, sparse, [("router", hidden * experts)]),  # Llama4Router(nn.Linear)
              layered("dense mlp gate/up/down", "mlp", ff, dense, gated_members(hidden, dense_inter)),
              TensorGroup("norms (2 per layer + final)", layers * 2 * hidden + hidden, "norm",
                          "model.layers.0.input_layernorm", linear=False)]
    groups = [g for g in groups if g.params]

    kinds, how = attention_kinds(c, layers)
    notes = []
    if "attention_chunk_size" in c.cfg and c.get("attention_chunk_size") is None:
        kinds = ["full"] * layers
        notes.append("attention_chunk_size null: no chunked attention, every layer full")
        chunk = None
    else:
        chunk = c.int("attention_chunk_size", default=8192) if "chunked" in kinds else None
        if chunk is not None and chunk < 1:
            raise ConfigError(f"{c.where}: attention_chunk_size must be >= 1 token, got {chunk}")
    kv = kv_by_kind(kinds, kv_heads, head_dim, chunk)
    notes.append(f"{kinds.count('full')} full (NoPE) / {kinds.count('chunked')} chunked (RoPE) layers ({how})")
    notes.append(f"{n_moe} MoE layers with a shared expert of intermediate_size {inter} each"
                 + (f", {n_dense} dense" if n_dense else ""))
    return Architecture(c.model_type, tuple(groups), kv, hidden, layers, tied, experts=experts,
                        experts_per_token=k, defaults=tuple(c.defaults), notes=tuple(notes))
