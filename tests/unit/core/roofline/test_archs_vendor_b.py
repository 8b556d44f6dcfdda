"""gpt-oss, DeepSeek-V3 (Kimi-K2) and Qwen3-Next: the decode ceiling on an H100 SXM from the
committed config.json, against a hand computation written out here from the architecture."""

import pytest

from pytest_llm_latency.core.roofline.archs import architecture
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.roofline.resolve import resolve_model_bytes
from tests.helpers.paths import CONFIGS

H100_SXM = 3350e9                     # bytes/s
BF16, FP32 = 2, 4
MXFP4 = 4.25 / 8                      # 4-bit values + an e8m0 scale per 32
FP8_BLOCK = 1 + 4 / (128 * 128)       # e4m3 + an fp32 scale per 128 × 128 block
CONTEXTS = (0, 32768, 131072)


def ceiling(name: str, context: int, weights: float, kv: float) -> float:
    """The ceiling from the committed config; its weight and KV bytes checked against the hand's
    exactly (the 2 % on the ceiling alone would hide a state or KV term of a few percent)."""
    mb = resolve_model_bytes(config=str(CONFIGS / f"{name}.json"))
    assert mb.weight_bytes == pytest.approx(weights, rel=1e-9)
    assert mb.kv_bytes_at(context) == pytest.approx(kv, rel=1e-9)
    return decode_ceiling(catalog.hardware("h100-sxm"), mb, context, batch=1).per_stream_tok_s


# ---------------------------------------------------------------- gpt-oss

def gpt_oss_hand(layers: int, experts: int) -> tuple[float, float, object]:
    """(bf16 params read, MXFP4 params read, KV bytes at c) of one decode step."""
    hidden, heads, kv_heads, head_dim, inter, vocab, k, window = 2880, 64, 8, 64, 2880, 201088, 4, 128
    attention = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
    attention_biases = heads * head_dim + 2 * kv_heads * head_dim + hidden
    sinks = heads                                        # one logit per head
    router = hidden * experts + experts                  # weight + bias, bf16 (not converted)
    expert_weights = hidden * 2 * inter + inter * hidden  # fused gate_up + down
    expert_biases = 2 * inter + hidden                   # bf16
    bf16 = (layers * (attention + attention_biases + sinks + router + 2 * hidden + k * expert_biases)
            + hidden + vocab * hidden + hidden)          # final norm, lm_head, one embedding row
    mxfp4 = layers * k * expert_weights
    per_token = 2 * kv_heads * head_dim * BF16           # K and V of one layer

    def kv(c):  # half the layers full attention, half a 128-token window
        return layers // 2 * per_token * c + layers // 2 * per_token * min(c, window)
    return bf16, mxfp4, kv


@pytest.mark.parametrize("name, layers, experts", [("gpt-oss-20b", 24, 32), ("gpt-oss-120b", 36, 128)])
@pytest.mark.parametrize("context", CONTEXTS)
def test_gpt_oss_ceiling(name, layers, experts, context):
    bf16, mxfp4, kv = gpt_oss_hand(layers, experts)
    hand = H100_SXM / (bf16 * BF16 + mxfp4 * MXFP4 + kv(context))
    got = ceiling(name, context, bf16 * BF16 + mxfp4 * MXFP4, kv(context))
    assert got == pytest.approx(hand, rel=0.02)
    # the old figures: 4.25 bits on every tensor, or every layer's KV full
    every_tensor_mxfp4 = H100_SXM / ((bf16 + mxfp4) * MXFP4 + kv(context))
    assert abs(got / every_tensor_mxfp4 - 1) > (0.4 if context == 0 else 0.1)
    if context:
        all_full = H100_SXM / (bf16 * BF16 + mxfp4 * MXFP4 + layers * 2 * 8 * 64 * BF16 * context)
        assert abs(got / all_full - 1) > 0.15


def test_gpt_oss_published_sizes_and_kv_split():
    # OpenAI's model card: 20.91 B total / 3.61 B active; 116.83 B / 5.13 B (active: the unembedding
    # counted, the embedding table not; a step here reads one row of it)
    for name, total, active in (("gpt-oss-20b", 20.91e9, 3.61e9), ("gpt-oss-120b", 116.83e9, 5.13e9)):
        mb = resolve_model_bytes(config=str(CONFIGS / f"{name}.json"))
        assert mb.total_params == pytest.approx(total, rel=0.005)
        assert mb.params == pytest.approx(active, rel=0.005)
        assert "MXFP4" in mb.source and "bf16" in mb.source
    mb = resolve_model_bytes(config=str(CONFIGS / "gpt-oss-20b.json"))
    text = mb.describe_kv(32768)
    assert "12 full layers × 2.0 KB/token × 32 768" in text
    assert "12 windowed layers × 2.0 KB/token × 128 (window 128)" in text
    # the user's bits win over the config's MXFP4, and the source says so
    every = resolve_model_bytes(config=str(CONFIGS / "gpt-oss-20b.json"), bits=4.25)
    bf16, mxfp4, _ = gpt_oss_hand(24, 32)
    assert every.weight_bytes == pytest.approx((bf16 + mxfp4) * MXFP4, rel=1e-9)
    assert "bits 4.25 for every tensor (it overrides the config's quantization_config mxfp4)" in every.source


