"""Per-layer KV layouts from GGUF metadata, as the pinned llama.cpp builds its cache.

Each case writes the metadata a converter writes for the architecture and works the bytes out by
hand from the layers, heads, head sizes, window and pattern (llama.cpp's ``load_arch_hparams``).
The KV cache is f16 (2 bytes per element) unless said; recurrent state is F32.
"""
import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.roofline.gguf_layout import gguf_kv_layout

F16 = 2.0
C = 32768  # the context a step is charged at


def layout(arch, elem=F16, **keys):
    meta = {f"{arch}.{k.replace('__', '.')}": v for k, v in keys.items()}
    return gguf_kv_layout(meta, arch, elem_bytes=elem, where="gguf 'm.gguf'")


def kinds(lay):
    return {g.kind: g.layers for g in lay.groups}


def test_gemma3_every_sixth_layer_is_full():
    # 12 layers, period 6 with the full layer last: layers 5 and 11 full, 10 sliding (window 512)
    lay = layout("gemma3", block_count=12, embedding_length=640, attention__head_count=4,
                 attention__head_count_kv=1, attention__key_length=256, attention__value_length=256,
                 attention__sliding_window=512)
    per_layer = 1 * (256 + 256) * 2  # one KV head, K and V of 256, f16
    assert kinds(lay) == {"full": 2, "sliding": 10}
    assert lay.bytes_at(C) == 2 * per_layer * C + 10 * per_layer * 512
    assert sum(g.layers * g.bytes_per_token for g in lay.groups) == 12 * per_layer
    assert "10 windowed layers" in lay.describe(C)


def test_gemma3_pattern_key_and_per_layer_array_override_the_default():
    base = dict(block_count=8, embedding_length=512, attention__head_count=4, attention__head_count_kv=2,
                attention__sliding_window=128)
    assert kinds(layout("gemma3", **base, attention__sliding_window_pattern=4)) == {"sliding": 6, "full": 2}
    arr = [True, False, False, True, True, True, True, True]
    assert kinds(layout("gemma3", **base, attention__sliding_window_pattern=arr)) == {"sliding": 6, "full": 2}
    # no window in the file: llama.cpp turns SWA off for gemma3, every layer full
    no_window = {k: v for k, v in base.items() if k != "attention__sliding_window"}
    assert kinds(layout("gemma3", **no_window)) == {"full": 8}


def test_gemma2_alternates_with_a_4096_window_by_default():
    lay = layout("gemma2", block_count=4, embedding_length=256, attention__head_count=2, attention__head_count_kv=2)
    per_layer = 2 * (128 + 128) * 2  # head size 256 / 2 = 128
    assert kinds(lay) == {"sliding": 2, "full": 2}
    assert lay.bytes_at(C) == 2 * per_layer * C + 2 * per_layer * 4096


def test_gpt_oss_alternates_starting_with_a_sliding_layer():
    # gpt-oss-20b's attention: 24 layers, 8 KV heads of 64, window 128, even layers sliding
    lay = layout("gpt-oss", block_count=24, embedding_length=2880, attention__head_count=64,
                 attention__head_count_kv=8, attention__key_length=64, attention__value_length=64,
                 attention__sliding_window=128)
    per_layer = 8 * (64 + 64) * 2
    assert kinds(lay) == {"sliding": 12, "full": 12}
    assert lay.bytes_at(C) == 12 * per_layer * C + 12 * per_layer * 128
    assert layout("gpt-oss", block_count=2, embedding_length=64, attention__head_count=1,
                  attention__sliding_window=16).groups[0].kind == "sliding"  # layer 0


def test_sliding_layers_with_their_own_head_size():
    lay = layout("gpt-oss", block_count=2, embedding_length=64, attention__head_count=4, attention__head_count_kv=1,
                 attention__key_length=64, attention__value_length=64, attention__key_length_swa=32,
                 attention__value_length_swa=32, attention__sliding_window=16)
    assert lay.bytes_at(100) == (32 + 32) * 2 * 16 + (64 + 64) * 2 * 100


