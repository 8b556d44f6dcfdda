"""Mooncake-trace replay, the pure part (issue 27): the row format, selection and the schedule.
The workload keys (``TraceSpec``, re-exported here): ``core.spec.trace_spec``.  Token accounting
(context fit, declared cache hits): ``core.spec.trace_tokens``.
Reading the file (``.jsonl`` / ``.jsonl.gz``): ``files.trace_file``; loading it for a workload:
``plugin.trace_load``.  Pure stdlib, no I/O: ``read_trace`` takes the lines.

The format (Mooncake JSONL as AIPerf reads it), the reading rules, the error messages, the selection
(``trace_start_ms``, ``trace_rows``) and the schedule: docs/trace-replay.md#the-format and
docs/trace-replay.md#reading-rules-in-detail.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .budgets import did_you_mean
from ..errors import ConfigError
# the workload keys live in trace_spec; their names are re-exported from here
from .trace_spec import (OVERLONG, TRACE_CLASHES, TRACE_KEYS, TraceSpec, is_number, parse_trace_spec,  # noqa: F401
    trace_workload_spec)

FIELDS = ("timestamp", "delay", "input_length", "output_length", "hash_ids", "session_id", "class")
EXAMPLE_ROW = '{"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}'
_FIX = {
    "timestamp": "give the arrival time in ms from the start of the trace (a number >= 0)",
    "delay": "give the ms after the session's previous turn finished (a number >= 0)",
    "input_length": "give the prompt's length in tokens (an integer >= 1)",
    "output_length": "give the response's length in tokens (an integer >= 1)",
    "hash_ids": "give a list of block ids (integers or strings), one per block of trace_block_tokens tokens",
    "session_id": "give a string or an integer naming the session",
    "class": "give the row's workload class, a name the workload's slo gives budgets for (slo: {<class>: {...}})",
}


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One row of a trace: ``index`` its 0-based row number in the file (rows, not lines),
    ``line`` its 1-based line number.  ``timestamp_ms`` is set on first turns (and sessionless
    rows), ``delay_ms`` on later turns of a session."""
    index: int
    line: int
    timestamp_ms: float | None
    delay_ms: float | None
    input_length: int
    output_length: int
    hash_ids: tuple[int | str, ...]
    session_id: str | None = None
    klass: str | None = None        # the row's ``class`` (a mixed trace: its class's budgets judge it)

    @property
    def first_turn(self) -> bool:
        """Sent at its timestamp (a sessionless row or a session's first turn)."""
        return self.timestamp_ms is not None


