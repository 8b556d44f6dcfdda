"""roofline.safetensors_reader: headers only, bounded, every error naming its file; which files a
directory's checkpoint is; core.roofline.checkpoint_tensors: what each tensor name is."""
import json
import os
import struct

import numpy as np
import pytest

from pytest_llm_latency.core.roofline.checkpoint_tensors import role, tensor_nbytes
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.roofline import safetensors_reader as reader
from tests.helpers.safetensors_files import file_tensor_bytes, raw_file, write, write_numpy

pytest.importorskip("safetensors", reason="the test extra installs safetensors (an independent writer)")


# ------------------------------------------------------------------ one file's header

def test_header_dtypes_shapes_and_bytes_match_the_library(tmp_path):
    f = write(tmp_path / "model.safetensors", {
        "a.weight": ("BF16", (3, 5)), "b.weight": ("F8_E4M3", (7, 11)), "c.blocks": ("U8", (2, 4, 16)),
        "d.scale_inv": ("F32", (2, 3)), "e.qweight": ("I32", (4, 2))})
    tensors = {t.name: t for t in reader.read_header(f)}
    assert {n: (t.dtype, t.shape) for n, t in tensors.items()} == {
        "a.weight": ("BF16", (3, 5)), "b.weight": ("F8_E4M3", (7, 11)), "c.blocks": ("U8", (2, 4, 16)),
        "d.scale_inv": ("F32", (2, 3)), "e.qweight": ("I32", (4, 2))}
    assert tensors["a.weight"].nbytes == 3 * 5 * 2
    assert tensors["b.weight"].nbytes == 7 * 11 * 1
    assert tensors["c.blocks"].nbytes == 2 * 4 * 16
    assert tensors["d.scale_inv"].nbytes == 2 * 3 * 4
    assert tensors["e.qweight"].nbytes == 4 * 2 * 4
    assert sum(t.nbytes for t in tensors.values()) == file_tensor_bytes(f)


@pytest.mark.parametrize("dtype, size", [("F64", 8), ("F32", 4), ("F16", 2), ("BF16", 2), ("F8_E4M3", 1),
                                         ("F8_E5M2", 1), ("F8_E8M0", 1), ("I64", 8), ("I32", 4), ("I16", 2),
                                         ("I8", 1), ("U8", 1), ("BOOL", 1)])
def test_dtype_sizes(dtype, size):
    assert tensor_nbytes(dtype, (3, 4), where="f") == 12 * size


def test_metadata_entry_is_not_a_tensor(tmp_path):
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "w": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    f = raw_file(tmp_path / "m.safetensors", header, data=bytes(8))
    assert [(t.name, t.nbytes) for t in reader.read_header(f)] == [("w", 8)]