def test_gpt_oss_layer_types_default_and_refusals(tmp_path):
    base = {"model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 100, "intermediate_size": 32, "num_local_experts": 4,
            "experts_per_token": 2}
    arch = architecture(base)
    assert [(s.kind, s.layers, s.window) for s in arch.kv] == [("full", 2, None), ("sliding", 2, 128)]
    assert "layer_types=alternating sliding/full" in arch.defaults and "head_dim=64" in arch.defaults
    with pytest.raises(ConfigError, match=r"layer_types\[1\] is 'chunked_attention'"):
        architecture({**base, "layer_types": ["sliding_attention", "chunked_attention"] * 2})
    with pytest.raises(ConfigError, match="one entry per layer"):
        architecture({**base, "layer_types": ["full_attention"]})


# ---------------------------------------------------------------- DeepSeek-V3

def deepseek_v3_hand() -> tuple[float, float, float, object]:
    """(fp8, bf16, fp32 params read, KV bytes at c) of one DeepSeek-V3 decode step."""
    hidden, layers, heads, vocab = 7168, 61, 128, 129280
    q_rank, kv_rank, nope, rope, v_dim = 1536, 512, 128, 64, 128
    inter, moe_inter, experts, k, shared, dense = 18432, 2048, 256, 8, 1, 3
    mla = (hidden * q_rank + q_rank * heads * (nope + rope)        # q_a_proj, q_b_proj
           + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim)  # kv_a_proj_with_mqa, kv_b_proj
           + heads * v_dim * hidden)                                 # o_proj
    moe_layers = layers - dense
    fp8 = layers * mla + dense * 3 * hidden * inter + moe_layers * (k + shared) * 3 * hidden * moe_inter
    bf16 = (layers * (q_rank + kv_rank + 2 * hidden) + hidden        # q_a / kv_a / layer norms, final norm
            + moe_layers * hidden * experts                          # router mlp.gate, bf16 in the checkpoint
            + vocab * hidden + hidden)                               # lm_head, one embedding row
    fp32 = moe_layers * experts                                      # e_score_correction_bias

    def kv(c):  # one latent of kv_lora_rank + qk_rope_head_dim a token a layer
        return layers * (kv_rank + rope) * BF16 * c
    return fp8, bf16, fp32, kv


@pytest.mark.parametrize("context", CONTEXTS)
def test_deepseek_v3_ceiling(context):
    fp8, bf16, fp32, kv = deepseek_v3_hand()
    weights = fp8 * FP8_BLOCK + bf16 * BF16 + fp32 * FP32
    got = ceiling("deepseek-v3", context, weights, kv(context))
    assert got == pytest.approx(H100_SXM / (weights + kv(context)), rel=0.02)
    if context:  # per-head K (192) and V (128) for 128 heads, as an MHA cache would hold them
        per_head = 61 * 128 * (192 + 128) * BF16 * context
        assert got / (H100_SXM / (weights + per_head)) > 2


def test_deepseek_published_sizes_and_latent_kv():
    # DeepSeek-V3 README_WEIGHTS: 671 B total (MTP layer not counted); Kimi-K2: 1.04 T / 32 B active
    v3 = resolve_model_bytes(config=str(CONFIGS / "deepseek-v3.json"))
    assert v3.total_params == pytest.approx(671e9, rel=0.005)
    assert v3.describe_kv(131072) == "KV: 61 latent (MLA) layers × 1.2 KB/token × 131 072"
    assert v3.kv_bytes_per_token == 61 * 576 * 2
    assert "MTP" in v3.source and "fp8 + fp32 scale per 128×128 block" in v3.source
    kimi = resolve_model_bytes(config=str(CONFIGS / "kimi-k2-instruct.json"))
    assert kimi.total_params == pytest.approx(1.04e12, rel=0.02) and kimi.experts == 384
    assert kimi.params == pytest.approx(32e9, rel=0.03)


