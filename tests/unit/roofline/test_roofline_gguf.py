"""GGUF tensor tables: small files written here with the gguf package, then read back.

Per decode step the reader charges every tensor except: routed experts (k of E), an untied input
embedding (one row of ``token_embd.weight`` when ``output.weight`` exists), MTP blocks (none).
"""
import numpy as np
import pytest

from pytest_llm_latency.core.errors import ConfigError

gguf = pytest.importorskip("gguf")
from pytest_llm_latency.roofline.gguf_reader import model_bytes_from_gguf, read_gguf  # noqa: E402

HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, FFN = 64, 2, 4, 2, 256, 128


def write_gguf(path, *, experts=0, used=0, quant=True, kv_meta=True, tied=False, mtp_layers=0, arch="llama"):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny-test")
    w.add_block_count(LAYERS + mtp_layers)
    if mtp_layers:
        w.add_uint32(f"{arch}.nextn_predict_layers", mtp_layers)
    w.add_embedding_length(HIDDEN)
    w.add_head_count(HEADS)
    if kv_meta:
        w.add_head_count_kv(KV_HEADS)
    if experts:
        w.add_expert_count(experts)
        w.add_expert_used_count(used)
    rng = np.random.default_rng(0)
    expected = {"bytes": 0, "params": 0, "expert_bytes": 0, "expert_params": 0, "embd_bytes": 0, "mtp_bytes": 0}

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
        if name.startswith(f"blk.{LAYERS}."):
            expected["mtp_bytes"] += nbytes
        elif "_exps" in name:
            expected["expert_bytes"] += nbytes
            expected["expert_params"] += n
        if name == "token_embd.weight":
            expected["embd_bytes"] += nbytes

    mat = "q8" if quant else "f16"
    add("token_embd.weight", (VOCAB, HIDDEN), mat)
    for i in range(LAYERS + mtp_layers):
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
    if not tied:
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
    assert s.architecture == "llama" and s.layers == LAYERS
    assert set(s.bytes_by_type) == {"Q8_0", "F32"}
    mb = model_bytes_from_gguf(path)
    # untied (the file has output.weight): token_embd is gathered, one row of VOCAB: Q8_0 = 34 B per 32
    row = HIDDEN // 32 * 34
    assert expected["embd_bytes"] == VOCAB * row
    assert mb.weight_bytes == expected["bytes"] - VOCAB * row + row
    assert mb.params == expected["params"] - VOCAB * HIDDEN + HIDDEN
    assert mb.kv_bytes_per_token == 2 * LAYERS * KV_HEADS * (HIDDEN // HEADS) * 2  # f16 KV cache
    assert mb.kv_layout.uniform_full and mb.kv_bytes_at(1000) == 1000 * mb.kv_bytes_per_token
    assert model_bytes_from_gguf(path, kv_dtype="fp8").kv_bytes_per_token == mb.kv_bytes_per_token / 2
    # mostly Q8_0: a little above 8.5 bits per weight because of the f32 norms
    assert 8.5 < mb.bytes_per_param * 8 < 9.0
    assert mb.name == "tiny-test" and "Q8_0" in mb.source
    assert "input embedding one row of 256" in mb.source and mb.embedding


def test_tied_embedding_is_the_output_head_and_read_whole(tmp_path):
    path = tmp_path / "tied.gguf"
    expected = write_gguf(path, tied=True)
    mb = model_bytes_from_gguf(path)
    assert mb.weight_bytes == expected["bytes"] and mb.params == expected["params"]
    assert "tied to the output head" in mb.source


def test_f16_file_is_two_bytes_per_param(tmp_path):
    path = tmp_path / "f16.gguf"
    expected = write_gguf(path, quant=False)
    mb = model_bytes_from_gguf(path)
    assert mb.weight_bytes == expected["bytes"] - (VOCAB - 1) * HIDDEN * 2  # one f16 row of token_embd
    assert 2.0 < mb.bytes_per_param < 2.01


def test_moe_file_charges_only_the_used_experts(tmp_path):
    path = tmp_path / "moe.gguf"
    expected = write_gguf(path, experts=4, used=1)
    mb = model_bytes_from_gguf(path)
    assert mb.experts == 4 and mb.experts_per_token == 1
    assert mb.total_params == expected["params"]
    embd_not_read = (VOCAB - 1) * HIDDEN // 32 * 34
    assert mb.weight_bytes == pytest.approx(expected["bytes"] - expected["expert_bytes"] * 3 / 4 - embd_not_read)
    assert mb.params == pytest.approx(expected["params"] - expected["expert_params"] * 3 / 4 - (VOCAB - 1) * HIDDEN)
    assert mb.weight_bytes_at_batch(1) == pytest.approx(mb.weight_bytes)
    assert "routed experts 1 of 4" in mb.source


def test_mtp_blocks_are_not_read_by_a_decode_step(tmp_path):
    # one MTP block after the LAYERS trunk blocks (glm4moe / deepseek2 files carry one)
    path = tmp_path / "mtp.gguf"
    expected = write_gguf(path, experts=4, used=2, mtp_layers=1, arch="qwen3moe")
    mb = model_bytes_from_gguf(path)
    assert expected["mtp_bytes"] > 0
    embd_not_read = (VOCAB - 1) * HIDDEN // 32 * 34
    trunk_experts = expected["expert_bytes"]  # the MTP block's experts are in mtp_bytes
    assert mb.weight_bytes == pytest.approx(expected["bytes"] - expected["mtp_bytes"] - trunk_experts / 2
                                            - embd_not_read)
    # nor is its KV: LAYERS layers of K and V, not LAYERS + 1
    assert mb.kv_bytes_per_token == 2 * LAYERS * KV_HEADS * (HIDDEN // HEADS) * 2
    assert "MTP blocks not read" in mb.source


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


def test_an_unmodelled_architecture_is_refused_unless_the_kv_shape_is_given(tmp_path):
    from pytest_llm_latency.roofline.resolve import resolve_model_bytes

    path = tmp_path / "odd.gguf"
    write_gguf(path, arch="someformer")
    with pytest.raises(ConfigError, match=r"odd\.gguf.*'someformer'.*not counted as full attention.*"
                                          r"layers, kv_heads and head_dim"):
        model_bytes_from_gguf(path)
    mb = resolve_model_bytes(gguf=str(path), layers=2, kv_heads=2, head_dim=16)
    assert mb.kv_bytes_per_token == 2 * 2 * 2 * 16 * 2  # K and V, 2 layers, 2 heads of 16, f16
