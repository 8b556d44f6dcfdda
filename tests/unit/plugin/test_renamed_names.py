"""One name per concept: the renamed settings (``plugin.options.RENAMED``) and YAML keys
(``core.spec.renamed_keys``) still work under their old names this release, with a
``LatencyDeprecationWarning`` naming the new one; old and new together are an error.  Pure: no
server, no pytester (the plugin's side is ``tests/plugin/test_deprecated_names.py``)."""
import json
import warnings
from importlib import resources

import pytest

import pytest_llm_latency
from pytest_llm_latency.core.errors import ConfigError, LatencyDeprecationWarning, LatencyWarning
from pytest_llm_latency.core.spec.workload import WORKLOAD_KEYS, make_workload
from pytest_llm_latency.plugin.options import BY_NAME, DEPRECATED_OPTIONS, RENAMED, Settings
from pytest_llm_latency.plugin.roofline_gate import ROOFLINE_KEYS


def test_the_deprecation_class_is_public_and_not_a_latency_warning():
    assert pytest_llm_latency.LatencyDeprecationWarning is LatencyDeprecationWarning
    assert issubclass(LatencyDeprecationWarning, DeprecationWarning)
    assert not issubclass(LatencyDeprecationWarning, LatencyWarning)  # -W error::...LatencyWarning leaves it be


# ---------------------------------------------------------------- CLI / env / ini (options.RENAMED)

OLD_AND_NEW = [("min_efficiency", "min_decode_efficiency", "0.4"), ("max_regression", "regression", "ttft_p95=7%")]


@pytest.mark.parametrize("old, new, raw", OLD_AND_NEW)
@pytest.mark.parametrize("layer", ["cli", "env", "ini"])
def test_an_old_name_is_used_at_its_layer_and_named_with_the_new_one(old, new, raw, layer):
    o, n = next(d for d in DEPRECATED_OPTIONS if d.name == old), BY_NAME[new]
    cli, env, ini = {}, {}, {}
    {"cli": cli, "ini": ini}.get(layer, {})[old] = raw
    if layer == "env":
        env[o.env] = raw
    s = Settings.resolve(cli, env, ini)
    assert s.get(new) == n.parse(raw)
    source = {"cli": o.cli, "env": f"{o.env} (environment)", "ini": f"{o.ini} (ini)"}[layer]
    assert s.source(new) == source
    new_source = {"cli": n.cli, "env": f"{n.env} (environment)", "ini": f"{n.ini} (ini)"}[layer]
    assert s.deprecations == (f"{source} is deprecated, use {new_source} instead "
                              "(the old name works for this release)",)


def test_the_old_flags_are_spelled_as_before():
    names = {d.name: (d.cli, d.env, d.ini) for d in DEPRECATED_OPTIONS}
    assert names == {"min_efficiency": ("--llm-latency-min-efficiency", "LLM_LATENCY_MIN_EFFICIENCY",
                                        "llm_latency_min_efficiency"),
                     "max_regression": ("--llm-latency-max-regression", "LLM_LATENCY_MAX_REGRESSION",
                                        "llm_latency_max_regression")}
    assert set(RENAMED.values()) <= set(BY_NAME) and not set(RENAMED) & set(BY_NAME)
    assert BY_NAME["min_decode_efficiency"].cli == "--llm-latency-min-decode-efficiency"
    assert BY_NAME["regression"].env == "LLM_LATENCY_REGRESSION"


