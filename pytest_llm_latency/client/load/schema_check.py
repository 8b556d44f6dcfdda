"""Is a structured answer valid?  The answer text of a constrained request (``core.measure.structured``)
parsed as JSON and validated against its schema with ``jsonschema`` (imported on the first
structured answer: the plugin loads in every pytest run), the validator built once per schema.
Runs in the send path (``client.load.send_one``), in the test process and in every worker process."""
from __future__ import annotations

import json
from typing import Any, Mapping

from ...core.measure.record import RequestRecord
from ...core.measure.structured import SCHEMA_VIOLATION  # noqa: F401  (the kind of its failures)

#: how much of the answer and of the validator's message a failure quotes
QUOTE_CHARS = 160
_validators: dict[str, Any] = {}


def answer_text(rec: RequestRecord) -> str:
    """The answer: the kept content (``RecordBuilder(keep_output=True)``), else the text of the
    non-reasoning chunks in arrival order."""
    if rec.content_parts is not None:
        return "".join(rec.content_parts)
    return "".join(c.text for c in rec.chunks if not c.reasoning and c.text)


def short(text: str, n: int = QUOTE_CHARS) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def json_path(parts) -> str:
    """A jsonschema error's ``absolute_path`` as ``$.items[1].name``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def validator_class(schema: Mapping[str, Any]):
    """The validator class ``schema``'s ``$schema`` names, Draft 2020-12 when none or unknown."""
    from jsonschema.validators import validator_for as cls_for

    return cls_for(schema, default=_draft202012())


def validator_for(schema: Mapping[str, Any]):
    """A validator of ``validator_class(schema)``, cached by the schema's text."""
    key = json.dumps(schema, sort_keys=True, default=str)
    v = _validators.get(key)
    if v is None:
        v = _validators[key] = validator_class(schema)(schema)
    return v


def _draft202012():
    from jsonschema import Draft202012Validator

    return Draft202012Validator


def schema_problem(text: str, schema: Mapping[str, Any]) -> str | None:
    """None when ``text`` is a JSON document valid for ``schema``; else what is wrong, short: not JSON
    (with the parser's message), or the validator's first error (best match) with its path."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "an empty answer" if not text.strip() else f"{exc.msg} at character {exc.pos}"
        return f"the answer is not JSON ({what}): {short(text)!r}"
    except ValueError as exc:  # 5000-digit numbers
        what = str(exc)
        return f"the answer is not JSON ({what}): {short(text)!r}"
    from jsonschema.exceptions import best_match

    err = best_match(validator_for(schema).iter_errors(doc))
    if err is None:
        return None
    return (f"the answer does not match the schema at {json_path(err.absolute_path)}: {short(err.message)} "
            f"(answer: {short(text, 80)!r})")
