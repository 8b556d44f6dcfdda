"""The trace keys of a workload (core.spec.trace.parse_trace_spec through core.spec.workload.make_workload):
defaults, every bad value and clash with its exact message, and the YAML and marker paths."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.result.sample_size import check_min_samples
from pytest_llm_latency.core.spec.trace import TraceSpec
from pytest_llm_latency.core.spec.workload import WORKLOAD_KEYS, make_workload

WHERE = lambda p: "f.slo.yaml:3 workloads.w." + ".".join(map(str, p))  # noqa: E731


def error(spec: dict, name: str = "w") -> str:
    with pytest.raises(ConfigError) as exc:
        make_workload(name, spec, WHERE)
    return str(exc.value)


def test_a_trace_workload_needs_no_class_and_no_lengths():
    w = make_workload("chat", {"trace": "t.jsonl", "slo": {"ttft_p99": "1s"}}, WHERE)
    assert w.trace == TraceSpec("t.jsonl") and w.klass == "custom"
    assert (w.prompt_tokens, w.output_tokens) == (1, 1)
    assert w.samples == 20 and not w.samples_given and w.confidence is None and not w.sequential
    assert [b.key for b in w.budgets] == ["ttft_p99"]  # no class defaults: the name 'chat' is not a class here
    check_min_samples(w, "x")  # a p99 over 20 samples: not refused before the rows are loaded
    with pytest.raises(ConfigError, match="p99 needs >= 100 samples, got 20"):
        check_min_samples(w, "x", samples=20)  # the driver's check once it knows the rows


def test_every_trace_key_is_read():
    w = make_workload("w", {"trace": Path("a/t.jsonl.gz"), "trace_speed": 2, "trace_rows": 4,
                            "trace_start_ms": 1500, "trace_overlong": "clip", "trace_block_tokens": 16}, WHERE)
    assert w.trace == TraceSpec("a/t.jsonl.gz", 2.0, 4, 1500.0, "clip", 16)
    assert {"trace", "trace_speed", "trace_rows", "trace_start_ms", "trace_overlong",
            "trace_block_tokens"} <= set(WORKLOAD_KEYS)


def test_a_confidence_may_be_asked_for():
    w = make_workload("w", {"trace": "t.jsonl", "confidence": 0.9, "slo": {"ttft_p95": "1s"}}, WHERE)
    assert w.confidence == 0.9 and not w.sequential


@pytest.mark.parametrize("key, value, message", [
    ("trace", "", "f.slo.yaml:3 workloads.w.trace: expected the path of a Mooncake JSONL trace (.jsonl or "
     ".jsonl.gz), got '' -- give a path relative to the SLO file's (or test file's) folder"),
    ("trace", 5, "f.slo.yaml:3 workloads.w.trace: expected the path of a Mooncake JSONL trace (.jsonl or "
     ".jsonl.gz), got 5 -- give a path relative to the SLO file's (or test file's) folder"),
    ("trace_speed", 0, "f.slo.yaml:3 workloads.w.trace_speed: expected a number > 0, got 0 -- 1 replays the trace "
     "as recorded, 2 twice as fast (offsets and delays halved), 0.5 at half speed"),
    ("trace_speed", "2x", "f.slo.yaml:3 workloads.w.trace_speed: expected a number > 0, got '2x' -- 1 replays the "
     "trace as recorded, 2 twice as fast (offsets and delays halved), 0.5 at half speed"),
    ("trace_rows", 0, "f.slo.yaml:3 workloads.w.trace_rows: expected an integer >= 1, got 0 -- give how many rows "
     "to replay (the first N after trace_start_ms), or drop it for all"),
    ("trace_start_ms", -1, "f.slo.yaml:3 workloads.w.trace_start_ms: expected a number of ms >= 0, got -1 -- rows "
     "whose timestamp is before it are skipped, and offsets are counted from it"),
    ("trace_overlong", "clipp", "f.slo.yaml:3 workloads.w.trace_overlong: expected one of error, skip, clip, got "
     "'clipp'; did you mean 'clip'? -- what a row beyond the server's context does: error (the default), skip it, "
     "or clip its prompt"),
    ("trace_block_tokens", 0.5, "f.slo.yaml:3 workloads.w.trace_block_tokens: expected an integer >= 1, got 0.5 -- "
     "the tokens per hash id the trace was made with (512 for Mooncake's traces)"),
])
def test_bad_trace_values_name_the_key_and_the_fix(key, value, message):
    assert error({"trace": "t.jsonl", key: value}) == message


def test_trace_keys_without_a_trace():
    assert error({"class": "chat", "trace_speed": 2}) == \
        "f.slo.yaml:3 workloads.w.trace_speed: trace_speed shapes a trace replay, but the workload has no trace " \
        "-- set trace: PATH (a Mooncake JSONL file) or drop trace_speed"


@pytest.mark.parametrize("key, value, instead", [
    ("prompt_tokens", 512, "the rows give each request's input_length and output_length"),
    ("output_tokens", 64, "the rows give each request's input_length and output_length"),
    ("rate", 2, "the rows give each request's arrival (timestamp, delay); replay faster or slower with "
     "trace_speed, fewer rows with trace_rows or trace_start_ms"),
    ("concurrency", 4, "the rows give each request's arrival (timestamp, delay); replay faster or slower with "
     "trace_speed, fewer rows with trace_rows or trace_start_ms"),
    ("samples", 40, "the rows are the requests, one each; replay fewer with trace_rows"),
    ("requests", 40, "the rows are the requests, one each; replay fewer with trace_rows"),
    ("shared_prefix_groups", {"groups": 2, "tokens": 64}, "the rows' hash_ids declare which prompt blocks are "
     "shared"),
    ("prompt_sweep", [64, 128], "a trace replays its own sessions (session_id, delay); a prompt sweep or an agent "
     "session is a workload of its own"),
    ("steps", 3, "a trace replays its own sessions (session_id, delay); a prompt sweep or an agent session is a "
     "workload of its own"),
])
def test_keys_a_trace_workload_does_not_take(key, value, instead):
    assert error({"trace": "t.jsonl", key: value}) == \
        f"f.slo.yaml:3 workloads.w.{key}: a trace workload does not take {key}: {instead} -- drop {key}"


def test_a_prompt_length_distribution_clashes_too():
    assert error({"trace": "t.jsonl", "prompt_tokens": {"distribution": "fixed", "value": 5}}).startswith(
        "f.slo.yaml:3 workloads.w.prompt_tokens: a trace workload does not take prompt_tokens")


def test_a_class_is_refused():
    assert error({"trace": "t.jsonl", "class": "chat"}) == \
        "f.slo.yaml:3 workloads.w.class: a trace workload has no class ('chat' gives lengths the trace's rows " \
        "replace) -- drop class and give its budgets in slo: (e.g. {ttft_p95: 500ms, tpot_p95: 50ms})"
    assert make_workload("w", {"trace": "t.jsonl", "class": "custom"}, WHERE).klass == "custom"


def test_a_run_wide_samples_auto_leaves_a_trace_workload_alone():
    from pytest_llm_latency.core.spec.workload import with_statistics

    w = make_workload("w", {"trace": "t.jsonl", "slo": {"ttft_p95": "1s"}}, WHERE)
    assert not with_statistics(w, {}, WHERE, "auto").sequential


def test_the_yaml_file_and_the_marker_accept_the_keys():
    from pytest_llm_latency.plugin.fixtures import split_marker
    from pytest_llm_latency.plugin.slofile import parse_slo_file

    text = "workloads:\n  replay:\n    trace: traces/t.jsonl\n    trace_speed: 2\n    slo: {ttft_p99: 2s}\n"
    (w,) = parse_slo_file(text, "f.slo.yaml").workloads
    assert w.trace == TraceSpec("traces/t.jsonl", speed=2.0)
    spec, target, roof = split_marker({"trace": "t.jsonl", "trace_rows": 4, "ttft_p95": "1s"}, "test_x")
    assert spec == {"trace": "t.jsonl", "trace_rows": 4, "slo": {"ttft_p95": "1s"}} and not target and not roof
    assert make_workload("test_x", spec).trace == TraceSpec("t.jsonl", rows=4)
    with pytest.raises(ConfigError, match=r"^f.slo.yaml:4 workloads.replay.samples: a trace workload does not "):
        parse_slo_file(text.replace("    trace_speed: 2\n", "    samples: 5\n"), "f.slo.yaml")