@pytest.mark.parametrize("cli, env, ini, both", [
    ({"min_efficiency": "0.4", "min_decode_efficiency": "0.5"}, {}, {},
     "--llm-latency-min-efficiency (deprecated) and --llm-latency-min-decode-efficiency are both given"),
    ({}, {"LLM_LATENCY_MAX_REGRESSION": "ttft_p95=5%", "LLM_LATENCY_REGRESSION": "ttft_p95=6%"}, {},
     "LLM_LATENCY_MAX_REGRESSION (environment) (deprecated) and LLM_LATENCY_REGRESSION (environment) are both"),
    ({}, {}, {"min_efficiency": "0.4", "min_decode_efficiency": "0.5"},
     "llm_latency_min_efficiency (ini) (deprecated) and llm_latency_min_decode_efficiency (ini) are both"),
])
def test_old_and_new_at_one_layer_is_an_error_naming_both(cli, env, ini, both):
    with pytest.raises(ConfigError, match="keep .* only") as exc:
        Settings.resolve(cli, env, ini)
    assert both in str(exc.value)


def test_across_layers_the_precedence_holds_and_the_old_name_still_warns():
    s = Settings.resolve({"min_decode_efficiency": "0.6"}, {"LLM_LATENCY_MIN_EFFICIENCY": "0.3"}, {})
    assert s.get("min_decode_efficiency") == 0.6 and s.source("min_decode_efficiency") == \
        "--llm-latency-min-decode-efficiency"
    assert len(s.deprecations) == 1 and "LLM_LATENCY_MIN_EFFICIENCY (environment) is deprecated" in s.deprecations[0]
    s = Settings.resolve({"min_efficiency": "0.3"}, {}, {"min_decode_efficiency": "0.6"})  # old CLI > new ini
    assert s.get("min_decode_efficiency") == 0.3 and s.source("min_decode_efficiency") == \
        "--llm-latency-min-efficiency"


def test_a_bad_value_under_the_old_name_names_the_old_source():
    with pytest.raises(ConfigError, match=r"^--llm-latency-min-efficiency: '1.5' is not valid for "
                                          r"min_decode_efficiency: expected a fraction in \(0, 1\]"):
        Settings.resolve({"min_efficiency": "1.5"}, {}, {})


def test_new_names_bring_no_deprecation():
    s = Settings.resolve({"min_decode_efficiency": "0.5", "regression": "ttft_p95=5%"},
                         {"LLM_LATENCY_MIN_PREFILL_EFFICIENCY": "0.3"}, {})
    assert s.deprecations == () and s.get("min_prefill_efficiency") == 0.3


# ---------------------------------------------------------------- YAML / marker keys (core.spec.renamed_keys)

def where(path):
    return "f.slo.yaml:3 workloads.w." + ".".join(map(str, path))


def build(spec):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        w = make_workload("w", spec, where)
    return w, [str(x.message) for x in got if issubclass(x.category, LatencyDeprecationWarning)]


def test_roofline_min_efficiency_becomes_min_decode_efficiency():
    w, said = build({"class": "chat", "roofline": {"min_efficiency": 0.5, "hardware": "h100-sxm"}})
    assert dict(w.roofline) == {"min_decode_efficiency": 0.5, "hardware": "h100-sxm"}
    assert said == ["f.slo.yaml:3 workloads.w.roofline.min_efficiency is deprecated: use "
                    "'roofline.min_decode_efficiency' instead (the old name works for this release)"]


def test_slo_min_prefill_efficiency_moves_beside_the_decode_floor():
    w, said = build({"prompt_sweep": [256, 1024], "samples": 3, "slo": {"min_prefill_efficiency": 0.35},
                     "roofline": {"hardware": "h100-sxm"}})
    assert w.prefill_slo["min_prefill_efficiency"][0] == 0.35
    assert w.roofline["min_prefill_efficiency"] == 0.35 and w.roofline["hardware"] == "h100-sxm"
    assert said == ["f.slo.yaml:3 workloads.w.slo.min_prefill_efficiency is deprecated: use "
                    "'roofline.min_prefill_efficiency' instead (the old name works for this release)"]
    new, none = build({"prompt_sweep": [256, 1024], "samples": 3, "roofline": {"min_prefill_efficiency": 0.35}})
    assert none == [] and new.prefill_slo["min_prefill_efficiency"] == (0.35, where(("roofline",
                                                                                       "min_prefill_efficiency")))


