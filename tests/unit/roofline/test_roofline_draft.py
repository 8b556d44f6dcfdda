"""``roofline.draft``: the drafter's bytes per drafted token, validated before any request
(``roofline.resolve.validate_draft``, through the roofline spec's checks)."""
import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.plugin.roofline_gate import validate_roofline_spec
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.roofline.resolve import resolve_draft, validate_draft


def test_a_catalog_draft_model_with_spec_tokens():
    d = resolve_draft({"model": "llama-3.2-1b", "spec_tokens": 3})
    assert d.kind == "model" and d.spec_tokens == 3
    assert d.model.weight_bytes == pytest.approx(1.24e9 * 2) and d.model.kv_bytes_per_token == 16 * 2 * 8 * 64 * 2
    per_token, what = d.bytes_per_token(context=100, batch=2)
    assert per_token == pytest.approx(2.48e9 + 2 * 32768 * 100) and what.startswith("draft model 2.48 GB weights")


def test_params_with_a_shape_heads_and_none():
    d = resolve_draft({"params": 0.5e9, "dtype": "fp8", "layers": 4, "kv_heads": 2, "head_dim": 64})
    # K and V x 4 layers x 2 heads x 64 at 16 bits: fp8 weights keep a 16-bit KV cache (core.roofline.modelbytes)
    assert d.model.weight_bytes == pytest.approx(0.5e9) and d.model.kv_bytes_per_token == 2 * 4 * 2 * 64 * 2
    heads = resolve_draft({"head_bytes": 1.3e9, "spec_tokens": 1})
    assert heads.kind == "heads" and heads.bytes_per_token(4000, 8) == (1.3e9, "heads 1.30 GB (layers + LM head)")
    assert resolve_draft("none").bytes_per_token(4000, 8)[0] == 0.0 and resolve_draft(None) is None


def test_a_gguf_draft_is_read_from_the_slo_files_folder(tmp_path):
    with pytest.raises(ConfigError, match=r"roofline\.draft\.gguf: .*draft\.gguf"):
        resolve_draft({"gguf": "draft.gguf"}, base_dir=tmp_path)


@pytest.mark.parametrize("draft, text", [
    ("eagle", "roofline.draft: unknown drafter 'eagle'; expected none (n-gram / prompt lookup), or a mapping"),
    (3, "roofline.draft: expected none"),
    ({"modle": "llama-3.2-1b"}, "roofline.draft.modle: unknown draft key 'modle'; did you mean 'model'?"),
    ({"spec_tokens": 3}, "roofline.draft: give exactly one of model, params, config, gguf, head_bytes (given: none)"),
    ({"model": "llama-3.2-1b", "head_bytes": 1e9}, "given: model, head_bytes"),
    ({"model": "llama-3.2-1c"}, "roofline.draft.model: unknown model 'llama-3.2-1c'; did you mean llama-3.2-1b"),
    ({"params": 1e9}, "roofline.draft.params needs roofline.draft.dtype"),
    ({"head_bytes": -1}, "roofline.draft.head_bytes: expected a positive number, got -1"),
    ({"head_bytes": 1e9, "dtype": "fp16"}, "roofline.draft.dtype: head_bytes are already the bytes"),
    ({"head_bytes": 1e9, "spec_tokens": 0}, "roofline.draft.spec_tokens: expected the drafted tokens per step"),
    ({"head_bytes": 1e9, "spec_tokens": 2.5}, "roofline.draft.spec_tokens: .*got 2.5"),
    ({"gguf": 7}, "roofline.draft.gguf: expected a file path, got 7"),
])
def test_bad_drafts_name_the_key_and_the_fix(draft, text):
    with pytest.raises(ConfigError, match=text.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")
                       if ".*" not in text else text):
        validate_draft(draft)


def test_the_roofline_spec_accepts_draft_and_names_where():
    validate_roofline_spec({"min_decode_efficiency": 0.6, "draft": "none"}, "x.slo.yaml:2 roofline")
    with pytest.raises(ConfigError, match=r"^x\.slo\.yaml:2 roofline\.draft\.spec_tokens: "):
        validate_roofline_spec({"draft": {"head_bytes": 1e9, "spec_tokens": "3"}}, "x.slo.yaml:2 roofline")
    with pytest.raises(ConfigError, match="did you mean 'draft'"):
        validate_roofline_spec({"drafts": "none"}, "x.slo.yaml:2 roofline")


def test_the_catalog_knows_the_usual_draft_of_llama_3():
    m = catalog.model("meta-llama/Llama-3.2-1B-Instruct")
    assert m.name == "Llama-3.2-1B" and m.layers == 16 and m.kv_heads == 8 and m.head_dim == 64


def test_the_ceiling_clis_yaml_mapping_accepts_and_checks_the_draft():
    from pytest_llm_latency.roofline.resolve import roofline_inputs

    hw, mb = roofline_inputs({"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": {"model": "llama-3.2-1b"}})
    assert hw.name == "H100-SXM" and mb.name == "Llama-3.1-8B"
    with pytest.raises(ConfigError, match=r"^roofline\.draft\.head_bytes: expected a positive number"):
        roofline_inputs({"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": {"head_bytes": 0}})
