"""Mixture-of-experts decoders with grouped-query attention: mixtral, qwen2_moe, qwen3_moe.

The arithmetic, config key by config key: docs/roofline.md#from-a-configjson-architecture-by-architecture.

Pure: no I/O.
"""
from __future__ import annotations

from ...errors import ConfigError
from . import register
from .dense import dims
from .inventory import (Architecture, Cfg, TensorGroup, attention_groups, embedding_groups, full_kv, gated_members,
    layered)
from .quant_schemes import WAYS_OUT


def check_experts(c: Cfg, experts: int, k: int) -> None:
    if not 0 < k <= experts:
        raise ConfigError(f"{c.where}: num_experts_per_tok={k} must be in 1..{experts} (the routed experts); "
                          f"{WAYS_OUT}")


def moe_layers(c: Cfg, layers: int) -> list[int]:
    """Indices of the MoE layers: qwen's ``decoder_sparse_step`` and ``mlp_only_layers``."""
    step = c.int("decoder_sparse_step", default=1) if c.model_type.startswith("qwen") else 1
    dense_only = set(c.get("mlp_only_layers") or [])
    return [i for i in range(layers) if i not in dense_only and step > 0 and (i + 1) % step == 0]


@register("mixtral", "qwen2_moe", "qwen3_moe")
def moe(c: Cfg) -> Architecture:
    hidden, layers, heads, kv_heads, head_dim, vocab = dims(c)
    mixtral = c.model_type == "mixtral"
    experts = c.int("num_local_experts") if mixtral else c.int("num_experts")
    k = c.int("num_experts_per_tok")
    check_experts(c, experts, k)
    inter = c.int("intermediate_size")
    expert_inter = inter if mixtral else c.int("moe_intermediate_size")
    shared_inter = c.int("shared_expert_intermediate_size") if c.model_type == "qwen2_moe" else 0
    sparse = moe_layers(c, layers)
    n_dense = layers - len(sparse)
    tied = c.flag("tie_word_embeddings", False)
    mlp = "model.layers.{i}.block_sparse_moe" if mixtral else "model.layers.{i}.mlp"
    expert_names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    dense = [i for i in range(layers) if i not in set(sparse)]
    groups = [*embedding_groups(vocab, hidden, tied),
              *attention_groups(layers, hidden, heads, kv_heads, head_dim, qkv_bias=c.model_type == "qwen2_moe",
                                qk_norm=c.model_type == "qwen3_moe"),
              layered("routed experts gate/up/down", "routed_experts", mlp, sparse,
                      gated_members(hidden, expert_inter, expert_names, experts, "experts.{e}."), experts=experts),
              # an nn.Linear in transformers (bitsandbytes converts it); vLLM keeps it unquantized
              layered("router", "router", mlp, sparse, [("gate", hidden * experts)]),
              TensorGroup("norms", layers * 2 * hidden + hidden, "norm", "model.layers.0.input_layernorm",
                          linear=False)]
    if shared_inter:
        groups.append(layered("shared expert gate/up/down + gate", "shared_experts", mlp, sparse,
                              [*gated_members(hidden, shared_inter, prefix="shared_expert."),
                               ("shared_expert_gate", hidden)]))
    if n_dense:
        groups.append(layered("dense mlp gate/up/down", "mlp", "model.layers.{i}.mlp", dense,
                              gated_members(hidden, inter)))
    return Architecture(c.model_type, tuple(g for g in groups if g.params), (full_kv(layers, kv_heads, head_dim),),
                        hidden, layers, tied, experts=experts, experts_per_token=k, defaults=tuple(c.defaults))
