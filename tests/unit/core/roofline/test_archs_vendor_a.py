"""Decode ceilings of vendor config.json files (pytest_llm_latency/roofline/configs/, copied from the Hugging Face
repos named in each ``*.source.txt``) against hand computations from the published architectures.

H100 SXM (3350 GB/s), batch 1, bf16 weights and KV (2 bytes), at context 0, 32 768 and 131 072:

    ceiling = 3350e9 / (weight bytes read per step + KV bytes read per step)

Embedding convention (core.roofline.modelbytes.EMBEDDING_CONVENTION): an untied input embedding is one row
(hidden_size parameters) per step, the output head is read whole; a tied table is read whole once.
Each hand computation below sums the parameter groups from the architecture, never from the code.
"""
import json

import pytest

from pytest_llm_latency.core.roofline.archs import architecture
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.roofline.resolve import resolve_model_bytes
from tests.helpers.paths import CONFIGS

BW = 3350e9          # H100 SXM, bytes/s
B = 2                # bf16 bytes per parameter and per KV element
CONTEXTS = (0, 32768, 131072)


def load(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text("utf-8"))


def ceiling(name: str, context: int):
    hw = catalog.hardware("h100-sxm")
    assert hw.mem_bandwidth_gb_s == 3350
    mb = resolve_model_bytes(config=CONFIGS / f"{name}.json")
    return mb, decode_ceiling(hw, mb, context=context, batch=1)


def gqa(h: int, heads: int, kv_heads: int, head_dim: int) -> int:
    """q, k, v, o projections of one layer."""
    return h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h


# ------------------------------------------------------------------ Gemma 3 27B (multimodal config)

GEMMA3 = dict(h=5376, L=62, heads=32, kv=16, hd=128, inter=21504, window=1024,
              V=262208)              # vocab_size: omitted by the vendor text_config, the class default


def gemma3_weights() -> float:
    g = GEMMA3
    per_layer = (gqa(g["h"], g["heads"], g["kv"], g["hd"]) + 2 * g["hd"]   # + per-head q/k RMSNorms
                 + 3 * g["h"] * g["inter"]                                # GeGLU gate, up, down
                 + 4 * g["h"])                                            # pre/post attention + ffw norms
    return (g["L"] * per_layer + g["h"] + g["V"] * g["h"]) * B           # final norm; tied table read once


def gemma3_kv(context: int, all_full: bool = False) -> float:
    g = GEMMA3
    per_token = 2 * g["kv"] * g["hd"] * B
    full_layers = g["L"] if all_full else 10             # layers 5, 11, ..., 59: (i + 1) % 6 == 0
    sliding_layers = g["L"] - full_layers                # 52 layers with a 1024-token window
    return per_token * (full_layers * context + sliding_layers * min(context, g["window"]))


@pytest.mark.parametrize("context", CONTEXTS)
def test_gemma3_27b_ceiling(context):
    mb, c = ceiling("gemma-3-27b-it", context)
    assert mb.total_params == pytest.approx(27.0e9, rel=0.01)  # language model only (27.4B with SigLIP)
    assert c.per_stream_tok_s == pytest.approx(BW / (gemma3_weights() + gemma3_kv(context)), rel=0.02)


def test_gemma3_defaults_named_split_said_and_full_kv_would_be_off():
    mb, c = ceiling("gemma-3-27b-it", 131072)
    for applied in ("vocab_size=262208", "tie_word_embeddings=true", "sliding_window_pattern=6"):
        assert applied in mb.source
    assert "vision encoder" in mb.source
    text = mb.describe_kv(32768)
    assert "10 full layers" in text and "52 windowed layers" in text and "window 1 024" in text
    for context in (32768, 131072):
        all_full = BW / (gemma3_weights() + gemma3_kv(context, all_full=True))
        assert abs(all_full / decode_ceiling(c.hardware, mb, context=context).per_stream_tok_s - 1) > 0.05


def test_gemma2_alternates_and_gemma3_layer_types_win():
    gemma2 = {"model_type": "gemma2", "hidden_size": 4608, "intermediate_size": 36864, "num_hidden_layers": 46,
              "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "vocab_size": 256000,
              "sliding_window": 4096, "torch_dtype": "bfloat16"}      # gemma-2-27b
    arch = architecture(gemma2)
    assert {(s.kind, s.layers, s.window) for s in arch.kv} == {("full", 23, None), ("sliding", 23, 4096)}
    per_layer = gqa(4608, 32, 16, 128) + 3 * 4608 * 36864 + 4 * 4608   # no q/k norms in Gemma 2
    assert arch.total_params == pytest.approx(46 * per_layer + 4608 + 256000 * 4608, rel=1e-9)
    text = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
            "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]}
    arch = architecture(text)
    assert {(s.kind, s.layers) for s in arch.kv} == {("full", 2), ("sliding", 2)}
    assert "head_dim=256" in arch.defaults and "sliding_window=4096" in arch.defaults
    with pytest.raises(ConfigError, match="layer_types"):
        architecture({**text, "layer_types": ["full_attention", "chunked_attention"] * 2})


