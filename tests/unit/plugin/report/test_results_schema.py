"""The result model and its shipped schema: typed parts with one serialization, the schema's
parts generated from them, strict (a misspelled key is refused), and version-1 baselines
still read."""
from __future__ import annotations

import copy
import json
from dataclasses import fields
from importlib import resources

import pytest

from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.result.result_parts import PARTS, ClientHealth, LoadInfo, copy_parts
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.files import baseline as bfile
from pytest_llm_latency.plugin.report.document import VERSION, ResultDocument, result_entry
from pytest_llm_latency.plugin.report.properties import junit_properties
from pytest_llm_latency.plugin.report.schema import part_schemas
from tests.helpers.records import record

jsonschema = pytest.importorskip("jsonschema")
MS = 1_000_000


def schema() -> dict:
    return json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())


def rec(ttft_ms: float, gap_ms: float = 10.0, tokens: int = 4):
    return record(ttft_ms, gap_ms=gap_ms, tokens=tokens, t0_ns=1_000 * MS, tail_ms=1.0)


def result(**parts):
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": 3,
                            "max_error_rate": 0.5, "confidence": None, "slo": {"ttft_p50": "100ms"}})
    res = evaluate(w, [rec(50.0), rec(60.0), rec(250.0)], [Failure("reset", "connection reset")])
    for name, figures in parts.items():
        getattr(res, name).set(**figures)
    return res


def document(*entries) -> dict:
    doc = ResultDocument("0.0", {"url": None, "api": "openai-completions", "model": None}, 0, "abc", list(entries))
    return json.loads(json.dumps(doc.to_json()))


def test_the_shipped_schema_holds_exactly_the_parts_generated_from_the_model():
    shipped = schema()["$defs"]
    for name, generated in part_schemas().items():
        assert shipped[name] == generated, f"{name}: run python -m pytest_llm_latency.plugin.report.schema"
    item = schema()["properties"]["results"]["items"]["properties"]
    assert {p.NAME for p in PARTS} <= set(item)


def test_a_result_with_every_part_validates_and_a_misspelled_key_is_refused():
    res = result(load={"load_mode": "closed", "throughput_rps": 12.5, "itl_ms_p99_under_load": float("inf")},
                 client={"client_lag_ms_p99": 1.5, "client_fell_behind": 0, "client_limited": 0},
                 server={"server_waiting_max": 3.0, "metrics": {"vllm:num_preemptions_total": 0.0},
                         "metrics_timeline": {"vllm:num_requests_waiting": [[0.0, 1.0], [5.0, 0.0]]}},
                 roofline={"status": "pass", "decode_efficiency": 0.61, "min_decode_efficiency": 0.5},
                 measurement={"nonce": "abc", "samples_mode": "fixed", "stop_reason": "fixed samples (4)"},
                 agent={"sessions": 2, "turns": [{"turn": 2, "reuse": 0.9}]})
    entry = result_entry(res, "t.py::test_w", detail=True)
    doc = document(entry)
    jsonschema.validate(doc, schema())
    assert doc["version"] == VERSION == 3 and entry["load"]["itl_ms_p99_under_load"] is None  # a miss: null
    for where, key in ((doc["results"][0], "extra"), (doc["results"][0]["load"], "throughput_rsp"),
                       (doc["results"][0]["roofline"], "min_efficiency"), (doc, "results_version"),
                       (doc["results"][0]["ttft_ms"], "p96")):
        bad = copy.deepcopy(doc)
        target = bad
        for step in _path(doc, where):
            target = target[step]
        target[key] = 1
        with pytest.raises(jsonschema.ValidationError, match=key):
            jsonschema.validate(bad, schema())


def _path(doc, node):
    """The keys from ``doc`` to ``node`` (by identity)."""
    if doc is node:
        return []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        if isinstance(v, (dict, list)):
            sub = _path(v, node)
            if sub is not None:
                return [k] + sub
    return None


def test_a_part_refuses_a_field_it_has_not_got_naming_the_ones_it_has():
    with pytest.raises(AttributeError, match="'throughput_rsp'.*throughput_rps"):
        LoadInfo().set(throughput_rsp=1.0)
    with pytest.raises(ValueError, match="client has no key 'lag'"):
        ClientHealth.from_json({"lag": 1})


