"""The plugin's results JSON as a test reads it: loaded and validated against the shipped schema."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path


def validated_results(path: Path) -> dict:
    """The results document at ``path`` (``--llm-latency-json``), after ``jsonschema`` validation
    against ``pytest_llm_latency/data/results.schema.json`` (a mismatch raises)."""
    import jsonschema

    doc = json.loads(Path(path).read_text())
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    jsonschema.validate(doc, schema)
    return doc