# ------------------------------------------------------------------ Llama 4 Scout (17B active, 16 experts)

SCOUT = dict(h=5120, L=48, heads=40, kv=8, hd=128, V=202048, inter=8192, E=16, k=1, chunk=8192)


def scout_weights(shared_expert: bool = True) -> float:
    s = SCOUT
    expert = 3 * s["h"] * s["inter"]                      # gate, up, down of one expert
    per_layer = (gqa(s["h"], s["heads"], s["kv"], s["hd"])  # attention (q/k norm: weightless L2)
                 + expert * s["k"]                          # 1 of 16 routed experts
                 + (expert if shared_expert else 0)         # the shared expert, every layer (step 1)
                 + s["h"] * s["E"]                          # router
                 + 2 * s["h"])                              # 2 RMSNorms
    params = s["L"] * per_layer + s["h"] + s["h"] + s["V"] * s["h"]  # final norm, 1 embedding row, lm_head
    return params * B


def scout_kv(context: int, all_full: bool = False) -> float:
    s = SCOUT
    per_token = 2 * s["kv"] * s["hd"] * B                 # K and V, one layer
    full_layers = s["L"] if all_full else 12              # NoPE: layers 3, 7, ..., 47 (every 4th)
    chunked_layers = s["L"] - full_layers                 # RoPE: chunked attention, 8192-token chunks
    return per_token * (full_layers * context + chunked_layers * (context % s["chunk"]))


def test_scout_active_params_with_and_without_the_shared_expert():
    s = SCOUT
    arch = architecture(load("llama-4-scout-17b-16e-instruct"))
    with_embeddings = arch.active_params - s["h"] + s["V"] * s["h"]   # counting the whole input table
    assert with_embeddings == pytest.approx(17.2e9, rel=0.01)
    expert_total = s["L"] * 3 * s["h"] * s["inter"]
    assert with_embeddings - expert_total == pytest.approx(11.1e9, rel=0.01)
    assert arch.total_params == pytest.approx(107.8e9, rel=0.01)  # 109B with the vision encoder


@pytest.mark.parametrize("context", (*CONTEXTS, 40000))
def test_llama4_scout_ceiling(context):
    mb, c = ceiling("llama-4-scout-17b-16e-instruct", context)
    assert mb.weight_bytes == pytest.approx(scout_weights(), rel=0.02)
    assert c.per_stream_tok_s == pytest.approx(BW / (scout_weights() + scout_kv(context)), rel=0.02)


def test_llama4_scout_old_figures_are_off_and_the_split_is_said():
    mb, c = ceiling("llama-4-scout-17b-16e-instruct", 131072)
    no_shared = BW / (scout_weights(shared_expert=False) + scout_kv(131072))
    all_full = BW / (scout_weights() + scout_kv(131072, all_full=True))
    assert abs(no_shared / c.per_stream_tok_s - 1) > 0.05
    assert abs(all_full / c.per_stream_tok_s - 1) > 0.05
    text = mb.describe_kv(40000)
    assert "12 full layers" in text and "36 chunked layers" in text and "chunk 8 192" in text
    assert "shared expert" in mb.source and "vision encoder" in mb.source


def test_llama4_maverick_style_interleave_and_dense_layers():
    """Maverick: 128 experts, MoE every 2nd layer, dense layers of intermediate_size_mlp 16384."""
    cfg = load("llama-4-scout-17b-16e-instruct")
    cfg["text_config"].update(num_local_experts=128, interleave_moe_layer_step=2, use_qk_norm=False)
    arch = architecture(cfg)
    h, inter, dense = 5120, 8192, 16384
    moe_layers, dense_layers = 24, 24                       # layers 1, 3, ..., 47 are MoE
    total = (48 * gqa(h, 40, 8, 128) + moe_layers * (128 * 3 * h * inter + 3 * h * inter + h * 128)
             + dense_layers * 3 * h * dense + 48 * 2 * h + h + 2 * 202048 * h)
    assert arch.total_params == pytest.approx(total, rel=1e-9)
    assert arch.total_params == pytest.approx(400e9, rel=0.01)


# ------------------------------------------------------------------ Qwen3-235B-A22B (control)

