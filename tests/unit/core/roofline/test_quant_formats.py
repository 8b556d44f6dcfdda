"""core.roofline.archs.quant: bytes per parameter of each quantization method with its scales, which modules
a config leaves unconverted (globs, ``re:``, prefixes), the user's override, refusals."""
import pytest

from pytest_llm_latency.core.roofline.archs.inventory import TensorGroup
from pytest_llm_latency.core.roofline.archs.quant import _matches, weight_format
from pytest_llm_latency.core.errors import ConfigError

ATTN = TensorGroup("attention", 1e6, "attention", "model.layers.0.self_attn.q_proj")
MLP = TensorGroup("mlp", 1e6, "mlp", "model.layers.0.mlp.gate_proj")
EXPERTS = TensorGroup("experts", 1e6, "routed_experts", "model.layers.0.mlp.experts.gate_up_proj")
EXPERT_BIAS = TensorGroup("expert biases", 1e3, "routed_experts", "model.layers.0.mlp.experts.gate_up_proj_bias",
                          linear=False)
ROUTER = TensorGroup("router", 1e4, "router", "model.layers.0.mlp.gate")
GPT_OSS_ROUTER = TensorGroup("router", 1e4, "router", "model.layers.0.mlp.router")
HEAD = TensorGroup("head", 1e6, "lm_head", "lm_head")
EMBED = TensorGroup("embedding", 1e6, "embedding", "model.embed_tokens", linear=False)
NORM = TensorGroup("norms", 1e3, "norm", "model.layers.0.input_layernorm", linear=False)
SCORE_BIAS = TensorGroup("bias", 256, "bias", "model.layers.3.mlp.gate.e_score_correction_bias", linear=False)


def bpp(quant: dict | None, group: TensorGroup, dtype: str = "bfloat16") -> float:
    cfg = {"torch_dtype": dtype} if dtype else {}
    if quant is not None:
        cfg["quantization_config"] = quant
    return weight_format(cfg).bytes_per_param(group)[0]


def test_fp8_blocks_carry_an_fp32_scale_each():
    q = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}
    assert bpp(q, ATTN) == bpp(q, EXPERTS) == 1 + 4 / (128 * 128)
    assert bpp({"quant_method": "fp8"}, MLP) == 1  # one scale a tensor: not counted
    # DeepSeek-V3's checkpoint: embeddings, head, norms and the router gate stay bf16, its bias fp32
    assert bpp(q, EMBED) == bpp(q, HEAD) == bpp(q, NORM) == bpp(q, ROUTER) == 2
    assert bpp(q, SCORE_BIAS) == 4
    # ignoring layer 0's q_proj keeps that one projection bf16, not the whole attention group
    ignored = {**q, "ignored_layers": ["model.layers.0.self_attn.q_proj"]}
    attn = TensorGroup("attention", 4 * 8e3, "attention", "model.layers.{i}.self_attn", layers=(0, 1, 2, 3),
                       members=(("q_proj", 4e3), ("k_proj", 1e3), ("v_proj", 1e3), ("o_proj", 2e3)))
    fp8_block = 1 + 4 / 16384
    assert bpp(ignored, attn) == pytest.approx((4e3 * 2 + (32e3 - 4e3) * fp8_block) / 32e3)
    assert bpp(ignored, MLP) == fp8_block


def test_mxfp4_converts_the_experts_only_their_biases_stay_bf16():
    q = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                            "model.embed_tokens", "lm_head"]}
    # gpt-oss's config.json has no torch_dtype: the unconverted tensors are bf16
    fmt = weight_format({"quantization_config": q})
    assert fmt.bytes_per_param(EXPERTS) == ((4 + 8 / 32) / 8, "MXFP4 (4-bit + e8m0 scale per 32)")
    assert fmt.bytes_per_param(EXPERTS)[0] * 8 == 4.25
    for group in (EXPERT_BIAS, ATTN, GPT_OSS_ROUTER, EMBED, HEAD, NORM):
        assert fmt.bytes_per_param(group)[0] == 2, group.name
    assert "no torch_dtype" in fmt.bytes_per_param(ATTN)[1]
    # a fused expert tensor is converted though no nn.Linear; a dense MLP is not (vLLM's MXFP4 is MoE-only)
    assert any(p[3] for p in fmt.parts(EXPERTS)) and not any(p[3] for p in fmt.parts(MLP))


