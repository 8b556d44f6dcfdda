"""Per-layer KV and state (core.roofline.kv_layout) and the explicit kv_bytes_per_token / window keys."""
import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.kv_layout import KVLayout, LayerKV, kv_layout_from_groups
from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
from pytest_llm_latency.core.roofline.roofline_text import format_ceiling
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.roofline.resolve import resolve_model_bytes, roofline_inputs

H100 = catalog.hardware("h100-sxm")


@pytest.mark.parametrize("kind, window, context, tokens", [
    ("full", None, 5000, 5000), ("latent", None, 5000, 5000),
    ("sliding", 1024, 500, 500), ("sliding", 1024, 1024, 1024), ("sliding", 1024, 131072, 1024),
    ("chunked", 8192, 5000, 5000), ("chunked", 8192, 8192 + 100, 100), ("chunked", 8192, 131072, 0),
])
def test_tokens_read_per_kind(kind, window, context, tokens):
    g = LayerKV(kind, 3, bytes_per_token=10.0, window=window)
    assert g.tokens_read(context) == tokens
    assert g.bytes_at(context) == 3 * 10.0 * tokens


def test_sliding_sinks_are_kept_past_the_window_and_state_is_read_and_written():
    assert LayerKV("sliding", 1, 1.0, window=128, sinks=4).tokens_read(1000) == 132
    assert LayerKV("sliding", 1, 1.0, window=128, sinks=4).tokens_read(100) == 100
    state = LayerKV("state", 36, state_bytes=2.1e6)
    assert state.bytes_at(0) == state.bytes_at(131072) == 2 * 36 * 2.1e6


def test_a_hybrid_layout_sums_its_kinds_and_says_the_split():
    layout = KVLayout((LayerKV("full", 12, 2 * 2 * 256 * 2), LayerKV("state", 36, state_bytes=32 * 128 * 128 * 4)))
    full_kv = 12 * 2048 * 32768
    assert layout.bytes_at(32768) == full_kv + 2 * 36 * 32 * 128 * 128 * 4
    assert layout.growth_per_token == 12 * 2048
    text = layout.describe(32768)
    assert "12 full layers × 2.0 KB/token × 32 768" in text
    assert "state: 36 linear-attention layers × 2.1 MB state (read + written)" in text


def test_layer_lists_merge_into_one_group_per_kind():
    groups = [LayerKV("sliding", 1, 4.0, window=1024) if i % 6 != 5 else LayerKV("full", 1, 4.0) for i in range(62)]
    layout = kv_layout_from_groups(groups)
    assert sorted((g.kind, g.layers) for g in layout.groups) == [("full", 10), ("sliding", 52)]
    assert sum(g.layers * g.bytes_per_token for g in layout.groups) == 62 * 4.0  # every layer's own bytes per token


@pytest.mark.parametrize("kwargs, match", [
    ({"kind": "windowed", "layers": 1, "bytes_per_token": 1.0}, "unknown layer kind 'windowed'"),
    ({"kind": "sliding", "layers": 1, "bytes_per_token": 1.0}, "window must be a positive integer"),
    ({"kind": "full", "layers": 0, "bytes_per_token": 1.0}, "full layers must be a positive integer"),
    ({"kind": "state", "layers": 2}, "state bytes > 0"),
    ({"kind": "latent", "layers": 2, "bytes_per_token": 0.0}, "bytes per token > 0"),
])
def test_bad_layer_groups_are_refused(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        LayerKV(**kwargs)


def test_explicit_kv_bytes_per_token_and_window():
    mb = resolve_model_bytes(params=8e9, dtype="fp16", kv_bytes_per_token=131072)
    assert decode_ceiling(H100, mb, 8000).kv_bytes == 131072 * 8000
    windowed = resolve_model_bytes(params=8e9, dtype="fp16", kv_bytes_per_token=131072, window=4096)
    c = decode_ceiling(H100, windowed, 32768)
    assert c.kv_bytes == 131072 * 4096
    assert c.per_stream_tok_s == pytest.approx(3350e9 / (16e9 + 131072 * 4096))
    assert "windowed layers" in format_ceiling(c) and "(window 4 096)" in format_ceiling(c)
    # it replaces a config's or a catalog entry's own KV
    catalog_kv = resolve_model_bytes(model="llama-3.1-8b", kv_bytes_per_token=1000)
    assert decode_ceiling(H100, catalog_kv, 10).kv_bytes == 10_000


@pytest.mark.parametrize("kwargs, match", [
    ({"window": 4096}, r"roofline.window needs roofline.kv_bytes_per_token"),
    ({"kv_bytes_per_token": -1}, r"roofline.kv_bytes_per_token: expected the KV bytes of one cached token"),
    ({"kv_bytes_per_token": 1000, "layers": 32}, r"roofline.kv_bytes_per_token is already the KV size; "
                                                 r"drop roofline.layers"),
    ({"kv_bytes_per_token": 1000, "window": 0}, r"roofline.window: expected a sliding window in tokens"),
])
def test_explicit_kv_errors_name_the_key(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        roofline_inputs({"hardware": "h100-sxm", "params": 8e9, "dtype": "fp16", **kwargs})
