"""Reading a structured workload's JSON Schema file (issue 36, ``structured: {json_schema: FILE}``).
Here, in the plugin layer, because ``core`` does no I/O and the plugin knows the folder a relative
path is resolved against: the SLO file's for a YAML workload, the test file's for a marker or
``measure()`` (``Path(item.path).parent``, as for ``trace:`` and ``roofline.gguf``).  A file that is
missing, not JSON, or not a JSON Schema is a ``ConfigError`` naming the key, the file and the fix,
before any request is sent.  ``jsonschema`` is imported only here and in the send path's validation."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ..client.load.schema_check import json_path, short, validator_class
from ..core.errors import ConfigError
from ..core.spec.structured_spec import StructuredSpec

FIX = ("-- structured: {json_schema: FILE} names a JSON Schema file (an object like {\"type\": \"object\", "
       "\"properties\": {...}, \"required\": [...]}), relative to the folder of the file that sets it")


def schema_path(spec: StructuredSpec, base_dir: Path) -> Path:
    """``json_schema:`` resolved: ``~`` expanded, a relative path against ``base_dir``."""
    path = Path(spec.path).expanduser()
    return path if path.is_absolute() else base_dir / path


def load_schema(spec: StructuredSpec, base_dir: Path) -> StructuredSpec:
    """``spec`` with its schema read and checked, and its path resolved."""
    path = schema_path(spec, base_dir)
    where = spec.where or "structured.json_schema"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{where}: JSON Schema file {str(path)!r} not found (resolved from {spec.path!r} against "
                          f"{str(base_dir)!r}) {FIX}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read JSON Schema file {str(path)!r}: {exc} {FIX}") from None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: {str(path)!r} is not JSON ({exc}) {FIX}") from None
    problem = schema_error(schema)
    if problem is not None:
        raise ConfigError(f"{where}: {str(path)!r} is not a JSON Schema: {problem} {FIX}")
    return replace(spec, path=str(path), schema=schema)


def schema_error(schema: object) -> str | None:
    """None when ``schema`` is a JSON Schema object (checked against the metaschema its ``$schema``
    names, Draft 2020-12 when none); else what is wrong."""
    if not isinstance(schema, dict):
        return f"expected a JSON object, got {type(schema).__name__}"
    from jsonschema.exceptions import SchemaError

    cls = validator_class(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        return f"at {json_path(exc.absolute_path)}: {short(exc.message)} ({cls.__name__})"
    return None
