"""GGUF tensor tables: small files written here with the gguf package, then read back."""
import numpy as np
import pytest

from pytest_llm_latency.core.errors import ConfigError

gguf = pytest.importorskip("gguf")
from pytest_llm_latency.roofline.gguf_reader import model_bytes_from_gguf, read_gguf  # noqa: E402

HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, FFN = 64, 2, 4, 2, 256, 128


def write_gguf(path, *, experts=0, used=0, quant=True, kv_meta=True):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-test")
    w.add_block_count(LAYERS)
    w.add_embedding_length(HIDDEN)
    w.add_head_count(HEADS)
    if kv_meta:
        w.add_head_count_kv(KV_HEADS)
    if experts:
        w.add_expert_count(experts)
        w.add_expert_used_count(used)
    rng = np.random.default_rng(0)
    expected = {"bytes": 0, "params": 0, "expert_bytes": 0, "expert_params": 0}

    def add(name, shape, kind):
        data = rng.standard_normal(shape).astype(np.float32)
        n = data.size
        if kind == "f32":
            w.add_tensor(name, data)
            nbytes = 4 * n
        elif kind == "f16":
            w.add_tensor(name, data.astype(np.float16))
            nbytes = 2 * n
        else:  # Q8_0: 34 bytes per 32 weights
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            nbytes = n // 32 * 34
        expected["bytes"] += nbytes
        expected["params"] += n
        if "_exps" in name:
            expected["expert_bytes"] += nbytes
            expected["expert_params"] += n

    mat = "q8" if quant else "f16"
    add("token_embd.weight", (VOCAB, HIDDEN), mat)
    for i in range(LAYERS):
        add(f"blk.{i}.attn_norm.weight", (HIDDEN,), "f32")
        add(f"blk.{i}.attn_q.weight", (HIDDEN, HIDDEN), mat)
        add(f"blk.{i}.attn_k.weight", (HIDDEN // 2, HIDDEN), mat)
        add(f"blk.{i}.attn_v.weight", (HIDDEN // 2, HIDDEN), mat)
        add(f"blk.{i}.attn_output.weight", (HIDDEN, HIDDEN), mat)
        if experts:
            for part in ("gate", "up", "down"):
                add(f"blk.{i}.ffn_{part}_exps.weight", (experts, FFN, HIDDEN), mat)
        else:
            for part in ("gate", "up", "down"):
                add(f"blk.{i}.ffn_{part}.weight", (FFN, HIDDEN), mat)
    add("output_norm.weight", (HIDDEN,), "f32")
    add("output.weight", (VOCAB, HIDDEN), mat)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected


def test_dense_file_bytes_params_and_kv(tmp_path):
    path = tmp_path / "tiny.gguf"
    expected = write_gguf(path)
    s = read_gguf(path)
    assert s.tensor_bytes == expected["bytes"] and s.params == expected["params"]
    assert s.architecture == "llama" and s.layers == LAYERS and s.head_dim == HIDDEN // HEADS
    assert set(s.bytes_by_type) == {"Q8_0", "F32"}
    mb = model_bytes_from_gguf(path)
    assert mb.weight_bytes == expected["bytes"] and mb.params == expected["params"]
    assert mb.kv_bytes_per_token == 2 * LAYERS * KV_HEADS * (HIDDEN // HEADS) * 2  # f16 KV cache
    assert model_bytes_from_gguf(path, kv_dtype="fp8").kv_bytes_per_token == mb.kv_bytes_per_token / 2
    # mostly Q8_0: a little above 8.5 bits per weight because of the f32 norms
    assert 8.5 < mb.bytes_per_param * 8 < 9.0
    assert mb.name == "tiny-test" and "Q8_0" in mb.source


def test_f16_file_is_two_bytes_per_param(tmp_path):
    path = tmp_path / "f16.gguf"
    expected = write_gguf(path, quant=False)
    mb = model_bytes_from_gguf(path)
    assert mb.weight_bytes == expected["bytes"]
    assert 2.0 < mb.bytes_per_param < 2.01


def test_moe_file_charges_only_the_used_experts(tmp_path):
    path = tmp_path / "moe.gguf"
    expected = write_gguf(path, experts=4, used=1)
    mb = model_bytes_from_gguf(path)
    assert mb.experts == 4 and mb.experts_per_token == 1
    assert mb.total_params == expected["params"]
    assert mb.weight_bytes == pytest.approx(expected["bytes"] - expected["expert_bytes"] * 3 / 4)
    assert mb.params == pytest.approx(expected["params"] - expected["expert_params"] * 3 / 4)
    assert mb.weight_bytes_at_batch(1) == pytest.approx(mb.weight_bytes)


def test_without_head_count_kv_every_head_has_kv(tmp_path):
    path = tmp_path / "mha.gguf"
    write_gguf(path, kv_meta=False)
    assert model_bytes_from_gguf(path).kv_bytes_per_token == 2 * LAYERS * HEADS * (HIDDEN // HEADS) * 2


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        read_gguf(tmp_path / "missing.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(ConfigError, match="not a readable GGUF"):
        read_gguf(junk)
    # expert tensors without the counts are refused rather than guessed
    bad = tmp_path / "badmoe.gguf"
    w = gguf.GGUFWriter(str(bad), "llama")
    w.add_tensor("blk.0.ffn_up_exps.weight", np.zeros((2, 4, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ConfigError, match="expert_count"):
        read_gguf(bad)
