"""Not-converted patterns and targets matched over every layer and sub-module a tensor group covers
(core.roofline.archs.quant + TensorGroup.units): a per-layer or per-projection pattern charges exactly its share."""
import copy
import json

import pytest

from pytest_llm_latency.core.roofline.archs import model_bytes_from_hf_config
from pytest_llm_latency.core.roofline.archs.inventory import TensorGroup
from pytest_llm_latency.core.roofline.archs.quant import weight_format
from pytest_llm_latency.core.errors import ConfigError
from tests.helpers.paths import CONFIGS

LLAMA = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
SCOUT = json.loads((CONFIGS / "llama-4-scout-17b-16e-instruct.json").read_text())

# Llama 3.1 8B: hidden 4096, 32 layers, 32 heads / 8 KV heads of 128, intermediate 14336, vocab 128256, untied
H, L, INTER, V = 4096, 32, 14336, 128256
Q_, KV_ = 32 * 128, 8 * 128
QP, KP, VP, OP = H * Q_, H * KV_, H * KV_, Q_ * H      # per layer
ATTN = QP + KP + VP + OP                               # 41 943 040 a layer
MLP = 3 * H * INTER                                      # 176 160 768 a layer (gate, up, down)
HEAD = V * H
REST = (L * 2 * H + H) + H                             # norms + one embedding row, bf16 always
NF4 = 0.5 + 4 / 64                                     # an fp32 absmax per 64


def nf4(skip=None) -> float:
    q = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    if skip is not None:
        q["llm_int8_skip_modules"] = skip
    return model_bytes_from_hf_config({**LLAMA, "quantization_config": q}).weight_bytes


def test_bnb_default_keeps_the_head_bf16():
    assert nf4() == pytest.approx(L * (ATTN + MLP) * NF4 + HEAD * 2 + REST * 2)


@pytest.mark.parametrize("layer", [0, 1])
def test_bnb_one_layers_mlp_skipped_charges_that_layer_only(layer):
    expected = L * ATTN * NF4 + MLP * 2 + (L - 1) * MLP * NF4 + HEAD * 2 + REST * 2
    assert nf4(["lm_head", f"model.layers.{layer}.mlp"]) == pytest.approx(expected)
    assert expected < 5.3e9  # not 13 GB (every layer's MLP at bf16)


def test_bnb_o_proj_of_layer_0_alone_and_the_head_converted_when_the_list_omits_it():
    # transformers: a given llm_int8_skip_modules replaces the default skip list (the head)
    expected = (L * ATTN - OP) * NF4 + OP * 2 + L * MLP * NF4 + HEAD * NF4 + REST * 2
    assert nf4(["model.layers.0.self_attn.o_proj"]) == pytest.approx(expected)


def fp8(cfg: dict, ignore: list[str]) -> float:
    q = {"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": ignore}
    return model_bytes_from_hf_config({**cfg, "quantization_config": q}).weight_bytes


def test_a_glob_over_all_layers_and_a_regex():
    base = L * (ATTN + MLP) * 1 + HEAD * 2 + REST * 2   # fp8 per tensor; the head unconverted (vLLM)
    assert fp8(LLAMA, ["lm_head"]) == pytest.approx(base)
    down = H * INTER
    assert fp8(LLAMA, ["model.layers.*.mlp.down_proj"]) == pytest.approx(base + L * down * (2 - 1))
    assert fp8(LLAMA, [r"re:model\.layers\.(0|1)\.self_attn\.[qk]_proj"]) == pytest.approx(base + 2 * (QP + KP))