def test_nvfp4_modelopt_and_compressed_tensors_4_5_bits():
    modelopt = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}
    assert bpp(modelopt, MLP) == bpp(modelopt, EXPERTS) == 0.5 + 1 / 16
    assert bpp(modelopt, MLP) * 8 == 4.5
    assert bpp(modelopt, ATTN) == 2 and bpp(modelopt, HEAD) == 2
    assert bpp({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}, MLP) == 1
    ct = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
              "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True}}}}
    assert bpp(ct, MLP) == 0.5 + 1 / 16 and bpp(ct, HEAD) == 2
    assert weight_format({"torch_dtype": "bfloat16", "quantization_config": ct}).bytes_per_param(MLP)[1] \
        == "NVFP4 + 1-byte scale per 16"
    with pytest.raises(ConfigError, match=r"quantization_config\.quant_algo: 'W4A8_AWQ'.*NVFP4.*safetensors"):
        bpp({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, MLP)


def ct_config(weights: dict, targets=("Linear",), fmt: str = "pack-quantized", **extra) -> dict:
    return {"quant_method": "compressed-tensors", "format": fmt, **extra,
            "config_groups": {"group_0": {"targets": list(targets), "weights": weights}}}


@pytest.mark.parametrize("weights, fmt, expected", [
    ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True},
     "pack-quantized", 0.5 + 2 / 128),                       # bf16 scale a group
    ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": False},
     "pack-quantized", 0.5 + (2 + 0.5) / 128),               # + a packed 4-bit zero point
    ({"num_bits": 8, "type": "int", "strategy": "group", "group_size": 64, "symmetric": False},
     "int-quantized", 1 + (2 + 1) / 64),                     # int8 zero point unpacked
    ({"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}, "float-quantized", 1),
    ({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]},
     "float-quantized", 1 + 2 / (128 * 128)),
    ({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128],
      "scale_dtype": "torch.float32"}, "float-quantized", 1 + 4 / (128 * 128)),
    ({"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32}, "mxfp4-pack-quantized",
     0.5 + 1 / 32),                                          # MXFP4: a uint8 e8m0 scale per 32
])
def test_compressed_tensors_weights(weights, fmt, expected):
    assert bpp(ct_config(weights, fmt=fmt), MLP) == pytest.approx(expected)


def test_compressed_tensors_groups_targets_and_ignore():
    int4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
    fp8 = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
    q = {"quant_method": "compressed-tensors", "format": "mixed-precision",
         "ignore": ["lm_head", "re:.*mlp.gate$", "re:.*self_attn.o_proj"],
         "config_groups": {"attn_and_mlp": {"targets": ["Linear"], "weights": fp8, "format": "float-quantized"},
                           "experts": {"targets": ["re:.*mlp.experts.*"], "weights": int4,
                                       "format": "pack-quantized"},
                           "activations_only": {"targets": ["Linear"], "weights": None}}}
    assert bpp(q, EXPERTS) == 0.5 + 2 / 128  # the named target beats the class target
    assert bpp(q, ATTN) == bpp(q, MLP) == 1
    o_proj = TensorGroup("o", 1e6, "attention", "model.layers.0.self_attn.o_proj")
    assert bpp(q, o_proj) == bpp(q, ROUTER) == bpp(q, HEAD) == bpp(q, EMBED) == 2
    # a target that names the head converts it
    named = ct_config({"num_bits": 8, "type": "float", "strategy": "tensor"}, targets=("Linear", "lm_head"))
    assert bpp(named, HEAD) == 1


def test_awq_gptq_groups_with_scales_and_zeros():
    assert bpp({"quant_method": "awq", "bits": 4, "group_size": 128}, MLP) == 0.5 + (2 + 0.5) / 128
    assert bpp({"quant_method": "gptq", "bits": 8, "group_size": -1}, MLP) == 1
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 32, "lm_head": True}
    assert bpp(gptq, HEAD) == 0.5 + 2.5 / 32 and bpp({**gptq, "lm_head": False}, HEAD) == 2
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["self_attn"]}
    assert bpp(awq, ATTN) == 2 and bpp(awq, MLP) == 0.5 + 2.5 / 128


def test_bitsandbytes_4bit_absmax_and_double_quant():
    nf4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    assert bpp(nf4, MLP) == 0.5 + 4 / 64  # an fp32 absmax per 64
    dq = {**nf4, "bnb_4bit_use_double_quant": True}
    assert bpp(dq, MLP) == 0.5 + 1 / 64 + 4 / (64 * 256)  # 8-bit absmax, an fp32 scale per 256 of them
    assert bpp({"quant_method": "bitsandbytes", "load_in_8bit": True}, MLP) == 1
    assert bpp({**nf4, "llm_int8_skip_modules": ["mlp"]}, MLP) == 2 and bpp(nf4, HEAD) == 2


