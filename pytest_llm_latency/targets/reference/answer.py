"""What a chat-style response's generated tokens carry, on every chat-style API (chat completions,
Responses, Messages): reasoning first, then the answer: free text, a JSON document valid against the
request's schema (structured output), or one tool call's arguments.  Protocol-independent: the API
modules only format what ``Answer.split`` hands them.  The rules: docs/servers.md#what-its-apis-honour.

* Reasoning: tokens ``1..R`` are reasoning words, ``R = min(reasoning budget, planned tokens)``;
  the budget is ``reasoning_budget(thinking_tokens, effort)``.
* The answer's ``A = planned - R`` tokens.  Free text: the generated words.  A JSON document or a
  tool call's arguments: the text cut into nearly equal character runs (``spread``), so it is
  complete (and parses) exactly at the last token.  A tool call's first answer token carries the
  name only; its arguments are spread over the other ``A - 1`` (all at once when ``A == 1``).
"""
from __future__ import annotations

import json
from typing import Any

from . import tokenizer

#: effort -> reasoning tokens as a function of the ``thinking_tokens`` knob N
EFFORTS = {"none": lambda n: 0, "minimal": lambda n: n // 4, "low": lambda n: n // 2,
           "medium": lambda n: n, "high": lambda n: 2 * n}
CHARS_PER_TOKEN = 4          # a structured answer is padded to about 4 characters per answer token
_MAX_DEPTH = 8


def reasoning_budget(thinking_tokens: int, effort: Any) -> int:
    """Reasoning tokens for an effort: low = N // 2, medium (and None) = N, high = 2 N,
    minimal = N // 4, none = 0 (N = ``thinking_tokens``).  An unknown effort raises ValueError."""
    rule = EFFORTS.get("medium" if effort is None else effort) if isinstance(effort, (str, type(None))) else None
    if rule is None:
        raise ValueError(f"reasoning effort must be one of {', '.join(EFFORTS)}, got {effort!r}")
    return rule(thinking_tokens)


def spread(text: str, pieces: int, first: int, last: int) -> str:
    """Pieces ``first..last`` (1-based) of ``text`` cut into ``pieces`` nearly equal character
    runs: piece k = ``text[round(L (k-1) / pieces) : round(L k / pieces)]``, L = ``len(text)``."""
    pieces = max(pieces, 1)
    cut = lambda k: round(len(text) * min(max(k, 0), pieces) / pieces)  # noqa: E731
    return text[cut(first - 1):cut(last)]


