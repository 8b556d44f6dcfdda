"""Mooncake trace rows (core.spec.trace): every bad-input case with its exact message, string ids,
sessions, selection, the schedule at a speed-up, and the file layer (gzip, a missing file)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.trace import (TraceRow, TraceSpec, arrival_offsets_ms, describe, read_trace,
    select_rows, sessions, turn_delay_ms)
from pytest_llm_latency.plugin.trace_load import load_trace

FIX_ROW = 'each line must be one JSON object such as {"timestamp": 0, "input_length": 655, "output_length": 52, ' \
          '"hash_ids": [46, 47]}'


def lines(*rows) -> list[str]:
    return [r if isinstance(r, str) else json.dumps(r) for r in rows]


def row(ts=0, inp=600, out=10, ids=(1, 2), **kw) -> dict:
    d = {"timestamp": ts, "input_length": inp, "output_length": out, "hash_ids": list(ids), **kw}
    return {k: v for k, v in d.items() if v is not None}


def fails(*rows, block: int = 512) -> str:
    with pytest.raises(ConfigError) as exc:
        read_trace(lines(*rows), "t.jsonl", block)
    return str(exc.value)


def test_rows_are_read_with_their_row_index_and_line_number_and_string_ids():
    rows = read_trace(["", json.dumps(row(0, ids=("a1", "b2"))), "  \n", json.dumps(row(5.5, ids=(7,)))],
                      "t.jsonl", 512)
    assert rows == [TraceRow(0, 2, 0.0, None, 600, 10, ("a1", "b2")), TraceRow(1, 4, 5.5, None, 600, 10, (7,))]
    assert all(r.first_turn for r in rows)


def test_absent_or_null_hash_ids_share_nothing_and_unknown_fields_are_ignored():
    rows = read_trace(lines({"timestamp": 0, "input_length": 3, "output_length": 1, "model": "m", "chat_id": 4},
                            {"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": None}), "t", 512)
    assert [r.hash_ids for r in rows] == [(), ()]


def test_bad_json_and_a_line_that_is_no_object():
    assert fails(json.dumps(row()), '{"timestamp": 0,') == \
        f"t.jsonl:2: row: not valid JSON (Expecting property name enclosed in double quotes at column 17) -- {FIX_ROW}"
    assert fails("[1, 2]") == f"t.jsonl:1: row: expected a JSON object, got list -- {FIX_ROW}"


def test_empty_trace_names_the_file():
    assert fails("", "  ") == f"t.jsonl: the trace has no rows -- {FIX_ROW}"


@pytest.mark.parametrize("field, fix", [
    ("input_length", "give the prompt's length in tokens (an integer >= 1)"),
    ("output_length", "give the response's length in tokens (an integer >= 1)"),
])
def test_a_missing_length(field, fix):
    r = row()
    del r[field]
    assert fails(r) == f"t.jsonl:1: {field}: missing -- {fix}"


def test_a_missing_length_names_a_near_field_and_a_literal_prompt():
    assert fails({"timestamp": 0, "input_tokens": 5, "output_length": 1}) == \
        "t.jsonl:1: input_length: missing; did you mean 'input_tokens'? -- give the prompt's length in tokens " \
        "(an integer >= 1)"
    assert fails({"timestamp": 0, "text_input": "hi", "output_length": 1}) == \
        "t.jsonl:1: input_length: missing (this row has text_input, a literal prompt, which is not replayed: " \
        "prompts are built from input_length and hash_ids so that their lengths are exact) -- give the prompt's " \
        "length in tokens (an integer >= 1)"


def test_a_missing_timestamp():
    assert fails(row(), row(ts=None)) == \
        "t.jsonl:2: timestamp: missing on a row without session_id -- give the arrival time in ms from the start " \
        "of the trace (a number >= 0)"


@pytest.mark.parametrize("ts", [-5, "10", True, float("nan")])
def test_a_negative_or_non_numeric_timestamp(ts):
    msg = fails(row(ts=ts)) if ts == ts else fails('{"timestamp": NaN, "input_length": 3, "output_length": 1}')
    shown = "nan" if ts != ts else repr(ts)
    assert msg == f"t.jsonl:1: timestamp: expected a number >= 0, got {shown} -- give the arrival time in ms from " \
                  f"the start of the trace (a number >= 0)"


def test_a_non_monotonic_timestamp_names_both_lines():
    assert fails(row(0), row(900), "", row(850)) == \
        "t.jsonl:4: timestamp: 850 is before 900 at line 2 -- sort the rows by timestamp: first-turn timestamps " \
        "must not decrease down the file"


@pytest.mark.parametrize("value, got", [(0, "0"), (2.5, "2.5"), ("12", "'12'")])
def test_a_bad_length(value, got):
    assert fails(row(inp=value, ids=())) == \
        f"t.jsonl:1: input_length: expected an integer >= 1, got {got} -- give the prompt's length in tokens " \
        f"(an integer >= 1)"


def test_hash_ids_longer_than_the_rows_blocks():
    assert fails(row(inp=1500, ids=(1, 2, 3, 4, 5))) == \
        "t.jsonl:1: hash_ids: has 5 ids but input_length 1500 fills only 3 blocks of 512 tokens -- give at most " \
        "3 ids, or set trace_block_tokens to the block size the trace was made with"
    assert read_trace(lines(row(inp=1500, ids=(1, 2, 3, 4, 5))), "t", 300)[0].hash_ids == (1, 2, 3, 4, 5)


@pytest.mark.parametrize("ids, got", [("1,2", "'1,2'"), ([1, [2]], "[2]"), ([True], "True")])
def test_bad_hash_ids(ids, got):
    kind = "a list" if isinstance(ids, str) else "integers or strings"
    assert fails(row(ids=()) | {"hash_ids": ids}) == \
        f"t.jsonl:1: hash_ids: expected {kind}, got {got} -- give a list of block ids (integers or strings), one " \
        f"per block of trace_block_tokens tokens"


def test_a_misspelt_field_is_an_error_naming_the_field():
    r = row(ids=())
    del r["hash_ids"]
    assert fails(r | {"hash_id": [1]}) == \
        "t.jsonl:1: hash_id: unknown field; did you mean 'hash_ids'? -- rename it (known fields: timestamp, delay, " \
        "input_length, output_length, hash_ids, session_id, class; other fields are ignored)"
    assert fails(row() | {"session": "a"}).startswith("t.jsonl:1: session: unknown field; did you mean "
                                                               "'session_id'?")


def test_sessions_later_turns_carry_delay_and_integers_become_strings():
    rows = read_trace(lines(row(0, session_id=7), row(100, session_id="b"),
                            {"session_id": 7, "delay": 250, "input_length": 20, "output_length": 5}), "t", 512)
    assert [(r.session_id, r.timestamp_ms, r.delay_ms, r.first_turn) for r in rows] == \
        [("7", 0.0, None, True), ("b", 100.0, None, True), ("7", None, 250.0, False)]
    assert [[r.index for r in s] for s in sessions(rows)] == [[0, 2], [1]]
    assert turn_delay_ms(rows[2], 2.0) == 125.0


def test_delay_on_a_first_turn_and_timestamp_on_a_later_turn():
    assert fails(row(0, session_id="a", delay=10)) == \
        "t.jsonl:1: delay: not allowed on the first turn of session 'a': it is sent at its timestamp -- remove " \
        "delay (it is only for a session's later turns: ms after the previous finished)"
    assert fails(row(ts=None, session_id="a", delay=10)) == \
        "t.jsonl:1: timestamp: missing on the first turn of session 'a' (delay is only for a session's later " \
        "turns) -- give the arrival time in ms from the start of the trace (a number >= 0)"
    assert fails(row(0, session_id="a"), row(5, session_id="a")) == \
        "t.jsonl:2: timestamp: not allowed on a later turn of session 'a' (first turn at line 1): it is sent " \
        "delay ms after the previous turn finished -- replace timestamp with delay"
    assert fails(row(0, session_id="a"), row(None, session_id="a")) == \
        "t.jsonl:2: delay: missing on a later turn of session 'a' (first turn at line 1) -- give the ms after the " \
        "session's previous turn finished (a number >= 0)"
    assert fails(row(0, session_id="a"), row(None, session_id="a", delay=-1)) == \
        "t.jsonl:2: delay: expected a number >= 0, got -1 -- give the ms after the session's previous turn " \
        "finished (a number >= 0)"


def test_a_bad_session_id():
    assert fails(row(session_id="")) == \
        "t.jsonl:1: session_id: expected a non-empty string or an integer, got '' -- give a string or an integer " \
        "naming the session"


def _trace() -> list[TraceRow]:
    # sessionless rows at 0, 1000, 3000; session s starts at 2000 with two later turns; u at 4000
    return read_trace(lines(row(0), row(1000), row(2000, session_id="s"), row(None, session_id="s", delay=50),
                            row(3000), row(None, session_id="s", delay=60), row(4000, session_id="u")), "t", 512)


def test_trace_start_ms_drops_whole_sessions_before_it_and_offsets_count_from_it():
    spec = TraceSpec("t.jsonl", start_ms=2500)
    kept = select_rows(_trace(), spec)
    assert [r.index for r in kept] == [4, 6]  # s (first turn at 2000) goes with its later turns
    assert arrival_offsets_ms(kept, 1.0, 2500) == [500.0, 1500.0]
    assert [r.index for r in select_rows(_trace(), TraceSpec("t.jsonl", start_ms=2000))] == [2, 3, 4, 5, 6]


def test_trace_rows_keeps_the_first_n_rows_in_file_order():
    assert [r.index for r in select_rows(_trace(), TraceSpec("t", rows=4))] == [0, 1, 2, 3]
    assert [r.index for r in select_rows(_trace(), TraceSpec("t", rows=5, start_ms=1000))] == [1, 2, 3, 4, 5]


def test_nothing_left_after_trace_start_ms_names_the_option():
    with pytest.raises(ConfigError) as exc:
        select_rows(_trace(), TraceSpec("t.jsonl", start_ms=5000))
    assert str(exc.value) == "t.jsonl: trace_start_ms 5000 is after the last first-turn timestamp (4000 ms): no " \
                             "rows left -- lower trace_start_ms"


def test_speed_two_halves_the_offsets_and_describe():
    rows = _trace()
    assert arrival_offsets_ms(rows, 1.0) == [0.0, 1000.0, 2000.0, 3000.0, 4000.0]
    assert arrival_offsets_ms(rows, 2.0) == [0.0, 500.0, 1000.0, 1500.0, 2000.0]
    assert describe(TraceSpec("dir/t.jsonl", speed=2), rows) == "trace t.jsonl: 7 rows, 2 sessions, 2.0 s at speed 2"
    assert describe(TraceSpec("t.jsonl"), rows[:1]) == "trace t.jsonl: 1 row, 0 sessions, 0.0 s at speed 1"


def _write(path: Path, rows: list[dict], gz: bool) -> Path:
    data = "\n".join(json.dumps(r) for r in rows).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_load_trace_reads_plain_and_gzip_by_magic_bytes_relative_to_the_folder(tmp_path, gz):
    _write(tmp_path / "traffic.jsonl", [row(0), row(10, ids=("x",)), row(20)], gz)  # gzip whatever the name
    rows = load_trace(TraceSpec("traffic.jsonl", rows=2), tmp_path)
    assert [(r.index, r.hash_ids) for r in rows] == [(0, (1, 2)), (1, ("x",))]


def test_load_trace_errors_name_the_resolved_file(tmp_path):
    _write(tmp_path / "t.jsonl.gz", [row(0), row(-1)], True)
    with pytest.raises(ConfigError, match=r"t\.jsonl\.gz:2: timestamp: expected a number >= 0, got -1 -- "):
        load_trace(TraceSpec("t.jsonl.gz"), tmp_path)


def test_a_missing_trace_names_the_path_and_the_folder(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_trace(TraceSpec("traces/none.jsonl"), tmp_path)
    assert str(exc.value) == (f"{tmp_path / 'traces' / 'none.jsonl'}: no such trace file (trace: is resolved against "
                              f"{tmp_path}) -- give the path of a Mooncake JSONL trace, relative to the SLO file's "
                              f"(or test file's) folder, or absolute")


def test_a_damaged_gzip_is_named(tmp_path):
    data = gzip.compress(b'{"timestamp": 0, "input_length": 3, "output_length": 1}\n' * 50)
    (tmp_path / "t.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match=r"t\.gz:\d+: row: the gzip stream is damaged \(.*\) -- compress the trace "
                                          r"again"):
        load_trace(TraceSpec("t.gz"), tmp_path)