@pytest.mark.parametrize("module, pattern, hit", [
    ("model.layers.7.self_attn.q_proj", "model.layers.*.self_attn", True),      # glob, then children
    ("model.layers.7.mlp.router", "model.layers.*.mlp.router", True),
    ("model.layers.7.mlp.experts.gate_up_proj", "model.layers.*.mlp.router", False),
    ("model.embed_tokens", "model.embed_tokens", True),                        # exact / prefix
    ("model.layers.3.mlp.gate", "re:.*mlp.gate$", True),                       # regex from the start
    ("model.layers.3.mlp.gate_proj", "re:.*mlp.gate$", False),
    ("model.layers.3.mlp.gate_proj", "gate", False),                           # name components, not substrings
    ("model.layers.3.mlp.gate", "gate", True),
    ("lm_head", "lm_head", True),
    ("model.layers.3.mlp.shared_expert_gate", "*shared_expert_gate", True),
    ("model.layers.3.self_attn.q_proj", "re:self_attn", False),                # re.match anchors at the start
])
def test_ignore_patterns(module, pattern, hit):
    assert _matches(module, pattern) is hit


def test_user_dtype_or_bits_overrides_every_tensor_and_says_what_it_overrode():
    cfg = {"quantization_config": {"quant_method": "mxfp4"}}
    fmt = weight_format(cfg, dtype="bf16")
    assert fmt.override == "dtype bf16 for every tensor (it overrides the config's quantization_config mxfp4)"
    assert all(fmt.bytes_per_param(g)[0] == 2 for g in (EXPERTS, ATTN, SCORE_BIAS))
    named = weight_format({"torch_dtype": "bfloat16"}, bits=4, names=("--dtype", "--bits"))
    assert named.override == "--bits 4 for every tensor (it overrides the config's torch_dtype bfloat16)"
    assert named.bytes_per_param(MLP) == (0.5, "4-bit")
    nv = weight_format({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}, dtype="fp8")
    assert "quantization_config modelopt NVFP4" in nv.override and nv.bytes_per_param(MLP)[0] == 1


@pytest.mark.parametrize("quant, message", [
    ({"quant_method": "hqq"},
     r"quantization_config\.quant_method 'hqq' is not modelled \(known: .*mxfp4.*\).*safetensors.*GGUF.*dtype / bits"),
    ({}, r"quant_method '\(missing\)' is not modelled"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, r"quantization_config\.weight_block_size: expected \[rows"),
    ({"quant_method": "bitsandbytes"}, "neither load_in_4bit nor load_in_8bit"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "int4"}, "bnb_4bit_quant_type"),
    (ct_config({"num_bits": 4, "type": "int", "strategy": "group"}), r"config_groups\.group_0\.weights\.group_size"),
    (ct_config({"num_bits": 4, "type": "int", "strategy": "attn_head"}), r"weights\.strategy"),
    (ct_config({"num_bits": 4, "type": "mx"}), r"weights\.type: expected int or float"),
    (ct_config({"num_bits": 4, "type": "int"}, fmt="marlin-24"), r"quantization_config\.format: 'marlin-24'"),
    (ct_config({"num_bits": 4, "type": "int"}, sparsity_config={"format": "sparse-24-bitmask"}),
     "sparsity_config: sparse format 'sparse-24-bitmask' is not modelled"),
    ({"quant_method": "compressed-tensors"}, r"config_groups: expected a mapping"),
    ({"quant_method": "awq", "bits": 4, "group_size": 0}, r"group_size: expected a positive group size"),
])
def test_refusals_name_the_file_the_key_and_the_ways_out(quant, message):
    with pytest.raises(ConfigError, match=message) as err:
        weight_format({"torch_dtype": "bfloat16", "quantization_config": quant}, where="models/x/config.json")
    assert str(err.value).startswith("models/x/config.json")
    assert "safetensors" in str(err.value)


def test_no_torch_dtype_is_refused_unless_the_method_fixes_the_rest():
    with pytest.raises(ConfigError, match="no torch_dtype"):
        weight_format({"quantization_config": {"quant_method": "fp8"}})
    with pytest.raises(ConfigError, match="no torch_dtype"):
        weight_format({})
