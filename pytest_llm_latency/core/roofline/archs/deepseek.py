"""DeepSeek-V2 / V3 (and Kimi-K2, a V3): multi-head latent attention (MLA) and DeepSeekMoE.

The arithmetic, config key by config key: docs/roofline.md#from-a-configjson-architecture-by-architecture.

Pure: no I/O.
"""
from __future__ import annotations

from ...errors import ConfigError
from . import register
from .inventory import Architecture, Cfg, KVShape, Member, TensorGroup, embedding_groups, gated_members, layered
from .moe import check_experts


def moe_layer_indices(c: Cfg, layers: int) -> list[int]:
    """The MoE layers: from ``first_k_dense_replace`` on, every ``moe_layer_freq``-th."""
    if not c.get("n_routed_experts"):
        return []
    first = c.int("first_k_dense_replace", default=0)
    freq = c.int("moe_layer_freq", default=1)
    if freq < 1:
        raise ConfigError(f"{c.where}: moe_layer_freq must be >= 1, got {freq}")
    return [i for i in range(layers) if i >= first and i % freq == 0]


def mla_groups(c: Cfg, layers: int, hidden: int, heads: int) -> tuple[list[TensorGroup], int]:
    """MLA's projections and norms (all layers), and the latent width cached per token."""
    nope = c.int("qk_nope_head_dim")
    rope = c.int("qk_rope_head_dim")
    v_dim = c.int("v_head_dim")
    kv_rank = c.int("kv_lora_rank")
    q_rank = c.get("q_lora_rank")
    at = "model.layers.{i}.self_attn"
    qk = heads * (nope + rope)
    q: list[Member]
    if q_rank is None:
        q, q_norm = [("q_proj", hidden * qk)], 0
    else:
        q_rank = c.int("q_lora_rank")
        q, q_norm = [("q_a_proj", hidden * q_rank), ("q_b_proj", q_rank * qk)], q_rank
    proj: list[Member] = [*q, ("kv_a_proj_with_mqa", hidden * (kv_rank + rope)),
                          ("kv_b_proj", kv_rank * heads * (nope + v_dim)), ("o_proj", heads * v_dim * hidden)]
    groups = [layered("MLA q/kv_a/kv_b/o projections", "attention", at, range(layers), proj),
              TensorGroup("MLA q_a/kv_a norms", layers * (q_norm + kv_rank), "norm", f"{at}.kv_a_layernorm",
                          linear=False, layers=tuple(range(layers)))]
    return groups, kv_rank + rope


@register("deepseek_v2", "deepseek_v3", "kimi_k2")
def deepseek(c: Cfg) -> Architecture:
    hidden = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    heads = c.int("num_attention_heads")
    vocab = c.int("vocab_size")
    inter = c.int("intermediate_size")
    tied = c.flag("tie_word_embeddings", False)
    if c.get("attention_bias"):
        raise ConfigError(f"{c.where}: attention_bias true is not modelled for {c.model_type} (MLA without "
                          "biases); give a safetensors model directory for exact bytes")
    attn, latent = mla_groups(c, layers, hidden, heads)
    sparse = moe_layer_indices(c, layers)
    n_moe, n_dense = len(sparse), layers - len(sparse)
    groups = [*embedding_groups(vocab, hidden, tied), *attn,
              TensorGroup("norms", layers * 2 * hidden + hidden, "norm", "model.layers.0.input_layernorm",
                          linear=False)]
    if n_dense:
        dense = [i for i in range(layers) if i not in set(sparse)]   # the first_k_dense_replace layers
        groups.append(layered("dense mlp gate/up/down", "mlp", "model.layers.{i}.mlp", dense,
                              gated_members(hidden, inter)))
    experts = k = 0
    if n_moe:
        experts = c.int("n_routed_experts")
        k = c.int("num_experts_per_tok")
        check_experts(c, experts, k)
        moe_inter = c.int("moe_intermediate_size")
        shared = int(c.get("n_shared_experts") or 0)
        mlp = "model.layers.{i}.mlp"
        groups += [layered("routed experts gate/up/down", "routed_experts", mlp, sparse,
                           gated_members(hidden, moe_inter, copies=experts, prefix="experts.{e}."), experts=experts),
                   # DeepseekV3TopkRouter: a Parameter, not an nn.Linear (bitsandbytes leaves it)
                   layered("router", "router", mlp, sparse, [("gate", hidden * experts)], nn_linear=False)]
        if shared:
            groups.append(layered("shared experts gate/up/down", "shared_experts", mlp, sparse,
                                  gated_members(hidden, shared * moe_inter, prefix="shared_experts.")))
        if c.model_type != "deepseek_v2" or c.get("topk_method") == "noaux_tc":
            groups.append(layered("router e_score_correction_bias", "bias", mlp, sparse,
                                  [("gate.e_score_correction_bias", experts)], linear=False))
    mtp = int(c.get("num_nextn_predict_layers") or 0)
    notes = ["KV: one latent of kv_lora_rank + qk_rope_head_dim per token per layer (MLA, as vLLM/SGLang cache)"]
    if mtp:
        notes.append(f"the {mtp} MTP layer(s) (num_nextn_predict_layers) are not read in plain decode")
    kv = (KVShape("latent", layers, elems_per_token=latent),)
    return Architecture(c.model_type, tuple(groups), kv, hidden, layers, tied, experts=experts, experts_per_token=k,
                        defaults=tuple(c.defaults), notes=tuple(notes))
