"""Model directories with safetensors files: exact bytes from the headers, as a decode step reads
them (routed experts k / E, input embedding one row, towers and MTP left out), the KV from the
config; wired into ``config:`` / ``--config``.  Every expected figure is written out from the
architecture below, and the stored total is checked against the safetensors library's own read."""
import json
import math

import numpy as np
import pytest

from pytest_llm_latency.cli import main as cli
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.roofline.resolve import resolve_model_bytes, roofline_inputs
from pytest_llm_latency.roofline.safetensors_reader import model_bytes_from_safetensors, read_checkpoint
from tests.helpers.safetensors_files import (file_tensor_bytes, numpy_tensor_bytes, write, write_config,
                                             write_numpy)

pytest.importorskip("safetensors", reason="the test extra installs safetensors (an independent writer)")


# ------------------------------------------------------------------ (a) gpt-oss-style MXFP4 MoE

H, L, HEADS, KVH, HD, E, K, INTER, V = 64, 2, 4, 2, 16, 8, 2, 64, 100
GPT_OSS_STYLE = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": H, "num_hidden_layers": L,
    "num_attention_heads": HEADS, "num_key_value_heads": KVH, "head_dim": HD, "intermediate_size": INTER,
    "num_local_experts": E, "num_experts_per_tok": K, "experts_per_token": K, "vocab_size": V,
    "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 128, "attention_bias": True,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "max_position_embeddings": 4096,
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}


