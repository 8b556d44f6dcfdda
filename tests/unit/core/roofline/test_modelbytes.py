"""Byte sources: dtypes, GGUF quant tables, HF config.json parameter counts, llama.cpp meta, KV."""
import json

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.hardware import ModelSpec
from pytest_llm_latency.core.roofline.archs import architecture, model_bytes_from_hf_config
from pytest_llm_latency.core.roofline.modelbytes import (GGML_TYPE_BITS, GGUF_FILE_TYPE_BITS, bytes_per_param,
    kv_bytes_per_token, kv_elem_bytes, model_bytes_from_llamacpp_models, model_bytes_from_params)
from pytest_llm_latency.roofline.resolve import resolve_model_bytes

# Published architecture numbers (the models' config.json on the Hugging Face hub).
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16", "hidden_act": "silu",
}
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 32000, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "num_experts_per_tok": 2, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "max_position_embeddings": 32768,
}


@pytest.mark.parametrize("dtype, expected", [("fp32", 4), ("bf16", 2), ("fp16", 2), ("FP16", 2), ("bfloat16", 2),
                                             ("fp8", 1), ("int8", 1), ("int4", 0.5)])
def test_plain_dtypes(dtype, expected):
    assert bytes_per_param(dtype) == expected


@pytest.mark.parametrize("name, bits", [("Q8_0", 8.5), ("Q4_0", 4.5), ("Q4_1", 5.0), ("Q5_0", 5.5), ("Q5_1", 6.0),
                                        ("Q6_K", 6.5625), ("F16", 16), ("F32", 32), ("BF16", 16), ("q4_k_m", 4.84),
                                        ("Q5_K_M", 5.68), ("Q3_K_M", 3.91), ("Q2_K", 3.35)])
def test_gguf_quant_types_include_scale_overhead(name, bits):
    assert bytes_per_param(name) == pytest.approx(bits / 8)


def test_ggml_block_table_matches_the_gguf_package():
    gguf = pytest.importorskip("gguf")
    sizes = {t.name: block_bytes * 8 / block for t, (block, block_bytes) in gguf.GGML_QUANT_SIZES.items()}
    for name, bits in GGML_TYPE_BITS.items():
        assert sizes[name] == pytest.approx(bits), name


def test_k_quant_mixtures_sit_above_their_main_block_type():
    # Q4_K_M keeps some tensors at Q6_K, so its average is above the Q4_K block figure, below Q5_K's.
    assert GGML_TYPE_BITS["Q4_K"] < GGUF_FILE_TYPE_BITS["Q4_K_M"] < GGML_TYPE_BITS["Q5_K"]
    assert GGUF_FILE_TYPE_BITS["Q4_K_S"] < GGUF_FILE_TYPE_BITS["Q4_K_M"]
    assert bytes_per_param("Q4_K") == bytes_per_param("Q4_K_M")  # llama-quantize's alias


def test_bits_and_errors():
    assert bytes_per_param(bits=4.5) == pytest.approx(0.5625)
    with pytest.raises(ConfigError, match="did you mean.*Q4_K_M"):
        bytes_per_param("Q4KM")
    with pytest.raises(ConfigError, match="not both"):
        bytes_per_param("fp16", 16)
    with pytest.raises(ConfigError, match="bits"):
        bytes_per_param(bits=0)
    with pytest.raises(ConfigError, match="no dtype"):
        bytes_per_param()


def test_kv_bytes_for_llama_3_8b():
    kv = kv_bytes_per_token(32, 8, 128, 2)
    assert kv == 131_072
    assert kv * 8000 == pytest.approx(1.05e9, rel=0.01)
    assert kv_bytes_per_token(32, 8, 128, 1) == kv / 2  # fp8 KV cache
    spec = ModelSpec(name="x", params=8e9, weight_bytes_per_param=0.5, layers=32, kv_heads=8, head_dim=128)
    assert spec.kv_bytes_per_token == kv  # int4 weights, fp16 KV: the KV dtype is separate


