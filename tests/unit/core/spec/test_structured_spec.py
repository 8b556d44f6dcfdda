"""Issue 36: the ``structured:`` workload key, the ``structured_tpot_overhead_max`` budget, the per-API
request fields, the prompts of a structured run, and the overhead arithmetic (core, pure)."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.measure.structured import (COMPARISON, CONSTRAINED, SchemaAsk, pair_roles,
    tpot_overhead)
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.spec.structured_spec import (OVERHEAD_BUDGET, StructuredSpec, schema_fields,
    structured_prompts)
from pytest_llm_latency.core.spec.workload import make_workload, with_budgets

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_the_key_is_parsed_on_any_workload_and_the_file_is_not_read_in_core():
    w = make_workload("chat", {"structured": {"json_schema": "schemas/person.schema.json"}})
    assert w.structured == StructuredSpec("schemas/person.schema.json", "structured.json_schema")
    assert w.structured.schema is None and not w.structured.compares
    assert w.structured.name == "person"  # the file's stem: OpenAI's json_schema.name


def test_the_overhead_budget_sets_the_twins_and_a_fixed_sample_count():
    w = make_workload("chat", {"structured": {"json_schema": "a.json"}, "slo": {OVERHEAD_BUDGET: 0.2}})
    assert w.structured.overhead_max == 0.2 and w.structured.compares
    assert not w.sequential and w.samples == 20  # not samples: auto (the twins would be judged as samples)
    assert OVERHEAD_BUDGET not in w.budget_map()  # judged by core.checks.structured, not as a latency budget


@pytest.mark.parametrize("value, words", [
    ("schema.json", ["structured", "expected a mapping", "json_schema"]),
    ({"json_schema": ""}, ["structured.json_schema", "expected a file path", "json_schema: schemas/answer.json"]),
    ({"json_schema": 3}, ["structured.json_schema", "int 3", "give the path of a JSON Schema file"]),
    ({"schema": "a.json"}, ["structured.schema", "unknown key 'schema'", "allowed: json_schema"]),
])
def test_a_bad_key_is_a_config_error_naming_key_and_fix(value, words):
    with pytest.raises(ConfigError) as exc:
        make_workload("chat", {"structured": value})
    assert all(w in str(exc.value) for w in words), str(exc.value)


@pytest.mark.parametrize("spec, words", [
    ({"slo": {OVERHEAD_BUDGET: 0.2}}, ["slo.structured_tpot_overhead_max", "needs a structured workload",
                                       "structured: {json_schema: FILE}"]),
    ({"structured": {"json_schema": "a.json"}, "slo": {OVERHEAD_BUDGET: -1}}, ["a fraction >= 0", "-1"]),
    ({"structured": {"json_schema": "a.json"}, "slo": {OVERHEAD_BUDGET: "20%"}}, ["a fraction >= 0", "'20%'"]),
    ({"structured": {"json_schema": "a.json"}, "samples": "auto", "slo": {OVERHEAD_BUDGET: 0.2}},
     ["samples", "samples: auto does not combine", "samples: N"]),
    ({"structured": {"json_schema": "a.json"}, "steps": 3}, ["structured", "agent sessions"]),
])
def test_budget_and_combination_errors_name_key_and_fix(spec, words):
    with pytest.raises(ConfigError) as exc:
        make_workload("chat", spec)
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_a_marker_budget_sets_the_overhead_and_needs_the_key():
    w = make_workload("chat", {"structured": {"json_schema": "a.json"}, "samples": 10})
    assert with_budgets(w, {OVERHEAD_BUDGET: 0.5}, "marker").structured.overhead_max == 0.5
    with pytest.raises(ConfigError, match="marker structured_tpot_overhead_max: .*needs a structured workload"):
        with_budgets(make_workload("chat", {"samples": 10}), {OVERHEAD_BUDGET: 0.5}, "marker")


@pytest.mark.parametrize("api, expected", [
    ("openai-chat", {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
                     "ignore_eos": False, "min_tokens": 0}),
    ("openai-completions", {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
                            "json_schema": SCHEMA, "ignore_eos": False, "min_tokens": 0}),
    ("openai-responses", {"text": {"format": {"type": "json_schema", "name": "p", "schema": SCHEMA}},
                          "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
                          "ignore_eos": False, "min_tokens": 0}),
    ("anthropic-messages", {"output_format": {"type": "json_schema", "schema": SCHEMA}}),
    ("ollama", {"format": SCHEMA}),
    ("ollama-chat", {"format": SCHEMA}),
])
def test_each_api_carries_the_schema_in_its_own_field(api, expected):
    assert schema_fields(api, "p", SCHEMA) == expected


def test_an_unknown_api_is_a_config_error():
    with pytest.raises(ConfigError, match="no request field is known for api 'grpc'"):
        schema_fields("grpc", "p", SCHEMA)


def test_pairs_alternate_which_goes_first():
    assert pair_roles(3) == [CONSTRAINED, COMPARISON, COMPARISON, CONSTRAINED, CONSTRAINED, COMPARISON]
    roles = pair_roles(10)
    assert roles.count(CONSTRAINED) == roles.count(COMPARISON) == 10
    assert [roles[2 * i] for i in range(10)].count(CONSTRAINED) == 5  # first in half the pairs


def test_structured_prompts_interleave_the_samples_only():
    prompts = [Prompt("", f"salt{i} body", 8, 8) for i in range(2 + 6 + 1)]  # 2 warm-up, 3 pairs, 1 spare
    spec = StructuredSpec("p.json", schema=SCHEMA)
    out = structured_prompts(prompts, spec, first=2, pairs=3)
    assert [p.user for p in out] == [p.user for p in prompts]  # each keeps its own salt
    assert [p.structured.role for p in out] == [CONSTRAINED, CONSTRAINED, *pair_roles(3), CONSTRAINED]
    assert all(p.structured.schema is SCHEMA and p.structured.name == "p" for p in out)
    without = structured_prompts(prompts, spec, first=2, pairs=0)
    assert {p.structured.role for p in without} == {CONSTRAINED}
    with pytest.raises(ValueError, match="has not been read"):
        structured_prompts(prompts, StructuredSpec("p.json"), first=0, pairs=1)


def test_a_schema_ask_refuses_an_unknown_role():
    with pytest.raises(ValueError, match="role"):
        SchemaAsk("p", SCHEMA, "both")


def test_overhead_is_the_ratio_of_the_p50s_minus_one():
    assert tpot_overhead([12.0, 12.0, 100.0], [10.0, 10.0, 10.0]) == pytest.approx(0.2)  # medians: the stall is out
    assert tpot_overhead([9.0], [10.0]) == pytest.approx(-0.1)
    assert tpot_overhead([], [10.0]) is None and tpot_overhead([10.0], []) is None
    assert tpot_overhead([10.0], [0.0]) is None