def test_cohere2moe_is_full_first_in_each_period():
    # 6 layers, period 4: full at 0 and 4 (cohere2, full last in each period: at 3 only)
    keys = dict(block_count=6, embedding_length=128, attention__head_count=2, attention__sliding_window=64)
    assert kinds(layout("cohere2moe", **keys)) == {"full": 2, "sliding": 4}
    assert kinds(layout("cohere2", **keys)) == {"sliding": 5, "full": 1}


def test_llama4_chunks_of_8192_on_three_layers_of_four():
    base = dict(block_count=8, embedding_length=512, attention__head_count=8, attention__head_count_kv=2)
    lay = layout("llama4", **base)
    per_layer = 2 * (64 + 64) * 2
    assert kinds(lay) == {"chunked": 6, "full": 2}
    assert lay.bytes_at(10000) == 2 * per_layer * 10000 + 6 * per_layer * (10000 - 8192)
    assert kinds(layout("llama4", **base, attention__sliding_window=0)) == {"full": 8}


def test_mla_file_caches_the_latent_only():
    # DeepSeek-V3 as converted with the split attn_k_b / attn_v_b: one KV "head" of kv_lora_rank 512
    # + rope 64 = 576, K only (V is a view of it); the per-head sizes live in the *_mla keys
    keys = dict(block_count=61, embedding_length=7168, attention__head_count=128, attention__head_count_kv=1,
                attention__key_length=576, attention__value_length=512, attention__key_length_mla=192,
                attention__value_length_mla=128, attention__kv_lora_rank=512, rope__dimension_count=64)
    lay = layout("deepseek2", **keys)
    assert kinds(lay) == {"latent": 61}
    assert lay.bytes_at(C) == 61 * 576 * 2 * C


def test_legacy_mla_file_with_attn_kv_b_caches_full_per_head_k_and_v():
    # an older conversion (one attn_kv_b, no *_mla keys): 128 heads of K 192 and V 128
    lay = layout("deepseek2", block_count=61, embedding_length=7168, attention__head_count=128,
                 attention__head_count_kv=128, attention__key_length=192, attention__value_length=128,
                 attention__kv_lora_rank=512, rope__dimension_count=64)
    assert kinds(lay) == {"full": 61}
    assert lay.bytes_at(C) == 61 * 128 * (192 + 128) * 2 * C


def test_per_layer_kv_heads_with_attention_free_layers():
    # deci (Nemotron NAS): 4 layers, KV heads 8, 0 (no attention), 4, 8; head size 4096 / 32 = 128
    lay = layout("deci", block_count=4, embedding_length=4096, attention__head_count=[32, 0, 32, 32],
                 attention__head_count_kv=[8, 0, 4, 8])
    assert lay.bytes_at(C) == (8 + 4 + 8) * (128 + 128) * 2 * C


def test_mamba2_state_is_constant():
    # n_embd_r = (d_conv - 1) × (d_inner + 2 × groups × d_state), n_embd_s = d_state × d_inner, F32
    lay = layout("mamba2", block_count=48, embedding_length=2560, ssm__conv_kernel=4, ssm__inner_size=5120,
                 ssm__state_size=128, ssm__group_count=1)
    state = 4 * (3 * (5120 + 2 * 128) + 128 * 5120)
    assert kinds(lay) == {"state": 48}
    assert lay.bytes_at(10) == lay.bytes_at(C) == 2 * 48 * state  # read and written
    assert layout("mamba2", elem=1.0, block_count=48, embedding_length=2560, ssm__conv_kernel=4,
                  ssm__inner_size=5120, ssm__state_size=128, ssm__group_count=1).bytes_at(C) == 2 * 48 * state


def test_jamba_layers_without_kv_heads_are_mamba():
    lay = layout("jamba", block_count=8, embedding_length=4096, attention__head_count=32,
                 attention__head_count_kv=[0, 0, 0, 0, 8, 0, 0, 0], ssm__conv_kernel=4, ssm__inner_size=8192,
                 ssm__state_size=16)
    state = 4 * (3 * 8192 + 16 * 8192)  # Mamba-1: no groups
    assert kinds(lay) == {"full": 1, "state": 7}
    assert lay.bytes_at(C) == 8 * (128 + 128) * 2 * C + 2 * 7 * state