def test_kv_dtype_defaults():
    assert kv_elem_bytes(None, "bf16") == 2 and kv_elem_bytes(None, "fp32") == 4
    assert kv_elem_bytes(None, "Q4_K_M") == 2 and kv_elem_bytes(None, "int4") == 2
    assert kv_elem_bytes("fp8", "fp16") == 1
    with pytest.raises(ConfigError, match="KV cache dtype"):
        kv_elem_bytes("Q4_0")


def test_llama_31_8b_config_gives_8_03e9_params(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31_8B))
    mb = resolve_model_bytes(config=str(path))
    assert mb.total_params == pytest.approx(8.03e9, rel=0.01)
    # a step reads every weight but the untied input embedding, of which it gathers one row
    assert mb.params == pytest.approx(mb.total_params - 128256 * 4096 + 4096)
    assert mb.bytes_per_param == 2  # torch_dtype bfloat16
    assert mb.weight_bytes == pytest.approx(2 * mb.params)
    assert mb.kv_bytes_per_token == 131_072
    # a model directory works too, and dtype overrides torch_dtype
    assert resolve_model_bytes(config=str(tmp_path), dtype="int4").weight_bytes == pytest.approx(mb.params / 2)


def _group(arch, name):
    return sum(g.params for g in arch.groups if g.name == name)


def test_llama_parts_add_up():
    arch = architecture(LLAMA_31_8B)
    assert _group(arch, "input embedding") == _group(arch, "output head") == 128256 * 4096
    assert _group(arch, "attention q/k/v/o") == 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2)
    assert arch.total_params == 2 * 128256 * 4096 + 4096 + 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2
                                                                + 3 * 4096 * 14336 + 8192)
    tied = architecture({**LLAMA_31_8B, "tie_word_embeddings": True})
    assert _group(tied, "output head") == 0 and arch.total_params - tied.total_params == 128256 * 4096
    # tied: the table serves as the output head and is read whole; untied: one row of it
    assert tied.active_params - (arch.active_params - 128256 * 4096) == 128256 * 4096 - 4096
    biased = architecture({**LLAMA_31_8B, "attention_bias": True})
    assert biased.total_params - arch.total_params == 32 * (4096 + 2 * 1024 + 4096)


def test_mixtral_active_and_total(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MIXTRAL_8X7B))
    mb = resolve_model_bytes(config=str(path))
    assert mb.params == pytest.approx(12.9e9 - 32000 * 4096, rel=0.01)
    assert mb.total_params == pytest.approx(46.7e9, rel=0.01)
    assert mb.weight_bytes == pytest.approx(2 * mb.params)
    assert mb.experts == 8 and mb.experts_per_token == 2
    # all 8 experts: 6 unread experts per layer
    assert mb.routed_weight_bytes / 8 * 6 == pytest.approx(2 * 32 * 6 * 3 * 4096 * 14336)
    assert mb.weight_bytes_at_batch(1000) == pytest.approx(mb.weight_bytes + mb.routed_weight_bytes * 6 / 8,
                                                           rel=1e-6)


def test_qwen2_style_moe_with_shared_expert():
    cfg = {"model_type": "qwen2_moe", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256, "num_experts": 4,
           "num_experts_per_tok": 1, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 128,
           "tie_word_embeddings": True}
    arch = architecture(cfg)
    expert = 3 * 64 * 32
    assert arch.total_params - arch.active_params == 2 * 3 * expert  # 3 unused experts per layer
    assert sum(g.params for g in arch.groups if g.role == "routed_experts") == 2 * 4 * expert


def test_hf_config_errors_name_the_missing_key():
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        architecture({k: v for k, v in LLAMA_31_8B.items() if k != "num_hidden_layers"})
    with pytest.raises(ConfigError, match="torch_dtype"):
        model_bytes_from_hf_config({k: v for k, v in LLAMA_31_8B.items() if k != "torch_dtype"})
    with pytest.raises(ConfigError, match=r"model_type 'falcon' is not modelled .*not counted as Llama.*safetensors"):
        architecture({**LLAMA_31_8B, "model_type": "falcon"})