def tool_arguments(n: int) -> str:
    """A tool call's arguments for ``n`` argument tokens: JSON with non-ASCII text, an escaped quote
    and a backslash, so the fragments split mid-string, mid-escape and inside multi-byte characters."""
    ids = " ".join(tokenizer.WORDS[(i * 7) % len(tokenizer.WORDS)] for i in range(max(n // 2, 1)))
    return json.dumps({"id": ids, "limit": n, "note": 'café – 東京 "quoted" \\ ✓'}, ensure_ascii=False)


# -- structured output: an instance of a JSON schema ------------------------------------------
def _resolve(schema: Any, root: dict, depth: int = 0) -> dict:
    """Follow a local ``$ref``, take the first ``anyOf`` / ``oneOf`` branch, merge ``allOf``."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for name in ref[2:].split("/"):
            target = target.get(name, {}) if isinstance(target, dict) else {}
        return _resolve(target, root, depth + 1)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            branch = next((b for b in schema[key] if not (isinstance(b, dict) and b.get("type") == "null")),
                          schema[key][0])
            rest = {k: v for k, v in schema.items() if k != key}
            return _resolve({**rest, **_resolve(branch, root, depth + 1)}, root, depth + 1)
    if isinstance(schema.get("allOf"), list):
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for sub in schema["allOf"]:
            part = _resolve(sub, root, depth + 1)
            merged["properties"] = {**merged.get("properties", {}), **part.get("properties", {})}
            merged["required"] = list(merged.get("required", [])) + list(part.get("required", []))
            merged.update({k: v for k, v in part.items() if k not in ("properties", "required")})
        return merged
    return schema


def _type(schema: dict) -> str | None:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), t[0] if t else None)
    if t is None:
        t = "object" if "properties" in schema else "array" if "items" in schema else None
    return t if isinstance(t, str) else None


_FORMATS = {"date-time": "2025-01-01T00:00:00Z", "date": "2025-01-01", "time": "00:00:00Z",
            "email": "user@example.com", "uri": "https://example.com/", "uuid": "00000000-0000-4000-8000-000000000000"}


def _number(schema: dict, integer: bool) -> int | float:
    lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    value: float = lo + (1 if "exclusiveMinimum" in schema and "minimum" not in schema else 0)
    value = max(value, 0) if "minimum" not in schema and "exclusiveMinimum" not in schema else value
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    if hi is not None and value >= hi:
        value = hi if "maximum" in schema else hi - 1
    return int(value) if integer else float(value)


def instance(schema: Any, root: dict | None = None, depth: int = 0) -> Any:
    """A small value valid against ``schema``: object (every listed property; an open object with
    none gets ``answer``), array (``max(minItems, 1)`` items, within ``maxItems``), string (a word,
    within min/maxLength; a sample for common formats), integer / number (0, moved into
    minimum/maximum), boolean (true), null, ``enum`` / ``const`` (the first value)."""
    root = schema if root is None else root
    s = _resolve(schema, root if isinstance(root, dict) else {})
    if "const" in s:
        return s["const"]
    if isinstance(s.get("enum"), list) and s["enum"]:
        return s["enum"][0]
    t = _type(s)
    if t == "object":
        props = s["properties"] if isinstance(s.get("properties"), dict) else {}
        if depth >= _MAX_DEPTH:
            return {}
        if not props and s.get("additionalProperties") is not False:
            return {"answer": ""}
        return {k: instance(v, root, depth + 1) for k, v in props.items()}
    if t == "array":
        n = max(int(s.get("minItems", 1)), 1)
        n = min(n, int(s.get("maxItems", n)))
        return [instance(s.get("items", {}), root, depth + 1) for _ in range(n)] if depth < _MAX_DEPTH else []
    if t in ("integer", "number"):
        return _number(s, t == "integer")
    if t == "boolean":
        return True
    if t == "null":
        return None
    if s.get("format") in _FORMATS:
        return _FORMATS[s["format"]]
    text = "value"[:int(s.get("maxLength", 5))]
    return text + "x" * max(0, int(s.get("minLength", 0)) - len(text))


def _padding_slot(value: Any, schema: Any, root: dict, depth: int = 0) -> list | None:
    """The path to the first string that can grow freely (no maxLength, enum, const, pattern or format)."""
    s = _resolve(schema, root)
    if isinstance(value, str):
        free = not any(k in s for k in ("maxLength", "enum", "const", "pattern", "format"))
        return [] if free else None
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, dict):
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        for key, v in value.items():
            sub = _padding_slot(v, props.get(key, {}) if props else {}, root, depth + 1)
            if sub is not None:
                return [key] + sub
    if isinstance(value, list) and "maxLength" not in s:
        for i, v in enumerate(value):
            sub = _padding_slot(v, s.get("items", {}), root, depth + 1)
            if sub is not None:
                return [i] + sub
    return None


def _violate(value: Any, schema: dict, root: dict) -> Any:
    """Make ``value`` invalid for ``schema``: drop the first required property; else give the root
    the wrong type (an object becomes an array of its values, anything else an object)."""
    s = _resolve(schema, root)
    required = [k for k in s.get("required", []) if isinstance(value, dict) and k in value]
    if required:
        return {k: v for k, v in value.items() if k != required[0]}
    if _type(s) == "object":
        return list(value.values()) if isinstance(value, dict) else []
    if _type(s) is not None:
        return {"answer": value}
    return _Broken(value)


class _Broken:
    """A schema that accepts every JSON value: the violation is a document cut short (not JSON)."""

    def __init__(self, value: Any):
        self.value = value


def structured_text(schema: Any, answer_tokens: int, *, violate: bool = False) -> str:
    """The JSON text of a structured answer of ``answer_tokens`` tokens: ``instance(schema)``
    (invalid for the schema with ``violate``: the ``schema_violation`` fault), its first free string
    padded with words (else whitespace after the opening bracket) to ``CHARS_PER_TOKEN x
    answer_tokens`` characters, so each token carries text and the document parses only when complete."""
    root = schema if isinstance(schema, dict) else {}
    value = instance(root, root)
    broken = False
    if violate:
        value = _violate(value, root, root)
        if isinstance(value, _Broken):
            value, broken = value.value, True
    need = CHARS_PER_TOKEN * max(answer_tokens, 1) - len(json.dumps(value))
    slot = _padding_slot(value, root, root) if not broken and need > 0 else None
    if slot is not None:
        filler = " ".join(tokenizer.WORDS[(i * 11) % len(tokenizer.WORDS)] for i in range(need // 3 + 2))
        if slot:
            parent = value
            for key in slot[:-1]:
                parent = parent[key]
            parent[slot[-1]] = (parent[slot[-1]] + " " + filler)[:len(parent[slot[-1]]) + need]
        else:
            value = (value + " " + filler)[:len(value) + need]
    text = json.dumps(value)
    if need > 0 and slot is None and text[:1] in "{[":
        text = text[0] + " " * need + text[1:]
    return text[:-1] if broken else text


# -- one response's plan ------------------------------------------------------------------
class Answer:
    """The split of a response's ``planned`` tokens into reasoning and answer (module docstring)."""

    def __init__(self, planned: int, *, reasoning: int = 0, tool: str | None = None, schema: Any = None,
                 violate: bool = False):
        self.planned = max(planned, 1)
        self.reasoning = min(max(reasoning, 0), self.planned)   # R
        self.answer_tokens = self.planned - self.reasoning       # A
        self.tool, self.schema, self.violate = tool, schema, violate
        self.kind = "tool" if tool else "json" if schema is not None else "text"
        self._doc: str | None = None

    @property
    def document(self) -> str:
        """The whole JSON text the answer tokens carry (tool arguments or the structured answer)."""
        if self._doc is None:
            a = self.answer_tokens
            self._doc = tool_arguments(max(a - 1, 1)) if self.kind == "tool" else \
                structured_text(self.schema, a, violate=self.violate)
        return self._doc

    def split(self, words: str, prev: int, total: int) -> tuple[str, str]:
        """(reasoning text, answer text) of tokens ``prev+1..total``, whose generated words are
        ``words`` (``" w1 w2 ..."``, one per token)."""
        r = self.reasoning
        if total <= r:
            return words, ""
        reasoning = ""
        if prev < r:
            parts = words.split(" ")  # parts[0] == ""
            k = r - prev
            reasoning, words = "".join(" " + w for w in parts[1:1 + k]), "".join(" " + w for w in parts[1 + k:])
        return reasoning, self.answer_piece(words, max(prev, r) + 1 - r, total - r)

    def answer_piece(self, words: str, first: int, last: int) -> str:
        """The answer text of answer tokens ``first..last`` (1-based)."""
        if self.kind == "text":
            return words
        if self.kind == "json":
            return spread(self.document, self.answer_tokens, first, last)
        if self.answer_tokens == 1:
            return self.document
        return spread(self.document, self.answer_tokens - 1, first - 1, last - 1)

    def reasoning_count(self, completion_tokens: int) -> int:
        """Reasoning tokens among ``completion_tokens`` generated ones (usage's reasoning_tokens)."""
        return min(self.reasoning, completion_tokens)
