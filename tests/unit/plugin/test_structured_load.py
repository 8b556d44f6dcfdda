"""Issue 36: reading a structured workload's JSON Schema file (``plugin.structured_load``): resolved
against the given folder, and every bad file a ConfigError naming the key, the file and the fix."""
from __future__ import annotations

import json

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.structured_spec import StructuredSpec
from pytest_llm_latency.plugin.structured_load import load_schema, schema_error

WHERE = "chat.slo.yaml:7 workloads.chat.structured.json_schema"


def spec(path: str = "schemas/p.json") -> StructuredSpec:
    return StructuredSpec(path, WHERE)


def test_a_relative_path_is_read_from_the_given_folder(tmp_path):
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "p.json").write_text(json.dumps({"type": "object"}))
    loaded = load_schema(spec(), tmp_path)
    assert loaded.schema == {"type": "object"} and loaded.path == str(tmp_path / "schemas" / "p.json")
    assert load_schema(spec(str(tmp_path / "schemas" / "p.json")), tmp_path / "elsewhere").schema == {"type": "object"}


@pytest.mark.parametrize("text, words", [
    (None, ["not found", "resolved from 'schemas/p.json'"]),
    ("{", ["is not JSON"]),
    ('"a string"', ["is not a JSON Schema: expected a JSON object, got str"]),
    ('{"type": 3}', ["is not a JSON Schema: at $.type:", "Draft202012Validator"]),
    ('{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3}',
     ["is not a JSON Schema: at $.exclusiveMinimum:", "Draft4Validator"]),  # draft 4's boolean form
])
def test_every_bad_file_names_key_file_and_fix(tmp_path, text, words):
    if text is not None:
        (tmp_path / "schemas").mkdir()
        (tmp_path / "schemas" / "p.json").write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_schema(spec(), tmp_path)
    msg = str(exc.value)
    assert msg.startswith(WHERE) and "schemas/p.json" in msg and "structured: {json_schema: FILE} names" in msg
    assert all(w in msg for w in words), msg


def test_an_unknown_dialect_is_checked_against_2020_12_quietly(recwarn):
    assert schema_error({"$schema": "https://example.com/mine", "type": "object"}) is None
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
