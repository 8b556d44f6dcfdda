"""Catalog models described by their vendor config.json (roofline/configs): the same arithmetic as config:."""
import json
from importlib import resources

import pytest

from pytest_llm_latency.cli.ceiling import main as ceiling_main
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.roofline.resolve import resolve_model_bytes

CONFIGS = resources.files("pytest_llm_latency.roofline").joinpath("configs")
H100 = catalog.hardware("h100-sxm")


@pytest.mark.parametrize("key", sorted(catalog.config_models()))
def test_a_catalog_entry_is_its_vendor_config(key, tmp_path):
    entry = catalog.config_models()[key]
    assert (CONFIGS / entry.config_file).is_file(), entry.config_file
    assert entry.repo in (CONFIGS / "SOURCES.md").read_text("utf-8"), f"{entry.repo}: no source named"
    (tmp_path / "config.json").write_text((CONFIGS / entry.config_file).read_text("utf-8"))
    by_name, by_file = resolve_model_bytes(model=key), resolve_model_bytes(config=str(tmp_path))
    for ctx in (0, 32768, 131072):
        assert decode_ceiling(H100, by_name, ctx).per_stream_tok_s == \
            pytest.approx(decode_ceiling(H100, by_file, ctx).per_stream_tok_s, rel=1e-12)
    assert by_name.source.startswith(f"catalog {key}: {entry.repo} config.json")
    assert by_name.name == key


def test_the_entries_the_issue_names_resolve_by_name_and_alias():
    for name in ("gpt-oss-120b", "openai/gpt-oss-20b", "deepseek-v3", "deepseek-ai/DeepSeek-R1", "kimi-k2",
                 "gemma-3-27b", "google/gemma-3-27b-it", "llama-4-scout", "qwen3-next-80b-a3b",
                 "Qwen/Qwen3-235B-A22B", "mistral-small-3.1-24b"):
        assert isinstance(catalog.model_entry(name), catalog.ConfigModel), name


def test_a_dtype_override_and_kv_dtype_reach_a_config_entry():
    plain = resolve_model_bytes(model="gpt-oss-120b")
    fp8_kv = resolve_model_bytes(model="gpt-oss-120b", kv_dtype="fp8")
    assert fp8_kv.kv_bytes_at(32768) == pytest.approx(plain.kv_bytes_at(32768) / 2)
    over = resolve_model_bytes(model="gpt-oss-120b", bits=4.25)
    assert "bits 4.25 for every tensor" in over.source


def test_the_reference_target_needs_a_parameter_count_model():
    with pytest.raises(ConfigError, match=r"'gpt-oss-120b' is described by its vendor config .*parameter-count"):
        catalog.model("gpt-oss-120b")
    with pytest.raises(ConfigError, match=r"unknown model 'gpt-oss-12'; did you mean .*gpt-oss-120b"):
        catalog.model_entry("gpt-oss-12")


def test_the_cli_takes_a_config_entry_with_its_prefill_shape(capsys):
    assert ceiling_main(["--hardware", "h100-sxm", "--model", "gemma-3-27b", "--context", "32768", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "gemma-3-27b" and "52 windowed layers" in out["kv"]
    assert out["prefill"]["attention"] == "counted"  # layers and the attention width from the config


@pytest.mark.parametrize("key, layers, width, note", [
    ("gpt-oss-120b", 18, 64 * 64, "on 18 of 36 layers"),         # every other layer a 128-token window
    ("qwen3-next-80b-a3b", 12, 16 * 256, "on 12 of 48 layers"),  # 36 Gated DeltaNet layers attend nothing
    ("deepseek-v3", 61, 128 * (128 + 64), ""),                   # MLA: qk_nope + qk_rope per head
    ("qwen3-235b-a22b", 94, 64 * 128, ""),
])
def test_the_prefill_attention_term_spans_only_the_layers_that_attend_the_whole_prompt(key, layers, width, note):
    from pytest_llm_latency.core.roofline.archs import attention_shape

    got = attention_shape(catalog.config_models()[key].config())
    assert got[:2] == (layers, width)
    assert note in got[2] and (bool(note) == bool(got[2]))