def test_every_part_round_trips_through_its_json():
    for part in PARTS:
        values = {}
        for i, f in enumerate(fields(part)):
            if f.name in part.TRANSIENT:
                continue
            hint = str(f.type)
            values[f.name] = ({} if "dict" in hint else [] if "list" in hint else i if "int" in hint
                              else i + 0.5 if "float" in hint else f"v{i}")
        p = part(**values)
        assert part.from_json(json.loads(json.dumps(p.to_json()))) == part.from_json(p.to_json())
        assert {k: v for k, v in p.to_json().items()} == {k: v for k, v in values.items() if v not in ({}, [])}


def test_copy_parts_updates_field_by_field_as_the_old_extra_update_did():
    a, b = result(load={"goodput_fraction": 0.5}), result(load={"load_mode": "closed"})
    copy_parts(b, a)
    assert a.load.goodput_fraction == 0.5 and a.load.load_mode == "closed"
    b.load.load_mode = "open"
    assert a.load.load_mode == "closed"  # a copy, not shared


def test_junit_properties_are_the_entrys_scalars():
    res = result(roofline={"status": "pass", "decode_efficiency": 0.61}, cold_start={"cold_starts": 0})
    entry = result_entry(res, "t.py::test_w")
    props = dict(junit_properties(entry))
    assert props["llm.verdict"] == entry["verdict"] == "fail" and props["llm.n"] == 3
    assert props["llm.roofline.decode_efficiency"] == 0.61 and props["llm.cold_start.cold_starts"] == 0
    assert props["llm.ttft_ms.p50"] == entry["ttft_ms"]["p50"]
    assert props["llm.ttft_ms.max"] == float("inf") and entry["ttft_ms"]["max"] is None  # the failed request
    assert props["llm.violation.1"] == entry["violations"][0] and props["llm.failures.reset"] == 1
    assert all(isinstance(v, (int, float, str)) for v in props.values())
    assert dict(junit_properties(entry, "llm.2."))["llm.2.verdict"] == "fail"


def test_an_older_results_document_is_refused_by_name():
    with pytest.raises(ValueError, match="version .0.9.0. is not 3.*result-json.md"):
        ResultDocument.from_json({"version": "0.9.0", "target": {}, "results": []})
    doc = document(result_entry(result(), "t.py::test_w"))
    assert ResultDocument.from_json(doc).to_json() == doc


def test_a_version_1_baseline_saved_by_an_earlier_release_is_still_read(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({
        "format": "pytest-llm-latency-baseline", "version": 1,
        "fingerprint": {"model": "m", "server": "vLLM 0.11", "plugin_version": "0.9.0"},
        "tests": {"t.py::test_w": {"samples": {"ttft_ms": [50.0, 60.0, None], "tpot_ms": [10.0, 10.0, None]},
                                   "workload": {"name": "w"}}}}))
    doc = bfile.load(str(path))
    assert doc["version"] == 1 and set(doc["tests"]) == {"t.py::test_w"}
    assert bfile.decode_samples(doc["tests"]["t.py::test_w"]["samples"])["ttft"][:2] == [50.0, 60.0]


def _results_file(tmp_path, version, **result):
    path = tmp_path / f"r{version}.json"
    entry = {"nodeid": "t.py::test_w", "workload": "w", "verdict": "pass", "n": 2,
             "samples": {"ttft_ms": [50.0, 60.0]}, "fingerprint": {"model": "m"}, **result}
    path.write_text(json.dumps({"version": version, "target": {}, "results": [entry]}))
    return str(path)


def test_results_files_of_version_1_2_and_3_serve_as_baselines_and_a_newer_one_is_refused(tmp_path):
    v1 = bfile.load(_results_file(tmp_path, "0.1.0", extra={"nonce": "n", "cold_starts": 0}))  # v1: extra
    v2 = bfile.load(_results_file(tmp_path, 2, measurement={"nonce": "n", "worker": "gw0"}))
    v3 = bfile.load(_results_file(tmp_path, 3, measurement={"nonce": "n", "xdist_worker": "gw0"}))
    for doc in (v1, v2, v3):
        (entry,) = doc["tests"].values()
        assert entry["samples"] == {"ttft_ms": [50.0, 60.0]} and entry["fingerprint"] == {"model": "m"}
    with pytest.raises(bfile.BaselineError, match=r"results JSON version 4 is not one this plugin reads \(1, 2, 3\)"):
        bfile.load(_results_file(tmp_path, 4))