def qwen3_weights() -> float:
    h, L, heads, kv, hd, V, E, k, moe_inter = 4096, 94, 64, 4, 128, 151936, 128, 8, 1536
    per_layer = (gqa(h, heads, kv, hd) + 2 * hd          # attention + per-head q/k RMSNorms
                 + k * 3 * h * moe_inter                 # 8 of 128 experts, no shared expert
                 + h * E + 2 * h)                        # router, 2 norms
    return (L * per_layer + h + h + V * h) * B


@pytest.mark.parametrize("context", CONTEXTS)
def test_qwen3_235b_ceiling(context):
    mb, c = ceiling("qwen3-235b-a22b", context)
    kv = 94 * 2 * 4 * 128 * B * context                  # full attention on all 94 layers
    assert c.per_stream_tok_s == pytest.approx(BW / (qwen3_weights() + kv), rel=0.02)
    assert mb.total_params == pytest.approx(235.1e9, rel=0.01)


# ------------------------------------------------------------------ Mistral Small 3.1 24B (control, nested)

@pytest.mark.parametrize("context", CONTEXTS)
def test_mistral_small_31_ceiling(context):
    """mistral3 wrapper around a ``mistral`` text_config: head_dim 128 (not 5120 / 32 = 160), untied
    (MistralConfig's default), sliding_window null: full attention on all 40 layers."""
    h, L, heads, kv_heads, hd, V, inter = 5120, 40, 32, 8, 128, 131072, 32768
    weights = (L * (gqa(h, heads, kv_heads, hd) + 3 * h * inter + 2 * h) + h + h + V * h) * B
    kv = L * 2 * kv_heads * hd * B * context
    mb, c = ceiling("mistral-small-3.1-24b-instruct-2503", context)
    assert c.per_stream_tok_s == pytest.approx(BW / (weights + kv), rel=0.02)
    assert mb.total_params == pytest.approx(23.6e9, rel=0.01)   # 24B with the Pixtral encoder
    assert "language model only (mistral3 text_config)" in mb.source


# ------------------------------------------------------------------ Llama 3.1 8B (control)

@pytest.mark.parametrize("context", CONTEXTS)
def test_llama_31_8b_ceiling(context):
    h, L, heads, kv_heads, hd, V, inter = 4096, 32, 32, 8, 128, 128256, 14336
    weights = (L * (gqa(h, heads, kv_heads, hd) + 3 * h * inter + 2 * h) + h + h + V * h) * B
    kv = L * 2 * kv_heads * hd * B * context
    mb, c = ceiling("llama-3.1-8b-instruct", context)
    assert c.per_stream_tok_s == pytest.approx(BW / (weights + kv), rel=0.02)
    assert mb.describe_kv(context).startswith("KV: 131,072 B/token")


# ------------------------------------------------------------------ nesting and refusals

def test_nested_config_is_read_by_its_inner_model_type_and_refused_clearly():
    with pytest.raises(ConfigError, match=r"text_config.model_type 'falcon' \(the language model of this "
                                          r"'llava' config\) is not modelled.*not counted as Llama"):
        architecture({"model_type": "llava", "text_config": {"model_type": "falcon", "hidden_size": 64}})
    with pytest.raises(ConfigError, match=r"'llava' config whose text_config has no model_type.*safetensors"):
        architecture({"model_type": "llava", "text_config": {"hidden_size": 64}})
    with pytest.raises(ConfigError, match=r"gemma3 config keeps its language model in text_config"):
        architecture({"model_type": "gemma3", "torch_dtype": "bfloat16"})
    with pytest.raises(ConfigError, match=r"\(text_config\): missing num_hidden_layers"):
        architecture({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 64}})
    llava = {"model_type": "llava", "torch_dtype": "bfloat16",
             "text_config": {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
                             "vocab_size": 100}}
    arch = architecture(llava)
    assert arch.model_type == "llama" and arch.layers == 2


def test_mistral_7b_v03_plain_text_config_counts_its_published_7_25b_params():
    """A plain (not nested) mistral config.json: 32 layers, hidden 4096, 32 heads / 8 KV heads of 128,
    MLP 14336, vocabulary 32768, untied; the model card's 7.25 B parameters."""
    arch = architecture(json.loads((CONFIGS / "mistral-7b-instruct-v0.3.json").read_text("utf-8")))
    h, layers, vocab = 4096, 32, 32768
    per_layer = h * 4096 + 2 * h * 1024 + 4096 * h + 3 * h * 14336 + 2 * h
    assert arch.total_params == 2 * vocab * h + layers * per_layer + h
    assert arch.total_params == pytest.approx(7.25e9, rel=0.002)
    assert [(s.kind, s.layers) for s in arch.kv] == [("full", 32)]  # sliding_window null: no window