def gpt_oss_tensors() -> dict:
    t = {"model.embed_tokens.weight": ("BF16", (V, H)), "lm_head.weight": ("BF16", (V, H)),
         "model.norm.weight": ("BF16", (H,))}
    for i in range(L):
        p = f"model.layers.{i}"
        for proj, rows in (("q", HEADS * HD), ("k", KVH * HD), ("v", KVH * HD)):
            t[f"{p}.self_attn.{proj}_proj.weight"] = ("BF16", (rows, H))
            t[f"{p}.self_attn.{proj}_proj.bias"] = ("BF16", (rows,))
        t[f"{p}.self_attn.o_proj.weight"] = ("BF16", (H, HEADS * HD))
        t[f"{p}.self_attn.o_proj.bias"] = ("BF16", (H,))
        t[f"{p}.self_attn.sinks"] = ("BF16", (HEADS,))
        t[f"{p}.input_layernorm.weight"] = ("BF16", (H,))
        t[f"{p}.post_attention_layernorm.weight"] = ("BF16", (H,))
        t[f"{p}.mlp.router.weight"] = ("BF16", (E, H))
        t[f"{p}.mlp.router.bias"] = ("BF16", (E,))
        # MXFP4: blocks of 32 four-bit values in 16 bytes, one E8M0 scale byte per block
        t[f"{p}.mlp.experts.gate_up_proj_blocks"] = ("U8", (E, 2 * INTER, H // 32, 16))
        t[f"{p}.mlp.experts.gate_up_proj_scales"] = ("U8", (E, 2 * INTER, H // 32))
        t[f"{p}.mlp.experts.gate_up_proj_bias"] = ("BF16", (E, 2 * INTER))
        t[f"{p}.mlp.experts.down_proj_blocks"] = ("U8", (E, H, INTER // 32, 16))
        t[f"{p}.mlp.experts.down_proj_scales"] = ("U8", (E, H, INTER // 32))
        t[f"{p}.mlp.experts.down_proj_bias"] = ("BF16", (E, H))
    return t


def test_mxfp4_moe_routed_experts_k_of_e_and_embedding_one_row(tmp_path):
    d = write_config(tmp_path / "gpt-oss-mini", GPT_OSS_STYLE)
    f = write(d / "model.safetensors", gpt_oss_tensors())
    attention = HEADS * HD * H + 2 * KVH * HD * H + H * HEADS * HD + (HEADS * HD + 2 * KVH * HD + H) + HEADS
    shared_per_layer = 2 * (attention + 2 * H + E * H + E)                      # bf16: attention, norms, router
    routed_per_layer = (E * 2 * INTER * (H // 32) * 16 + E * 2 * INTER * (H // 32) + 2 * E * 2 * INTER     # gate_up
                        + E * H * (INTER // 32) * 16 + E * H * (INTER // 32) + 2 * E * H)               # down
    total = L * (shared_per_layer + routed_per_layer) + 2 * (2 * V * H) + 2 * H
    expected = L * shared_per_layer + L * routed_per_layer * K / E + 2 * H + 2 * V * H + 2 * H
    #                                                   embedding: one row ^   lm_head ^  norm ^

    tensors, _ = read_checkpoint(d)
    assert sum(t.nbytes for t in tensors) == total == file_tensor_bytes(f)
    mb = resolve_model_bytes(config=str(d))
    assert mb.weight_bytes == pytest.approx(expected, rel=1e-12)
    assert mb.routed_weight_bytes == L * routed_per_layer
    assert (mb.experts, mb.experts_per_token) == (E, K)
    assert mb.weight_bytes_at_batch(1) == pytest.approx(expected, rel=1e-12)
    assert mb.weight_bytes_at_batch(10 ** 6) == pytest.approx(total - 2 * V * H + 2 * H, rel=1e-12)  # all experts
    assert mb.source.startswith("model.safetensors headers: ")
    assert f"{K} of {E} experts" in mb.source and "input embedding one row" in mb.source
    assert "U8" in mb.source and "BF16" in mb.source
    assert "stored elements are not params" in mb.source
    assert mb.name == "gpt-oss-mini"


# ------------------------------------------------------------------ an unmodelled model type

TOY = {"model_type": "toy_moe_unmodelled", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 50,
       "n_routed_experts": 4, "num_experts_per_tok": 1, "num_nextn_predict_layers": 1,
       "tie_word_embeddings": True, "torch_dtype": "bfloat16"}


def toy_tensors() -> dict:
    t = {"model.embed_tokens.weight": ("BF16", (50, 32)), "model.norm.weight": ("BF16", (32,)),
         "model.layers.2.embed_tokens.weight": ("BF16", (50, 32)),               # MTP layer (index 2 >= 2 layers)
         "model.layers.2.mlp.experts.0.gate_proj.weight": ("BF16", (16, 32)),
         "model.layers.2.eh_proj.weight": ("BF16", (32, 64)),
         "vision_tower.encoder.fc1.weight": ("F32", (64, 64)),
         "multi_modal_projector.linear.weight": ("BF16", (32, 64))}
    for i in range(2):
        p = f"model.layers.{i}"
        t[f"{p}.self_attn.q_proj.weight"] = ("BF16", (32, 32))
        t[f"{p}.mlp.gate.weight"] = ("BF16", (4, 32))
        for m in ["shared_experts"] + [f"experts.{e}" for e in range(4)]:
            t[f"{p}.mlp.{m}.gate_proj.weight"] = ("BF16", (16, 32))
            t[f"{p}.mlp.{m}.up_proj.weight"] = ("BF16", (16, 32))
            t[f"{p}.mlp.{m}.down_proj.weight"] = ("BF16", (32, 16))
    return t


def test_unmodelled_type_weights_from_headers_kv_unknown(tmp_path):
    d = write_config(tmp_path / "toy", TOY)
    f = write(d / "model.safetensors", toy_tensors())
    expert = 3 * 16 * 32                                   # gate, up, down of one expert
    shared_layer = 32 * 32 + 4 * 32 + expert               # q_proj, router, shared expert (whole)
    expected_params = 50 * 32 + 32 + 2 * shared_layer + 2 * 4 * expert * 1 / 4   # tied: embedding whole
    mb = resolve_model_bytes(config=str(d))
    assert mb.weight_bytes == pytest.approx(2 * expected_params)
    assert mb.params == pytest.approx(expected_params)     # every tensor bf16: elements are params
    assert mb.routed_weight_bytes == 2 * 2 * 4 * expert
    excluded_vision, excluded_mtp = 64 * 64 * 4 + 32 * 64 * 2, 2 * (50 * 32 + 16 * 32 + 32 * 64)
    assert file_tensor_bytes(f) == 2 * (expected_params + 2 * 3 * expert) + excluded_vision + excluded_mtp
    assert "input embedding read whole (tied" in mb.source
    assert "vision tower 16.4 KB (1 tensor)" in mb.source and "MTP layers 8.3 KB (3 tensors)" in mb.source
    assert not mb.kv_known and "KV unknown: model_type 'toy_moe_unmodelled' is not modelled" in mb.source
    h100 = catalog.hardware("h100-sxm")
    assert decode_ceiling(h100, mb, 0).per_stream_tok_s == pytest.approx(h100.bandwidth_bytes_s / mb.weight_bytes)
    with pytest.raises(ConfigError, match="KV cache size"):
        decode_ceiling(h100, mb, 100)
    given = resolve_model_bytes(config=str(d), layers=2, kv_heads=2, head_dim=16)
    assert given.weight_bytes == mb.weight_bytes and given.kv_bytes_per_token == 2 * 2 * 2 * 16 * 2


def test_routed_tensors_without_expert_counts_are_refused(tmp_path):
    d = write_config(tmp_path / "toy", {k: v for k, v in TOY.items() if k != "n_routed_experts"})
    write(d / "model.safetensors", toy_tensors())
    with pytest.raises(ConfigError, match="routed-expert tensor but .*config.json") as e:
        resolve_model_bytes(config=str(d))
    assert "model.safetensors" in str(e.value) and "num_local_experts" in str(e.value)


def test_expert_index_past_the_config_count_is_refused(tmp_path):
    d = write_config(tmp_path / "toy", {**TOY, "n_routed_experts": 3})
    write(d / "model.safetensors", toy_tensors())
    with pytest.raises(ConfigError, match="expert 3 but .* gives 3 experts"):
        resolve_model_bytes(config=str(d))


def test_experts_in_the_config_but_no_routed_tensor_recognized_is_refused(tmp_path):
    """Granite-MoE-like fused names (``block_sparse_moe.input_linear``) would be charged whole."""
    d = write_config(tmp_path / "granite-like", {**TOY, "n_routed_experts": 40})
    write(d / "model.safetensors", {"model.layers.0.block_sparse_moe.input_linear.weight": ("BF16", (40, 8, 4))})
    with pytest.raises(ConfigError, match="gives 40 routed experts but no tensor name has an 'experts' component"):
        resolve_model_bytes(config=str(d))


# ------------------------------------------------------------------ (b) dense fp8 with block scales

FP8_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
             "intermediate_size": 320, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 64, "vocab_size": 1000, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
             "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                     "weight_block_size": [128, 128]}}
FP8_SHAPES = {"self_attn.q_proj": (256, 256), "self_attn.k_proj": (128, 256), "self_attn.v_proj": (128, 256),
              "self_attn.o_proj": (256, 256), "mlp.gate_proj": (320, 256), "mlp.up_proj": (320, 256),
              "mlp.down_proj": (256, 320)}


def fp8_llama(directory):
    d = write_config(directory, FP8_LLAMA)
    t = {"model.embed_tokens.weight": ("BF16", (1000, 256)), "lm_head.weight": ("BF16", (1000, 256)),
         "model.norm.weight": ("BF16", (256,))}
    for i in range(2):
        for mod, (r, c) in FP8_SHAPES.items():
            t[f"model.layers.{i}.{mod}.weight"] = ("F8_E4M3", (r, c))
            t[f"model.layers.{i}.{mod}.weight_scale_inv"] = ("F32", (math.ceil(r / 128), math.ceil(c / 128)))
        t[f"model.layers.{i}.input_layernorm.weight"] = ("BF16", (256,))
        t[f"model.layers.{i}.post_attention_layernorm.weight"] = ("BF16", (256,))
    return d, write(d / "model.safetensors", t)


def test_fp8_block_scales_at_their_stored_size(tmp_path):
    d, f = fp8_llama(tmp_path / "llama-fp8")
    fp8 = 256 * 256 + 128 * 256 + 128 * 256 + 256 * 256 + 320 * 256 + 320 * 256 + 256 * 320   # 1 B each
    scales = 4 * (2 * 2 + 1 * 2 + 1 * 2 + 2 * 2 + 3 * 2 + 3 * 2 + 2 * 3)    # ceil(r/128) x ceil(c/128) fp32
    norms = 2 * 2 * 256
    expected = 2 * (fp8 + scales + norms) + 2 * 256 + 2 * 1000 * 256 + 2 * 256   # embedding one row, head, norm
    mb = resolve_model_bytes(config=str(d))
    assert mb.weight_bytes == pytest.approx(expected, rel=1e-12)
    assert file_tensor_bytes(f) == expected - 2 * 256 + 2 * 1000 * 256
    assert mb.kv_bytes_per_token == 2 * 2 * 2 * 64 * 2                  # layers x K,V x kv_heads x head_dim x bf16
    assert mb.kv_bytes_at(1000) == 1000 * mb.kv_bytes_per_token
    assert resolve_model_bytes(config=str(d), kv_dtype="fp8").kv_bytes_per_token == 2 * 2 * 2 * 64 * 1
    # config arithmetic charges 4 / (128 x 128) B per fp8 weight: exact where 128 divides the shape; the
    # 320-wide gate/up/down need ceil(320 / 128) = 3 blocks, not 2.5: 4 bytes more per matrix
    arithmetic = resolve_model_bytes(config=str(d / "config.json"))
    assert "config arithmetic (fallback" in arithmetic.source
    assert mb.weight_bytes - arithmetic.weight_bytes == pytest.approx(2 * 3 * 4, abs=1e-6)
    assert mb.params == arithmetic.params and "params from config arithmetic" in mb.source


def test_dtype_given_with_a_directory_uses_config_arithmetic_and_says_so(tmp_path):
    d, _ = fp8_llama(tmp_path / "llama-fp8")
    mb = resolve_model_bytes(config=str(d), dtype="bf16", names={"dtype": "roofline.dtype"})
    assert mb.source.startswith("roofline.dtype bf16 given: config arithmetic used instead of the safetensors "
                                "headers")
    assert mb.weight_bytes == resolve_model_bytes(config=str(d / "config.json"), dtype="bf16").weight_bytes
    assert resolve_model_bytes(config=str(d), bits=4).source.startswith("bits 4 given: config arithmetic")


def test_a_config_that_contradicts_the_checkpoint_is_refused(tmp_path):
    d = write_config(tmp_path / "m", {**FP8_LLAMA, "quantization_config": None})
    write(d / "model.safetensors", {"model.layers.0.mlp.experts.0.w1.weight": ("BF16", (4, 4))})
    with pytest.raises(ConfigError, match=r"experts=0.*\(llama\)|\(llama\).*experts=0"):
        resolve_model_bytes(config=str(d))


# ------------------------------------------------------------------ int32-packed AWQ, NVFP4

def test_awq_int32_packing_equals_the_awq_arithmetic(tmp_path):
    """qweight [in, out/8] int32 (8 four-bit values each), qzeros [in/g, out/8] int32, scales [in/g, out]
    fp16: per weight 4/8 + (2 + 4/8) / g bytes, the config arithmetic's AWQ formula, exactly."""
    hidden, inter, heads, head_dim, vocab, group = 128, 256, 2, 64, 64, 64
    cfg = {"model_type": "llama", "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": 1,
           "num_attention_heads": heads, "num_key_value_heads": 1, "head_dim": head_dim, "vocab_size": vocab,
           "tie_word_embeddings": False, "torch_dtype": "float16",
           "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": group, "version": "gemm"}}
    d = write_config(tmp_path / "awq", cfg)
    linears = {"self_attn.q_proj": (hidden, heads * head_dim), "self_attn.k_proj": (hidden, head_dim),
               "self_attn.v_proj": (hidden, head_dim), "self_attn.o_proj": (heads * head_dim, hidden),
               "mlp.gate_proj": (hidden, inter), "mlp.up_proj": (hidden, inter), "mlp.down_proj": (inter, hidden)}
    t = {"model.embed_tokens.weight": ("F16", (vocab, hidden)), "lm_head.weight": ("F16", (vocab, hidden)),
         "model.norm.weight": ("F16", (hidden,)), "model.layers.0.input_layernorm.weight": ("F16", (hidden,)),
         "model.layers.0.post_attention_layernorm.weight": ("F16", (hidden,))}
    for mod, (fan_in, fan_out) in linears.items():
        t[f"model.layers.0.{mod}.qweight"] = ("I32", (fan_in, fan_out // 8))
        t[f"model.layers.0.{mod}.qzeros"] = ("I32", (fan_in // group, fan_out // 8))
        t[f"model.layers.0.{mod}.scales"] = ("F16", (fan_in // group, fan_out))
    f = write(d / "model.safetensors", t)
    weights = sum(i * o for i, o in linears.values())
    expected = weights * (0.5 + 2.5 / group) + 2 * hidden + 2 * vocab * hidden + 3 * 2 * hidden
    mb = resolve_model_bytes(config=str(d))
    assert mb.weight_bytes == pytest.approx(expected, rel=1e-12)
    assert file_tensor_bytes(f) == expected - 2 * hidden + 2 * vocab * hidden
    assert mb.weight_bytes == pytest.approx(resolve_model_bytes(config=str(d / "config.json")).weight_bytes,
                                            rel=1e-12)
    assert "I32 tensors hold packed values" in mb.source


def test_nvfp4_packed_weights_and_fp8_scales_at_their_stored_size(tmp_path):
    """NVFP4 (modelopt): U8 weight [r, c/2] (two fp4 per byte), F8 scale per 16 values, F32 global scales."""
    r, c = 256, 512
    d = write_config(tmp_path / "nvfp4", {**FP8_LLAMA, "num_hidden_layers": 1, "hidden_size": c,
                                          "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}})
    write(d / "model.safetensors", {"model.layers.0.mlp.gate_proj.weight": ("U8", (r, c // 2)),
                                    "model.layers.0.mlp.gate_proj.weight_scale": ("F8_E4M3", (r, c // 16)),
                                    "model.layers.0.mlp.gate_proj.weight_scale_2": ("F32", ()),
                                    "model.layers.0.mlp.gate_proj.input_scale": ("F32", ())})
    mb = resolve_model_bytes(config=str(d))
    assert mb.weight_bytes == r * c / 2 + r * c / 16 + 4 + 4
    assert "U8 65.5 KB, F8_E4M3 8.2 KB, F32 8 B" in mb.source


# ------------------------------------------------------------------ (c) sharded, with an index

def test_sharded_checkpoint_with_index(tmp_path):
    hidden, inter, layers, heads, kv_heads, head_dim, vocab = 32, 64, 2, 4, 2, 8, 40
    cfg = {"model_type": "llama", "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "vocab_size": vocab,
           "tie_word_embeddings": True, "torch_dtype": "float16"}
    d = write_config(tmp_path / "tiny", cfg)

    def layer(i):
        p = f"model.layers.{i}"
        shapes = {"self_attn.q_proj": (heads * head_dim, hidden), "self_attn.k_proj": (kv_heads * head_dim, hidden),
                  "self_attn.v_proj": (kv_heads * head_dim, hidden), "self_attn.o_proj": (hidden, heads * head_dim),
                  "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden), "mlp.down_proj": (hidden, inter),
                  "input_layernorm": (hidden,), "post_attention_layernorm": (hidden,)}
        return {f"{p}.{m}.weight": np.zeros(s, np.float16) for m, s in shapes.items()}

    shards = {"model-00001-of-00002.safetensors": {"model.embed_tokens.weight": np.zeros((vocab, hidden), np.float16),
                                                   **layer(0)},
              "model-00002-of-00002.safetensors": {**layer(1), "model.norm.weight": np.zeros((hidden,), np.float16)}}
    for name, arrays in shards.items():
        write_numpy(d / name, arrays)
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: name for name, arrays in shards.items() for k in arrays}}))
    per_layer = (hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2 + 3 * hidden * inter + 2 * hidden)
    params = vocab * hidden + hidden + layers * per_layer     # tied: the embedding serves as the head, read whole
    mb = resolve_model_bytes(config=str(d))
    assert sum(numpy_tensor_bytes(d / name) for name in shards) == 2 * params
    assert mb.weight_bytes == 2 * params and mb.params == params
    assert mb.params == resolve_model_bytes(config=str(d / "config.json")).params      # the arithmetic agrees
    assert mb.source.startswith("model.safetensors.index.json: 2 shards' headers")
    assert mb.kv_bytes_per_token == layers * 2 * kv_heads * head_dim * 2


# ------------------------------------------------------------------ wiring: CLI and YAML

def test_ceiling_cli_reads_the_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "SUBCOMMANDS", {"ceiling": cli.SUBCOMMANDS["ceiling"]})
    d, _ = fp8_llama(tmp_path / "llama-fp8")
    code = cli.main(["ceiling", "--hardware", "h100-sxm", "--config", str(d), "--context", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["model_source"].startswith("model.safetensors headers: ")
    assert out["weight_bytes"] == model_bytes_from_safetensors(d).weight_bytes
    assert out["ceiling_tok_s"] == pytest.approx(catalog.hardware("h100-sxm").bandwidth_bytes_s / out["weight_bytes"])


def test_yaml_config_key_takes_a_directory_relative_to_the_slo_file(tmp_path):
    fp8_llama(tmp_path / "models" / "llama-fp8")
    _, mb = roofline_inputs({"hardware": "h100-sxm", "config": "models/llama-fp8"}, base_dir=tmp_path)
    assert mb.source.startswith("model.safetensors headers: ")


def test_a_directory_without_safetensors_falls_back_to_config_arithmetic(tmp_path):
    d = write_config(tmp_path / "m", FP8_LLAMA)
    assert "config arithmetic (fallback" in resolve_model_bytes(config=str(d)).source