def test_ignoring_one_q_proj_is_its_share_not_the_group():
    fmt = weight_format({"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "fp8", "ignored_layers": ["model.layers.0.self_attn.q_proj"]}})
    g = TensorGroup("attention", 2 * 40.0, "attention", "model.layers.{i}.self_attn", layers=(0, 1),
                    members=(("q_proj", 10.0), ("k_proj", 10.0), ("v_proj", 10.0), ("o_proj", 10.0)))
    # 10 of 80 parameters at 2 bytes, 70 at 1
    assert fmt.bytes_per_param(g)[0] == pytest.approx((10 * 2 + 70 * 1) / 80)


def moe_cfg() -> dict:
    # qwen3_moe: 4 layers, layer 0 dense (mlp_only_layers), 1..3 MoE with 8 experts, 2 active
    return {"model_type": "qwen3_moe", "torch_dtype": "bfloat16", "hidden_size": 64, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100,
            "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
            "mlp_only_layers": [0], "tie_word_embeddings": False}


def test_a_layer_index_pattern_on_an_moe_model():
    cfg, none = moe_cfg(), fp8(moe_cfg(), ["lm_head"])
    dense_mlp = 3 * 64 * 128                  # layer 0 only
    experts_read_one_layer = 2 * 3 * 64 * 32  # 2 of 8 experts read, one layer
    # layer 0 is dense: its pattern reaches the dense MLP, not the experts
    assert fp8(cfg, ["lm_head", "model.layers.0.mlp"]) == pytest.approx(none + dense_mlp)
    # layer 1 is MoE: a third of the (read) experts at bf16; its router was bf16 already
    assert fp8(cfg, ["lm_head", "model.layers.1.mlp"]) == pytest.approx(none + experts_read_one_layer)
    assert fp8(cfg, ["lm_head", "model.layers.1.mlp.experts.3"]) == pytest.approx(none + experts_read_one_layer / 8)


@pytest.mark.parametrize("prefix", ["model.language_model.layers", "language_model.model.layers"])
def test_nested_names_in_both_spellings(prefix):
    attn = 48 * (5120 * 5120 * 2 + 2 * 5120 * 1024)   # Scout: 48 layers, q/o 40×128, k/v 8×128
    plain = fp8(SCOUT, ["lm_head", "language_model.lm_head"])
    assert fp8(SCOUT, ["lm_head", f"{prefix}.*.self_attn"]) == pytest.approx(plain + attn * (2 - 1))


def test_llama4_interleaved_groups_use_their_own_layers():
    maverick = copy.deepcopy(SCOUT)
    maverick["text_config"]["interleave_moe_layer_step"] = 2   # layers 1, 3, ... MoE; 0, 2, ... dense
    base = fp8(maverick, ["lm_head"])
    shared_one_layer = 3 * 5120 * 8192                         # the shared expert of intermediate_size
    dense_one_layer = 3 * 5120 * 16384                         # intermediate_size_mlp
    assert fp8(maverick, ["lm_head", "model.language_model.layers.1.feed_forward.shared_expert"]) \
        == pytest.approx(base + shared_one_layer)
    assert fp8(maverick, ["lm_head", "model.language_model.layers.0.feed_forward"]) \
        == pytest.approx(base + dense_one_layer)


def test_bnb_converts_linear_routers_not_parameter_routers():
    bnb = weight_format({"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_8bit": True}})
    fp8f = weight_format({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"}})
    linear = TensorGroup("router", 10.0, "router", "model.layers.0.mlp.gate")
    param = TensorGroup("router", 10.0, "router", "model.layers.0.mlp.gate", nn_linear=False)
    fused = TensorGroup("experts", 10.0, "routed_experts", "model.layers.0.mlp.experts.gate_up_proj", nn_linear=False)
    assert bnb.bytes_per_param(linear)[0] == 1 and fp8f.bytes_per_param(linear)[0] == 2
    assert bnb.bytes_per_param(param)[0] == 2 and bnb.bytes_per_param(fused)[0] == 2
    assert fp8f.bytes_per_param(fused)[0] == 1


def test_a_partial_match_of_unknown_shares_is_refused():
    fmt = weight_format({"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "llm_int8_skip_modules": ["model.layers.0.self_attn"]}},
        where="models/x/config.json")
    g = TensorGroup("attention", 100.0, "attention", "model.layers.{i}.self_attn", layers=(0, 1),
                    members=(("q_proj", None), ("o_proj", None)))
    with pytest.raises(ConfigError, match=r"^models/x/config\.json: quantization_config\.llm_int8_skip_modules "
                                          r"pattern 'model\.layers\.0\.self_attn' matches only some.*safetensors"
                                          r".*dtype / bits"):
        fmt.bytes_per_param(g)


def test_marlin_24_is_refused():
    q = {"quant_method": "compressed-tensors", "format": "marlin-24", "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}}
    with pytest.raises(ConfigError, match=r"quantization_config\.format: 'marlin-24' stores the weights 2:4 sparse"
                                          r".*safetensors"):
        weight_format({"torch_dtype": "float16", "quantization_config": q})


def test_awq_skips_a_module_whose_path_contains_an_entry_as_vllm_and_sglang_do():
    # vLLM / SGLang is_layer_skipped_awq: `any(name in prefix for name in modules_to_not_convert)`, a
    # substring test: "gate" keeps every gate_proj unconverted too, "layers.1." one layer
    def awq(skip):
        q = {"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": skip}
        return model_bytes_from_hf_config({**LLAMA, "quantization_config": q}).weight_bytes

    int4 = 0.5 + 2.5 / 128
    gate = H * INTER
    assert awq([]) == pytest.approx(L * (ATTN + MLP) * int4 + HEAD * 2 + REST * 2)
    assert awq(["gate"]) == pytest.approx(L * (ATTN + MLP - gate) * int4 + L * gate * 2 + HEAD * 2 + REST * 2)
    assert awq(["layers.1."]) == pytest.approx((L - 1) * (ATTN + MLP) * int4 + (ATTN + MLP) * 2
                                               + HEAD * 2 + REST * 2)