def test_qwen3next_full_attention_every_fourth_layer_and_gated_deltanet_state():
    # Qwen3-Next-80B-A3B: 48 layers, full attention every 4th (2 KV heads of 256), the rest gated
    # delta net: conv 4, d_inner 4096 (32 v-heads × 128), d_state 128, 16 groups
    lay = layout("qwen3next", block_count=48, embedding_length=2048, attention__head_count=16,
                 attention__head_count_kv=2, attention__key_length=256, attention__value_length=256,
                 full_attention_interval=4, ssm__conv_kernel=4, ssm__inner_size=4096, ssm__state_size=128,
                 ssm__group_count=16)
    state = 4 * (3 * (4096 + 2 * 16 * 128) + 128 * 4096)
    assert kinds(lay) == {"full": 12, "state": 36}
    assert lay.bytes_at(C) == 12 * 2 * (256 + 256) * 2 * C + 2 * 36 * state


def test_qwen3next_recurrent_layers_as_a_list_or_one_value():
    common = dict(block_count=4, embedding_length=2048, attention__head_count=16, attention__head_count_kv=2,
                  attention__key_length=256, attention__value_length=256, ssm__conv_kernel=4,
                  ssm__inner_size=4096, ssm__state_size=128, ssm__group_count=16)
    listed = layout("qwen3next", attention__recurrent_layers=[True, False, True, True], **common)
    assert kinds(listed) == {"full": 1, "state": 3}
    every = layout("qwen3next", attention__recurrent_layers=True, **common)  # one value: all layers recurrent
    assert kinds(every) == {"state": 4}


def test_rwkv_state():
    lay = layout("rwkv6", block_count=24, embedding_length=2048, wkv__head_size=64)
    assert lay.bytes_at(C) == 2 * 24 * 4 * (2 * 2048 + 2048 * 64)  # token shift 2 × n_embd + wkv state


def test_mtp_blocks_have_no_kv_in_the_trunk():
    lay = layout("glm4moe", block_count=47, nextn_predict_layers=1, embedding_length=4096,
                 attention__head_count=96, attention__head_count_kv=8, attention__key_length=128,
                 attention__value_length=128)
    assert kinds(lay) == {"full": 46}


def test_unknown_or_unmodelled_architectures_are_errors_never_full_attention():
    with pytest.raises(ConfigError, match=r"m\.gguf.*'brandnew' is not known.*not counted as full attention.*"
                                          r"layers, kv_heads and head_dim"):
        layout("brandnew", block_count=2, embedding_length=64, attention__head_count=2)
    with pytest.raises(ConfigError, match=r"'gemma3n' \(KV shared across layers"):
        layout("gemma3n", block_count=2, embedding_length=64, attention__head_count=2)
    with pytest.raises(ConfigError, match="no general.architecture"):
        gguf_kv_layout({}, None, elem_bytes=F16, where="gguf 'm.gguf'")


def test_missing_keys_are_named():
    with pytest.raises(ConfigError, match=r"no gpt-oss\.attention\.sliding_window key"):
        layout("gpt-oss", block_count=2, embedding_length=64, attention__head_count=2)
    with pytest.raises(ConfigError, match=r"no step35\.attention\.sliding_window_pattern key.*per-layer array"):
        layout("step35", block_count=2, embedding_length=64, attention__head_count=2, attention__sliding_window=8)
    with pytest.raises(ConfigError, match=r"no mamba\.ssm\.state_size key"):
        layout("mamba", block_count=2, embedding_length=64, ssm__conv_kernel=4, ssm__inner_size=128)
    with pytest.raises(ConfigError, match=r"head_count_kv has 3 entries for 2 layers"):
        layout("llama", block_count=2, embedding_length=64, attention__head_count=2,
               attention__head_count_kv=[1, 1, 1])


def test_a_short_pattern_array_leaves_the_later_layers_full():
    # llama.cpp's get_arr fills what the array gives; the layers after it keep is_swa = false
    lay = layout("gemma3", block_count=4, embedding_length=64, attention__head_count=2, attention__sliding_window=8,
                 attention__sliding_window_pattern=[True, True])
    assert kinds(lay) == {"sliding": 2, "full": 2}