def test_deepseek_v2_lite_shape_q_proj_and_no_score_bias():
    cfg = {"model_type": "deepseek_v2", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
           "vocab_size": 100, "intermediate_size": 96, "q_lora_rank": None, "kv_lora_rank": 16,
           "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "n_routed_experts": 6,
           "n_shared_experts": 2, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
           "first_k_dense_replace": 1, "moe_layer_freq": 1, "torch_dtype": "bfloat16"}
    arch = architecture(cfg)
    groups = {g.name: g.params for g in arch.groups}
    mla = 64 * 4 * 12 + 64 * (16 + 4) + 16 * 4 * (8 + 8) + 4 * 8 * 64   # q_proj, kv_a, kv_b, o
    assert groups["MLA q/kv_a/kv_b/o projections"] == 3 * mla
    assert groups["MLA q_a/kv_a norms"] == 3 * 16  # no q_a_layernorm
    assert groups["dense mlp gate/up/down"] == 1 * 3 * 64 * 96
    assert groups["routed experts gate/up/down"] == 2 * 6 * 3 * 64 * 12
    assert groups["shared experts gate/up/down"] == 2 * 3 * 64 * 2 * 12
    assert "router e_score_correction_bias" not in groups
    assert [(s.kind, s.layers, s.elems_per_token) for s in arch.kv] == [("latent", 3, 20)]
    with pytest.raises(ConfigError, match="kv_lora_rank"):
        architecture({k: v for k, v in cfg.items() if k != "kv_lora_rank"})


# ---------------------------------------------------------------- Qwen3-Next

def qwen3_next_hand() -> tuple[float, object]:
    """(bf16 params read, KV and state bytes at c) of one Qwen3-Next-80B-A3B decode step."""
    hidden, layers, heads, kv_heads, head_dim, vocab = 2048, 48, 16, 2, 256, 151936
    nk, nv, dk, dv, kernel = 16, 32, 128, 128, 4
    experts, k, moe_inter, shared_inter = 512, 10, 512, 512
    full, linear = layers // 4, layers - layers // 4               # every 4th layer full attention
    attention = (hidden * 2 * heads * head_dim                      # q_proj: query and output gate
                 + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden + 2 * head_dim)  # k, v, o, q/k norm
    conv_dim = 2 * nk * dk + nv * dv
    deltanet = (hidden * (2 * nk * dk + 2 * nv * dv) + hidden * 2 * nv  # in_proj_qkvz, in_proj_ba
                + conv_dim * kernel + nv + nv + dv + nv * dv * hidden)  # conv1d, dt_bias, A_log, norm, out_proj
    moe = k * 3 * hidden * moe_inter + 3 * hidden * shared_inter + hidden + hidden * experts
    params = (full * attention + linear * deltanet + layers * (moe + 2 * hidden) + hidden
              + vocab * hidden + hidden)
    state = nv * dk * dv * FP32 + (kernel - 1) * conv_dim * BF16    # recurrent fp32, conv bf16

    def kv(c):  # full layers cache K and V; DeltaNet layers read and write their state
        return full * 2 * kv_heads * head_dim * BF16 * c + linear * 2 * state
    return params, kv


@pytest.mark.parametrize("context", CONTEXTS)
def test_qwen3_next_ceiling(context):
    params, kv = qwen3_next_hand()
    got = ceiling("qwen3-next-80b-a3b-thinking", context, params * BF16, kv(context))  # the verbatim copy
    assert got == pytest.approx(H100_SXM / (params * BF16 + kv(context)), rel=0.02)
    # the old figure: every layer full attention, no state
    all_full = H100_SXM / (params * BF16 + 48 * 2 * 2 * 256 * BF16 * context)
    assert abs(got / all_full - 1) > (0.1 if context else 0.02)


def test_qwen3_next_sizes_and_split():
    mb = resolve_model_bytes(config=str(CONFIGS / "qwen3-next-80b-a3b-thinking.json"))
    assert mb.total_params == pytest.approx(80e9, rel=0.01)
    text = mb.describe_kv(32768)
    assert text == ("KV: 12 full layers × 2.0 KB/token × 32 768; "
                    "state: 36 linear-attention layers × 2.1 MB state (read + written)")
    arch = architecture({"model_type": "qwen3_next", "hidden_size": 64, "num_hidden_layers": 4,
                         "num_attention_heads": 2, "vocab_size": 100, "intermediate_size": 96,
                         "layer_types": ["linear_attention", "full_attention", "linear_attention",
                                         "linear_attention"], "mlp_only_layers": [0], "torch_dtype": "bfloat16"})
    groups = {g.name: g for g in arch.groups}
    assert groups["linear attention (Gated DeltaNet) projections"].role == "other"
    assert groups["dense mlp gate/up/down"].params == 3 * 64 * 96  # layer 0 only
    assert [(s.kind, s.layers) for s in arch.kv] == [("full", 1), ("state", 3)]
    assert "linear_num_value_heads=32" in arch.defaults and "num_experts=512" in arch.defaults
    with pytest.raises(ConfigError, match=r"layer_types\[0\] is 'sliding_attention'"):
        architecture({"model_type": "qwen3_next", "hidden_size": 64, "num_hidden_layers": 1,
                      "num_attention_heads": 2, "vocab_size": 100, "layer_types": ["sliding_attention"]})
