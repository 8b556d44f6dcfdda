"""OpenAI gpt-oss (gpt-oss-20b, gpt-oss-120b): ``model_type: gpt_oss``.

The arithmetic, config key by config key: docs/roofline.md#from-a-configjson-architecture-by-architecture.

Pure: no I/O.
"""
from __future__ import annotations

from . import register
from .inventory import Architecture, Cfg, TensorGroup, attention_groups, embedding_groups, kv_by_kind, layered
from .moe import check_experts

#: GptOssConfig's class defaults (transformers), applied and recorded when a config omits them
SLIDING_WINDOW = 128
HEAD_DIM = 64

_KINDS = {"sliding_attention": "sliding", "full_attention": "full"}


def layer_kinds(c: Cfg, layers: int) -> list[str]:
    """``full`` / ``sliding`` per layer from ``layer_types``; absent: GptOssConfig's default,
    sliding on even layers, full on odd ones."""
    types = c.get("layer_types")
    if types is None:
        c.defaults.append("layer_types=alternating sliding/full")
        return ["sliding" if (i + 1) % 2 else "full" for i in range(layers)]
    return c.listed_kinds(types, layers, _KINDS)


@register("gpt_oss")
def gpt_oss(c: Cfg) -> Architecture:
    hidden = c.int("hidden_size")
    layers = c.int("num_hidden_layers")
    heads = c.int("num_attention_heads")
    kv_heads = c.int("num_key_value_heads")
    head_dim = c.int("head_dim", default=HEAD_DIM)
    vocab = c.int("vocab_size")
    inter = c.int("intermediate_size")
    experts = c.int("num_local_experts")
    k = c.int("num_experts_per_tok", "experts_per_token")
    check_experts(c, experts, k)
    tied = c.flag("tie_word_embeddings", False)
    bias = c.flag("attention_bias", True)
    window = c.int("sliding_window", default=SLIDING_WINDOW)
    kinds = layer_kinds(c, layers)

    attn = "model.layers.{i}.self_attn"
    mlp, every = "model.layers.{i}.mlp", range(layers)
    groups = [
        *embedding_groups(vocab, hidden, tied),
        *attention_groups(layers, hidden, heads, kv_heads, head_dim, qkv_bias=bias, o_bias=bias, prefix=attn),
        layered("attention sinks", "other", attn, every, [("sinks", heads)], linear=False),
        # GptOssTopKRouter and the fused experts are Parameters, not nn.Linear
        layered("router", "router", mlp, every, [("router", hidden * experts)], nn_linear=False),
        layered("router bias", "bias", mlp, every, [("router.bias", experts)], linear=False),
        layered("routed experts gate_up/down", "routed_experts", mlp, every,
                [("experts.gate_up_proj", experts * hidden * 2 * inter),
                 ("experts.down_proj", experts * inter * hidden)], nn_linear=False),
        layered("routed expert biases", "routed_experts", mlp, every,
                [("experts.gate_up_proj_bias", experts * 2 * inter),
                 ("experts.down_proj_bias", experts * hidden)], linear=False),
        TensorGroup("norms", layers * 2 * hidden + hidden, "norm", "model.layers.0.input_layernorm", linear=False),
    ]
    kv = kv_by_kind(kinds, kv_heads, head_dim, window)
    return Architecture(c.model_type, tuple(groups), kv, hidden, layers, tied, experts=experts,
                        experts_per_token=k, defaults=tuple(c.defaults),
                        notes=("attention sinks: one learned logit per head, no cached token",))
