"""Issue 37: a disaggregated target's settings, one name per concept: ``prefill_metrics_url``,
``decode_metrics_url`` and ``kv_link`` as flag, env var, ini key, YAML ``target:`` key and marker argument,
with the usual precedence; a ``reference://...?pd_link=`` target's pools and link by default; the pools'
paths joined to the resolved URL."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.plugin.disagg_floor import in_blocks, pools_of, preflight
from pytest_llm_latency.plugin.options import BY_NAME, Settings
from pytest_llm_latency.plugin.session import target_from
from pytest_llm_latency.plugin.slofile import parse_slo_file
from pytest_llm_latency.core.spec.workload import make_workload

URL = "http://proxy:8000"


def settings(cli=None, env=None, ini=None) -> Settings:
    return Settings.resolve(cli or {}, env or {}, ini or {})


def test_one_name_written_every_way():
    for name in ("prefill_metrics_url", "decode_metrics_url", "kv_link"):
        opt = BY_NAME[name]
        assert opt.cli == "--llm-latency-" + name.replace("_", "-")
        assert opt.env == "LLM_LATENCY_" + name.upper() and opt.ini == "llm_latency_" + name


@pytest.mark.parametrize("layer", ["cli", "env", "ini", "yaml", "marker"])
def test_each_layer_gives_the_pools_and_the_link(layer):
    values = {"prefill_metrics_url": "http://p:8100/metrics", "decode_metrics_url": "/decode/metrics",
              "kv_link": "ib-ndr"}
    s = settings(cli=values if layer == "cli" else None,
                 env={BY_NAME[k].env: v for k, v in values.items()} if layer == "env" else None,
                 ini=values if layer == "ini" else None)
    spec = target_from(s, {"url": URL, **(values if layer == "yaml" else {})}, "f.slo.yaml",
                       marker=values if layer == "marker" else None)
    assert (spec.prefill_metrics_url, spec.decode_metrics_url, spec.kv_link) == \
        ("http://p:8100/metrics", "/decode/metrics", "ib-ndr")
    assert spec.disaggregated


def test_precedence_marker_over_cli_over_yaml():
    s = settings(cli={"kv_link": "nvlink-4"})
    assert target_from(s, {"url": URL, "kv_link": 25}, "f").kv_link == "nvlink-4"
    assert target_from(s, {"url": URL}, "f", marker={"kv_link": "ib-xdr"}).kv_link == "ib-xdr"
    assert target_from(settings(), {"url": URL, "kv_link": 25}, "f").kv_link == "25"


def test_a_reference_pair_has_its_pools_and_link_by_default():
    spec = target_from(settings(), {"url": "reference://h100-sxm/llama-3.1-8b?pd_link=ib-hdr"}, "f")
    assert (spec.prefill_metrics_url, spec.decode_metrics_url, spec.kv_link) == \
        ("/prefill/metrics", "/decode/metrics", "ib-hdr")
    plain = target_from(settings(), {"url": "reference://h100-sxm/llama-3.1-8b"}, "f")
    assert not plain.disaggregated and plain.kv_link is None


def test_paths_join_the_resolved_url_and_the_link_resolves():
    spec = target_from(settings(env={"LLM_LATENCY_PREFILL_METRICS_URL": "/prefill/metrics",
                                     "LLM_LATENCY_DECODE_METRICS_URL": "http://d:8200/metrics",
                                     "LLM_LATENCY_KV_LINK": "12.5"}), {"url": URL}, "f")
    pools = pools_of(spec, "http://127.0.0.1:9999/")
    assert pools.urls() == {"prefill": "http://127.0.0.1:9999/prefill/metrics", "decode": "http://d:8200/metrics"}
    assert (pools.link.key, pools.link.gb_s) == ("custom", 12.5)
    assert pools_of(target_from(settings(), {"url": URL}, "f"), URL) is None


@pytest.mark.parametrize("raw", ["ftp://x/metrics", "//host/metrics", "http:///metrics", "decode:8200"])
def test_a_bad_metrics_url_names_the_setting(raw):
    with pytest.raises(ConfigError) as exc:
        settings(env={"LLM_LATENCY_PREFILL_METRICS_URL": raw})
    assert str(exc.value).startswith(f"LLM_LATENCY_PREFILL_METRICS_URL (environment): {raw!r} is not valid for "
                                     "prefill_metrics_url: expected an http(s):// URL of a /metrics endpoint")


def test_yaml_target_keys_are_checked_at_collection():
    text = "target:\n  url: http://proxy:8000\n  kv_link: ib-ndx\nworkloads:\n  chat: {class: chat}\n"
    with pytest.raises(ConfigError, match=r"f.slo.yaml:3 target.kv_link: kv_link: unknown link 'ib-ndx'; "
                                          r"did you mean ib-ndr"):
        parse_slo_file(text, "f.slo.yaml")
    text = "target:\n  decode_metrics_url: decode:8200\nworkloads:\n  chat: {class: chat}\n"
    with pytest.raises(ConfigError, match="f.slo.yaml:2 target.decode_metrics_url: 'decode:8200' is not valid"):
        parse_slo_file(text, "f.slo.yaml")
    ok = parse_slo_file("target:\n  prefill_metrics_url: /p\n  kv_link: 50\nworkloads:\n  chat: {class: chat}\n",
                        "f.slo.yaml")
    assert ok.target["kv_link"] == 50


def test_a_kv_transfer_budget_needs_pools():
    w = make_workload("w", {"class": "chat", "slo": {"kv_transfer_p95": "100ms"}})
    with pytest.raises(ConfigError, match="kv_transfer_p95 needs a disaggregated target"):
        preflight(target_from(settings(), {"url": URL}, "f"), w, "t.py::test w")
    preflight(target_from(settings(cli={"decode_metrics_url": "/m"}), {"url": URL}, "f"), w, "t")
    preflight(target_from(settings(), {"url": URL}, "f"), make_workload("w", {"class": "chat"}), "t")


SWEEP = {"urls": {"a": "http://a:8000", "b": "http://b:8000"}, "block_size": 5}


@pytest.mark.parametrize("key, value, said", [("baseline_target", "http://base:8000", "an A/B run (baseline_target)"),
                                              ("server_sweep", SWEEP, "a server sweep (server_sweep:)")])
def test_a_kv_transfer_budget_in_blocks_is_refused_before_any_request(key, value, said):
    spec = target_from(settings(cli={"decode_metrics_url": "/m"}), {"url": URL}, "f")
    w = make_workload("w", {"class": "chat", "samples": 20, "slo": {"kv_transfer_p95": "100ms"}, key: value})
    with pytest.raises(ConfigError) as exc:
        preflight(spec, w, "t.py::test w")
    text = str(exc.value)
    assert text.startswith(f"t.py::test w: kv_transfer_p95 cannot be judged in {said}: its blocks alternate")
    assert "measure each deployment in its own run" in text and "--llm-latency-baseline=FILE" in text
    # without a kv budget it runs, its pools unscraped and said so; a target of one server says nothing
    plain = make_workload("w", {"class": "chat", "samples": 20, key: value})
    preflight(spec, plain, "t")
    assert in_blocks(plain, spec, None).startswith(f"disaggregated target: its pools' /metrics are not scraped in "
                                                   f"{said}")
    assert in_blocks(plain, target_from(settings(), {"url": URL}, "f"), None) is None
    assert in_blocks(make_workload("w", {"class": "chat"}), spec) is None
