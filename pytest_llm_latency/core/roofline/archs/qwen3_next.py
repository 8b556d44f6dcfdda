"""Qwen3-Next (Qwen3-Next-80B-A3B): hybrid Gated DeltaNet / gated attention layers, a sparse MoE.

The arithmetic, config key by config key: docs/roofline.md#from-a-configjson-architecture-by-architecture.

Pure: no I/O.
"""
from __future__ import annotations

from ...errors import ConfigError
from ..modelbytes import DTYPE_BYTES
from . import register
from .inventory import (Architecture, Cfg, KVShape, TensorGroup, attention_groups, embedding_groups, gated_members,
    layered)
from .moe import check_experts, moe_layers

#: bytes per element of the DeltaNet recurrent state (docs/roofline.md: why fp32)
RECURRENT_STATE_BYTES = 4.0
_KINDS = {"linear_attention": "state", "full_attention": "full"}


def layer_kinds(c: Cfg, layers: int) -> list[str]:
    """``full`` / ``state`` per layer."""
    types = c.get("layer_types")
    if types is None:
        interval = c.int("full_attention_interval", default=4)
        if interval < 1:
            raise ConfigError(f"{c.where}: full_attention_interval must be >= 1, got {interval}")
        return ["state" if (i + 1) % interval else "full" for i in range(layers)]
    return c.listed_kinds(types, layers, _KINDS)


def deltanet(c: Cfg, ids: list[int], hidden: int) -> tuple[list[TensorGroup], int, int]:
    """Gated DeltaNet's groups for the layers ``ids``, and one layer's (recurrent, conv) state elements."""
    nk = c.int("linear_num_key_heads", default=16)
    nv = c.int("linear_num_value_heads", default=32)
    dk = c.int("linear_key_head_dim", default=128)
    dv = c.int("linear_value_head_dim", default=128)
    kernel = c.int("linear_conv_kernel_dim", default=4)
    if kernel < 1:
        raise ConfigError(f"{c.where}: linear_conv_kernel_dim must be >= 1, got {kernel}")
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    at, n = "model.layers.{i}.linear_attn", len(ids)
    groups = [layered("linear attention (Gated DeltaNet) projections", "other", at, ids,
                      [("in_proj_qkvz", hidden * (2 * key_dim + 2 * value_dim)), ("in_proj_ba", hidden * 2 * nv),
                       ("out_proj", value_dim * hidden)]),
              TensorGroup("Gated DeltaNet conv1d, dt_bias, A_log, norm", n * (conv_dim * kernel + 2 * nv + dv),
                          "other", f"{at}.conv1d", linear=False, layers=tuple(ids))]
    return groups, nv * dk * dv, (kernel - 1) * conv_dim


@register("qwen3_next")
def qwen3_next(c: Cfg) -> Architecture:
    hidden = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    heads = c.int("num_attention_heads")
    kv_heads = c.int("num_key_value_heads", default=2)
    head_dim = c.int("head_dim", default=256)
    vocab = c.int("vocab_size")
    tied = c.flag("tie_word_embeddings", False)
    kinds = layer_kinds(c, layers)
    n_full, n_linear = kinds.count("full"), kinds.count("state")
    groups = [*embedding_groups(vocab, hidden, tied),
              TensorGroup("norms", layers * 2 * hidden + hidden, "norm", "model.layers.0.input_layernorm",
                          linear=False)]
    kv: list[KVShape] = []
    if n_full:
        at, full = "model.layers.{i}.self_attn", [i for i, kind in enumerate(kinds) if kind == "full"]
        bias = bool(c.get("attention_bias"))
        groups += attention_groups(n_full, hidden, heads, kv_heads, head_dim, qkv_bias=bias, o_bias=bias,
                                   qk_norm=True, prefix=at, layer_ids=full)
        if c.get("attn_output_gate", True):  # q_proj's second half: the sigmoid gate on the output
            # q_proj is one module: an ignore pattern matches both halves together
            groups.append(layered("attention output gate (q_proj)", "attention", at, full,
                                  [("q_proj", hidden * heads * head_dim)]))
        kv.append(KVShape("full", n_full, elems_per_token=2 * kv_heads * head_dim))
    if n_linear:
        lin, recurrent, conv = deltanet(c, [i for i, kind in enumerate(kinds) if kind == "state"], hidden)
        groups += lin
        model_dtype = str(c.get("torch_dtype") or c.get("dtype") or "bfloat16").lower()
        state = recurrent * RECURRENT_STATE_BYTES + conv * DTYPE_BYTES.get(model_dtype, 2.0)
        kv.append(KVShape("state", n_linear, state_elems=int(state), state_elem_bytes=1.0))  # in bytes
    experts = c.int("num_experts", default=512)
    k = 0
    sparse = moe_layers(c, layers) if experts else []
    if sparse:
        k = c.int("num_experts_per_tok", default=10)
        check_experts(c, experts, k)
        moe_inter = c.int("moe_intermediate_size", default=512)
        shared_inter = c.int("shared_expert_intermediate_size", default=512)
        mlp = "model.layers.{i}.mlp"
        groups += [layered("routed experts gate/up/down", "routed_experts", mlp, sparse,
                           gated_members(hidden, moe_inter, copies=experts, prefix="experts.{e}."), experts=experts),
                   layered("router", "router", mlp, sparse, [("gate", hidden * experts)]),
                   layered("shared expert gate", "router", mlp, sparse, [("shared_expert_gate", hidden)]),
                   layered("shared expert gate/up/down", "shared_experts", mlp, sparse,
                           gated_members(hidden, shared_inter, prefix="shared_expert."))]
    else:
        experts = 0
    if layers > len(sparse):
        dense = [i for i in range(layers) if i not in set(sparse)]
        groups.append(layered("dense mlp gate/up/down", "mlp", "model.layers.{i}.mlp", dense,
                              gated_members(hidden, c.int("intermediate_size"))))
    notes = ("DeltaNet state: recurrent nv×dk×dv at fp32 + conv (kernel−1)×conv_dim at the model dtype, "
             "read and written each step (SGLang's mamba_ssm_dtype float32; vLLM needs --mamba-ssm-cache-dtype "
             "float32, its default auto is bf16)",)
    return Architecture(c.model_type, tuple(g for g in groups if g.params), tuple(kv), hidden, layers, tied,
                        experts=experts, experts_per_token=k, defaults=tuple(c.defaults), notes=notes)