def test_explicit_params_and_kv_shape():
    mb = model_bytes_from_params(8e9, dtype="fp16", layers=32, kv_heads=8, head_dim=128, kv_dtype="fp8")
    assert mb.weight_bytes == 16e9 and mb.kv_bytes_per_token == 65_536
    assert model_bytes_from_params(8e9, bits=4).weight_bytes == 4e9
    assert model_bytes_from_params(8e9, dtype="int4").kv_bytes_per_token is None
    with pytest.raises(ConfigError, match="missing head_dim"):
        model_bytes_from_params(8e9, dtype="fp16", layers=32, kv_heads=8)


def test_llamacpp_models_meta():
    payload = {"object": "list", "data": [{"id": "llama-3.1-8b-q4_k_m.gguf", "object": "model", "owned_by": "llamacpp",
                                           "meta": {"vocab_type": 2, "n_vocab": 128256, "n_ctx_train": 131072,
                                                    "n_embd": 4096, "n_params": 8030261248, "size": 4920733696}}]}
    mb = model_bytes_from_llamacpp_models(payload, kv_bytes_per_token=131072)
    assert mb.weight_bytes == 4920733696 and mb.params == 8030261248
    assert mb.bytes_per_param * 8 == pytest.approx(4.90, abs=0.01)
    assert mb.name == "llama-3.1-8b-q4_k_m.gguf" and mb.kv_bytes_per_token == 131072
    with pytest.raises(ConfigError, match="n_params"):
        model_bytes_from_llamacpp_models({"data": [{"id": "m", "meta": None}]})
    with pytest.raises(ConfigError, match="no model 'x'"):
        model_bytes_from_llamacpp_models(payload, model_id="x")
    with pytest.raises(ConfigError, match="llama.cpp"):
        model_bytes_from_llamacpp_models({"data": []})


def test_resolve_model_bytes_sources_and_errors(tmp_path):
    assert resolve_model_bytes(model="llama-3.1-8b").weight_bytes == pytest.approx(16.06e9)
    q4 = resolve_model_bytes(model="meta-llama/Llama-3.1-8B-Instruct", dtype="Q4_K_M", kv_dtype="fp8")
    assert q4.weight_bytes == pytest.approx(8.03e9 * 4.84 / 8) and q4.kv_bytes_per_token == 65_536
    kv = resolve_model_bytes(params=8e9, dtype="fp16", layers=32, kv_heads=8, head_dim=128)
    assert kv.kv_bytes_per_token == 131_072
    with pytest.raises(ConfigError, match="exactly one.*given: --model, --params"):
        resolve_model_bytes(model="llama-3.1-8b", params=8e9, names={"params": "--params", "model": "--model"})
    with pytest.raises(ConfigError, match="roofline.dtype"):
        resolve_model_bytes(params=8e9, names={"dtype": "roofline.dtype"})
    with pytest.raises(ConfigError, match="no such file"):
        resolve_model_bytes(config=str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        resolve_model_bytes(config=str(tmp_path / "bad.json"))
    with pytest.raises(ConfigError, match="KV shape"):
        resolve_model_bytes(params=8e9, dtype="fp16", kv_dtype="fp8")


def test_catalog_model_with_a_dtype_override_says_so():
    mb = resolve_model_bytes(model="llama-3.1-8b", dtype="Q4_K_M")
    assert "Llama-3.1-8B" in mb.source and "Q4_K_M" in mb.source
    assert "4-bit" in resolve_model_bytes(model="llama-3.1-8b", bits=4).source


def test_quantized_hf_config_is_charged_its_stored_bits_not_torch_dtype():
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "float16",
           "tie_word_embeddings": False}
    fp16 = model_bytes_from_hf_config(cfg)
    awq = model_bytes_from_hf_config({**cfg, "quantization_config": {"quant_method": "awq", "bits": 4,
                                                                     "group_size": 128}})
    # the Linear layers at 4 bits + an fp16 scale and a 4-bit zero per 128; norms, the embedding row
    # and the output head stay fp16
    head, row, norms = 128256 * 4096, 4096, 32 * 2 * 4096 + 4096
    linear = fp16.params - head - row - norms
    assert awq.weight_bytes == pytest.approx(linear * (0.5 + 2.5 / 128) + 2 * (head + row + norms))
    with pytest.raises(ConfigError, match="hqq.*not modelled.*safetensors"):
        model_bytes_from_hf_config({**cfg, "quantization_config": {"quant_method": "hqq"}})