class CountingFile:
    """A file object that counts the bytes ``read`` returns."""

    def __init__(self, f, counter):
        self.f, self.counter = f, counter

    def read(self, n=-1):
        data = self.f.read(n)
        self.counter.append(len(data))
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_only_the_header_is_read_never_the_weights(tmp_path, monkeypatch):
    """A 64 MiB tensor in a sparse file (its data never written): the reader reads 8 + n bytes."""
    size = 64 * 2 ** 20
    header = json.dumps({"big.weight": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
    f = raw_file(tmp_path / "model.safetensors", header)
    os.truncate(f, 8 + len(header) + size)  # a hole, not data
    reads: list[int] = []
    monkeypatch.setattr(reader, "open", lambda p, mode: CountingFile(open(p, mode), reads), raising=False)
    (t,) = reader.read_header(f)
    assert t.nbytes == size
    assert sum(reads) == 8 + len(header)


# ------------------------------------------------------------------ errors name the file

@pytest.mark.parametrize("case, expected", [
    ("short", "truncated safetensors file"),
    ("bad_json", "not valid JSON"),
    ("past_end", "runs past the file's end"),
    ("over_limit", "over the 100,000,000-byte limit"),
    ("not_object", "not a JSON object"),
])
def test_bad_headers_are_refused_naming_the_file(tmp_path, case, expected):
    f = tmp_path / f"{case}.safetensors"
    if case == "short":
        f.write_bytes(b"\x10\x00\x00\x00")
    elif case == "bad_json":
        raw_file(f, b"{not json at all}")
    elif case == "past_end":
        raw_file(f, b'{"w": {}}', length=1000)
    elif case == "over_limit":
        raw_file(f, b"{}", length=2 ** 40)
    else:
        raw_file(f, b"[1, 2, 3]")
    with pytest.raises(ConfigError, match=expected) as e:
        reader.read_header(f)
    assert str(f) in str(e.value)


def test_a_git_lfs_pointer_is_refused_with_the_way_out(tmp_path):
    f = tmp_path / "model.safetensors"
    f.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n")
    with pytest.raises(ConfigError, match="git lfs pull") as e:
        reader.read_header(f)
    assert str(f) in str(e.value)


def test_unknown_dtype_names_file_and_tensor(tmp_path):
    header = json.dumps({"layer.weight": {"dtype": "Q4_K", "shape": [4], "data_offsets": [0, 4]}}).encode()
    f = raw_file(tmp_path / "model.safetensors", header, data=bytes(4))
    with pytest.raises(ConfigError, match=r"unknown safetensors dtype 'Q4_K'") as e:
        reader.read_header(f)
    assert f"{f}: tensor 'layer.weight'" in str(e.value)


@pytest.mark.parametrize("entry, expected", [
    ({"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 6]}, "span 6 bytes but F16 \\[2, 2\\] is 8"),
    ({"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}, "the file is truncated"),
    ({"dtype": "F16", "shape": [2, -1], "data_offsets": [0, 8]}, "shape must be"),
    ({"dtype": "F16", "shape": [2, 2]}, "data_offsets must be"),
])
def test_inconsistent_entries_are_refused(tmp_path, entry, expected):
    f = raw_file(tmp_path / "model.safetensors", json.dumps({"w": entry}).encode(), data=bytes(4))
    with pytest.raises(ConfigError, match=expected) as e:
        reader.read_header(f)
    assert f"{f}: tensor 'w'" in str(e.value)


# ------------------------------------------------------------------ which files

def _index(directory, weight_map):
    (directory / reader.INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def test_index_names_the_shards_read_and_a_stray_file_is_ignored(tmp_path):
    a = write_numpy(tmp_path / "model-00001-of-00002.safetensors", {"x": np.zeros((4, 4), np.float16)})
    b = write_numpy(tmp_path / "model-00002-of-00002.safetensors", {"y": np.zeros((3,), np.float32)})
    write_numpy(tmp_path / "consolidated.safetensors", {"x": np.zeros((4, 4), np.float16)})  # other format
    _index(tmp_path, {"x": a.name, "y": b.name})
    tensors, label = reader.read_checkpoint(tmp_path)
    assert sorted(t.name for t in tensors) == ["x", "y"]
    assert sum(t.nbytes for t in tensors) == 4 * 4 * 2 + 3 * 4
    assert label == "model.safetensors.index.json: 2 shards' headers"


def test_missing_shard_is_named(tmp_path):
    a = write_numpy(tmp_path / "model-00001-of-00002.safetensors", {"x": np.zeros((2,), np.float16)})
    _index(tmp_path, {"x": a.name, "y": "model-00002-of-00002.safetensors"})
    with pytest.raises(ConfigError, match="model-00002-of-00002.safetensors") as e:
        reader.read_checkpoint(tmp_path)
    assert reader.INDEX_NAME in str(e.value)


def test_index_naming_a_tensor_its_shard_lacks_is_refused(tmp_path):
    a = write_numpy(tmp_path / "model-00001-of-00001.safetensors", {"x": np.zeros((2,), np.float16)})
    _index(tmp_path, {"x": a.name, "z": a.name})
    with pytest.raises(ConfigError, match="puts 'z' in 'model-00001-of-00001.safetensors'"):
        reader.read_checkpoint(tmp_path)


def test_without_an_index_every_file_is_read_and_duplicates_refused(tmp_path):
    write_numpy(tmp_path / "part-a.safetensors", {"x": np.zeros((2,), np.float16)})
    write_numpy(tmp_path / "part-b.safetensors", {"y": np.zeros((5,), np.float16)})
    tensors, label = reader.read_checkpoint(tmp_path)
    assert sum(t.nbytes for t in tensors) == (2 + 5) * 2
    assert label == "2 safetensors files' headers"
    write_numpy(tmp_path / "part-c.safetensors", {"y": np.zeros((5,), np.float16)})
    with pytest.raises(ConfigError, match="'y' is also in"):
        reader.read_checkpoint(tmp_path)


def test_model_safetensors_alone_when_there_is_no_index(tmp_path):
    """What transformers loads: ``model.safetensors``; a ``consolidated.safetensors`` beside it (Mistral's
    original format) would double the bytes."""
    write_numpy(tmp_path / "model.safetensors", {"x": np.zeros((8,), np.float32)})
    write_numpy(tmp_path / "consolidated.safetensors", {"x": np.zeros((8,), np.float32)})
    tensors, label = reader.read_checkpoint(tmp_path)
    assert [(t.name, t.nbytes) for t in tensors] == [("x", 32)]
    assert label == "model.safetensors headers"


def test_safetensors_directory_detection(tmp_path):
    assert reader.safetensors_directory(tmp_path) is None
    (tmp_path / "config.json").write_text("{}")
    assert reader.safetensors_directory(tmp_path / "config.json") is None
    write_numpy(tmp_path / "model.safetensors", {"x": np.zeros((1,), np.float32)})
    assert reader.safetensors_directory(tmp_path) == tmp_path
    assert reader.safetensors_directory({"model_type": "llama"}) is None


# ------------------------------------------------------------------ what each tensor is

@pytest.mark.parametrize("name, expected", [
    ("model.layers.3.mlp.experts.17.gate_proj.weight", "routed_experts"),          # DeepSeek / Qwen
    ("model.layers.3.mlp.experts.17.down_proj.weight_scale_inv", "routed_experts"),
    ("model.layers.0.block_sparse_moe.experts.5.w1.weight", "routed_experts"),    # Mixtral
    ("model.layers.0.mlp.experts.gate_up_proj_blocks", "routed_experts"),         # gpt-oss MXFP4
    ("model.layers.0.mlp.experts.down_proj_scales", "routed_experts"),
    ("model.layers.0.mlp.experts.gate_up_proj_bias", "routed_experts"),
    ("language_model.model.layers.0.feed_forward.experts.gate_up_proj", "routed_experts"),  # Llama 4
    ("model.layers.3.mlp.shared_experts.gate_proj.weight", "shared_experts"),     # contains "experts"
    ("model.layers.3.mlp.shared_expert.up_proj.weight", "shared_experts"),
    ("model.layers.3.mlp.shared_expert_gate.weight", "shared_experts"),
    ("language_model.model.layers.0.feed_forward.shared_expert.down_proj.weight", "shared_experts"),
    ("model.layers.0.mlp.router.weight", "other"),
    ("model.layers.0.mlp.gate.e_score_correction_bias", "other"),
    ("model.embed_tokens.weight", "embedding"),
    ("transformer.wte.weight", "embedding"),
    ("tok_embeddings.weight", "embedding"),
    ("language_model.model.embed_tokens.weight", "embedding"),
    ("lm_head.weight", "lm_head"),
    ("language_model.lm_head.weight", "lm_head"),
    ("output.weight", "lm_head"),
    ("gpt_neox.embed_out.weight", "lm_head"),
    ("vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight", "excluded:vision tower"),
    ("vision_model.patch_embedding.weight", "excluded:vision tower"),
    ("visual.blocks.0.attn.qkv.weight", "excluded:vision tower"),
    ("multi_modal_projector.linear_1.weight", "excluded:multimodal projector"),
    ("model.audio_tower.conformer.0.ffw.weight", "excluded:audio tower"),
    ("mtp.fc.weight", "excluded:MTP layers"),
    ("model.layers.0.self_attn.q_proj.weight", "other"),
])
def test_roles(name, expected):
    assert role(name, layers=61, has_mtp=True) == expected


def test_mtp_layers_by_index_only_when_the_config_has_them():
    assert role("model.layers.61.embed_tokens.weight", layers=61, has_mtp=True) == "excluded:MTP layers"
    assert role("model.layers.61.mlp.experts.3.up_proj.weight", layers=61, has_mtp=True) == "excluded:MTP layers"
    assert role("model.layers.60.mlp.experts.3.up_proj.weight", layers=61, has_mtp=True) == "routed_experts"
    assert role("model.layers.61.self_attn.q_proj.weight", layers=61, has_mtp=False) == "other"


def test_header_length_is_little_endian_u64(tmp_path):
    header = json.dumps({"w": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}).encode()
    f = tmp_path / "model.safetensors"
    f.write_bytes(struct.pack("<Q", len(header)) + header + b"abc")
    assert reader.read_header(f)[0].nbytes == 3