def test_sweep_becomes_rate_sweep():
    w, said = build({"class": "chat", "requests": 10, "sweep": {"rate_min": 1, "rate_max": 8}})
    assert w.sweep is not None and (w.sweep.rate_min, w.sweep.rate_max) == (1.0, 8.0)
    assert said == ["f.slo.yaml:3 workloads.w.sweep is deprecated: use 'rate_sweep' instead "
                    "(the old name works for this release)"]
    new, none = build({"class": "chat", "requests": 10, "rate_sweep": {"rate_min": 1, "rate_max": 8}})
    assert none == [] and new.sweep == w.sweep


@pytest.mark.parametrize("spec, both", [
    ({"class": "chat", "roofline": {"min_efficiency": 0.5, "min_decode_efficiency": 0.6}},
     "workloads.w.roofline.min_efficiency: both 'roofline.min_efficiency' (deprecated) and "
     "'roofline.min_decode_efficiency' are given"),
    ({"class": "chat", "sweep": {"rate_min": 1, "rate_max": 8}, "rate_sweep": {"rate_min": 1, "rate_max": 8}},
     "workloads.w.sweep: both 'sweep' (deprecated) and 'rate_sweep' are given"),
    ({"prompt_sweep": [256, 1024], "slo": {"min_prefill_efficiency": 0.3},
      "roofline": {"min_prefill_efficiency": 0.4}},
     "workloads.w.slo.min_prefill_efficiency: both 'slo.min_prefill_efficiency' (deprecated) and "
     "'roofline.min_prefill_efficiency' are given"),
])
def test_old_and_new_yaml_keys_together_are_an_error_naming_the_place(spec, both):
    with pytest.raises(ConfigError) as exc:
        build(spec)
    assert str(exc.value).startswith("f.slo.yaml:3 ") and both in str(exc.value)


def test_new_keys_warn_nothing():
    _, said = build({"class": "chat", "roofline": {"min_decode_efficiency": 0.5}})
    assert said == []


def test_the_slo_schema_has_the_same_keys_as_the_parser():
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/slo.schema.json").read_text())
    roof = schema["$defs"]["roofline"]["properties"]
    assert set(roof) == set(ROOFLINE_KEYS) | {"min_efficiency"} and roof["min_efficiency"]["deprecated"] is True
    workload = schema["properties"]["workloads"]["additionalProperties"]["properties"]
    assert set(workload) == set(WORKLOAD_KEYS) | {"sweep"} and workload["sweep"]["deprecated"] is True
    assert workload["slo"]["properties"]["min_prefill_efficiency"]["deprecated"] is True


def test_a_file_roofline_prefill_floor_is_for_the_files_prompt_sweeps_and_merges_under_a_moved_one():
    from pytest_llm_latency.plugin.slofile import parse_slo_file

    text = ("roofline: {hardware: h100-sxm, min_prefill_efficiency: 0.3}\n"
            "workloads:\n"
            "  chat: {samples: 20, confidence: null}\n"
            "  sweep: {prompt_sweep: [256, 1024], samples: 3}\n"
            "  old: {prompt_sweep: [256, 1024], samples: 3, slo: {min_prefill_efficiency: 0.4}}\n")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        spec = parse_slo_file(text, "f.slo.yaml")
    chat, sweep, old = spec.workloads
    assert dict(chat.roofline) == {"hardware": "h100-sxm"} and chat.prefill_slo == {}
    assert dict(sweep.roofline) == {"hardware": "h100-sxm", "min_prefill_efficiency": 0.3}
    assert dict(old.roofline) == {"hardware": "h100-sxm", "min_prefill_efficiency": 0.4}  # the workload's wins
    assert old.prefill_slo["min_prefill_efficiency"][0] == 0.4
    assert [str(w.message) for w in got] == [
        "f.slo.yaml:5 workloads.old.slo.min_prefill_efficiency is deprecated: use 'roofline.min_prefill_efficiency' "
        "instead (the old name works for this release)"]