def blocks_of(input_length: int, block_tokens: int) -> int:
    """How many blocks ``input_length`` tokens fill (the last one partial)."""
    return -(-input_length // block_tokens)


def _fail(name: str, line: int, field: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"{name}:{line}: {field}: {problem} -- {fix}")


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _length(obj: Mapping, key: str, name: str, line: int) -> int:
    v = obj.get(key)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise _fail(name, line, key, f"expected an integer >= 1, got {_show(v)}", _FIX[key])
    return v


def _ms(obj: Mapping, key: str, name: str, line: int) -> float:
    v = obj[key]
    if not is_number(v) or v < 0:
        raise _fail(name, line, key, f"expected a number >= 0, got {_show(v)}", _FIX[key])
    return float(v)


def _missing(obj: Mapping, key: str, name: str, line: int, why: str = "") -> ConfigError:
    unknown = [k for k in obj if k not in FIELDS]
    hint = did_you_mean(key, unknown) if unknown else ""
    literal = [k for k in ("text_input", "messages") if k in obj]
    if key == "input_length" and literal:
        why = (f" (this row has {literal[0]}, a literal prompt, which is not replayed: prompts are built from "
               f"input_length and hash_ids so that their lengths are exact)")
    return _fail(name, line, key, f"missing{why}{hint}", _FIX[key])


_NEAR: dict[str, tuple[str, ...]] = {}  # unknown field name -> the fields it may misspell (a memo)


def _near(key: str) -> tuple[str, ...]:
    near = _NEAR.get(key)
    if near is None:
        import difflib

        near = tuple(f for f in FIELDS if sorted(f) == sorted(key)
                     or difflib.SequenceMatcher(None, key, f).ratio() >= 0.75)
        if len(_NEAR) < 1000:  # bounded, whatever names a file invents
            _NEAR[key] = near
    return near


def _check_fields(obj: Mapping, name: str, line: int) -> None:
    """An unknown field that looks like a misspelling of a field this row lacks is an error."""
    for k in obj:
        if k in FIELDS:
            continue
        near = [f for f in _near(k) if f not in obj]
        if near:
            raise _fail(name, line, k, f"unknown field{did_you_mean(k, near) or f'; did you mean {near[0]!r}?'}",
                        f"rename it (known fields: {', '.join(FIELDS)}; other fields are ignored)")


def _hash_ids(obj: Mapping, name: str, line: int, input_length: int, block_tokens: int) -> tuple[int | str, ...]:
    ids = obj.get("hash_ids")
    if ids is None:
        return ()
    if not isinstance(ids, list):
        raise _fail(name, line, "hash_ids", f"expected a list, got {_show(ids)}", _FIX["hash_ids"])
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, (int, str)):
            raise _fail(name, line, "hash_ids", f"expected integers or strings, got {_show(i)}", _FIX["hash_ids"])
    blocks = blocks_of(input_length, block_tokens)
    if len(ids) > blocks:
        raise _fail(name, line, "hash_ids", f"has {len(ids)} ids but input_length {input_length} fills only "
                    f"{blocks} block{'s' if blocks != 1 else ''} of {block_tokens} tokens",
                    f"give at most {blocks} ids, or set trace_block_tokens to the block size the trace was made "
                    f"with")
    return tuple(ids)


def read_trace(lines: Iterable[str], name: str, block_tokens: int) -> list[TraceRow]:
    """Parse and validate a trace's lines (streamed: each line is dropped once parsed) into rows,
    in file order; ``name`` (the file as the user knows it) starts every error message."""
    rows: list[TraceRow] = []
    first_line: dict[str, int] = {}   # session -> line of its first turn
    last: tuple[float, int] | None = None  # the latest first-turn timestamp and its line
    for line, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            problem = f"not valid JSON ({exc.msg} at column {exc.colno})" if isinstance(exc, json.JSONDecodeError) \
                else f"not valid JSON ({exc})"
            raise _fail(name, line, "row", problem,
                        f"each line must be one JSON object such as {EXAMPLE_ROW}") from None
        if not isinstance(obj, dict):
            raise _fail(name, line, "row", f"expected a JSON object, got {type(obj).__name__}",
                        f"each line must be one JSON object such as {EXAMPLE_ROW}")
        _check_fields(obj, name, line)
        for key in ("input_length", "output_length"):
            if key not in obj:
                raise _missing(obj, key, name, line)
        inp, out = _length(obj, "input_length", name, line), _length(obj, "output_length", name, line)
        ids = _hash_ids(obj, name, line, inp, block_tokens)
        session = obj.get("session_id")
        if isinstance(session, int) and not isinstance(session, bool):
            session = str(session)
        if session is not None and (not isinstance(session, str) or not session):
            raise _fail(name, line, "session_id", f"expected a non-empty string or an integer, got {_show(session)}",
                        _FIX["session_id"])
        klass = obj.get("class")
        if klass is not None and (not isinstance(klass, str) or not klass):
            raise _fail(name, line, "class", f"expected a non-empty string, got {_show(klass)}", _FIX["class"])
        later = session is not None and session in first_line
        ts = delay = None
        if later:
            assert session is not None
            whose = f"a later turn of session {session!r} (first turn at line {first_line[session]})"
            if "timestamp" in obj:
                raise _fail(name, line, "timestamp", f"not allowed on {whose}: it is sent delay ms after the "
                            f"previous turn finished", "replace timestamp with delay")
            if "delay" not in obj:
                raise _missing(obj, "delay", name, line, f" on {whose}")
            delay = _ms(obj, "delay", name, line)
        else:
            whose = f"the first turn of session {session!r}" if session is not None else "a row without session_id"
            if "timestamp" not in obj:
                raise _missing(obj, "timestamp", name, line, f" on {whose}" +
                               (" (delay is only for a session's later turns)" if "delay" in obj else ""))
            if "delay" in obj:
                raise _fail(name, line, "delay", f"not allowed on {whose}: it is sent at its timestamp",
                            "remove delay (it is only for a session's later turns: ms after the previous finished)")
            ts = _ms(obj, "timestamp", name, line)
            if last is not None and ts < last[0]:
                raise _fail(name, line, "timestamp", f"{ts:g} is before {last[0]:g} at line {last[1]}",
                            "sort the rows by timestamp: first-turn timestamps must not decrease down the file")
            last = (ts, line)
            if session is not None:
                first_line[session] = line
        rows.append(TraceRow(len(rows), line, ts, delay, inp, out, ids, session, klass))
    if not rows:
        raise ConfigError(f"{name}: the trace has no rows -- each line must be one JSON object such as {EXAMPLE_ROW}")
    return rows


def select_rows(rows: list[TraceRow], spec: TraceSpec) -> list[TraceRow]:
    """``trace_start_ms`` (whole sessions whose first turn is before it are dropped), then
    ``trace_rows`` (the first N rows left, in file order)."""
    kept = rows
    if spec.start_ms > 0:
        early = {r.index for r in rows if r.timestamp_ms is not None and r.timestamp_ms < spec.start_ms}
        dropped = {r.session_id for r in rows if r.index in early and r.session_id is not None}
        kept = [r for r in rows if r.index not in early and r.session_id not in dropped]
    if spec.rows is not None:
        kept = kept[:spec.rows]
    if not kept:
        last = max(r.timestamp_ms for r in rows if r.timestamp_ms is not None)
        raise ConfigError(f"{spec.path}: trace_start_ms {spec.start_ms:g} is after the last first-turn timestamp "
                          f"({last:g} ms): no rows left -- lower trace_start_ms")
    return kept


def sessions(rows: Iterable[TraceRow]) -> list[list[TraceRow]]:
    """The rows grouped into sessions: each sessionless row its own one-turn session; sessions
    in the order of their first turns (the file's order, which is timestamp order), turns in
    file order."""
    groups: dict[Any, list[TraceRow]] = {}
    for r in rows:
        key = ("row", r.index) if r.session_id is None else ("session", r.session_id)
        groups.setdefault(key, []).append(r)
    return list(groups.values())


def arrival_offsets_ms(rows: Iterable[TraceRow], speed: float, start_ms: float = 0.0) -> list[float]:
    """When each session's first turn is due, in ms after the replay starts, aligned with
    ``sessions(rows)``: ``(timestamp - start_ms) / speed``."""
    out = []
    for turns in sessions(rows):
        ts = turns[0].timestamp_ms
        assert ts is not None, "a session's first turn has a timestamp (read_trace)"
        out.append((ts - start_ms) / speed)
    return out


def turn_delay_ms(row: TraceRow, speed: float) -> float:
    """How long after its previous turn finished a later turn is due: ``delay / speed``."""
    assert row.delay_ms is not None, "only a later turn has a delay"
    return row.delay_ms / speed


def describe(spec: TraceSpec, rows: list[TraceRow]) -> str:
    """One line for the terminal and the JSON: "trace t.jsonl: 16 rows, 2 sessions, 12.0 s at speed 2"
    (sessions: distinct session_ids; seconds: the span of first-turn arrivals after the speed-up,
    the turns' delays not counted)."""
    n_sessions = len({r.session_id for r in rows if r.session_id is not None})
    offsets = arrival_offsets_ms(rows, spec.speed, spec.start_ms) if rows else [0.0]
    plural = lambda n, w: f"{n} {w}{'s' if n != 1 else ''}"  # noqa: E731
    return (f"trace {spec.name}: {plural(len(rows), 'row')}, {plural(n_sessions, 'session')}, "
            f"{max(offsets) / 1000:.1f} s at speed {spec.speed:g}")
