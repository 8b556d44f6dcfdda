"""Trace rows' token accounting (core.spec.trace_tokens): the context check under trace_overlong
(error, skip, clip) and the cache hits a trace declares."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.trace import TraceRow
from pytest_llm_latency.core.spec.trace_tokens import DeclaredCache, block_lengths, check_context, declared_hits


def first(index: int, inp: int, out: int = 10, ids=(), session: str | None = None, ts: float = 0.0) -> TraceRow:
    return TraceRow(index, index + 1, ts, None, inp, out, tuple(ids), session)


def later(index: int, inp: int, out: int = 10, session: str = "s", delay: float = 0.0) -> TraceRow:
    return TraceRow(index, index + 1, None, delay, inp, out, (), session)


# --- context ------------------------------------------------------------------------------------

def test_no_max_model_len_leaves_the_rows_alone():
    rows = [first(0, 10_000)]
    assert check_context(rows, None, "error", "t.jsonl") == (rows, [])


def test_an_overlong_row_under_error_names_the_row_its_lengths_and_the_limit():
    rows = [first(0, 100), first(1, 8000, 300)]
    with pytest.raises(ConfigError) as exc:
        check_context(rows, 8192, "error", "t.jsonl")
    assert str(exc.value) == (
        "t.jsonl:2: input_length: row 1 needs 8300 tokens of context (input_length 8000 + output_length 300), "
        "beyond the server's max_model_len 8192 -- set trace_overlong: skip (drop such rows) or clip (shorten "
        "their prompts), or serve the model with a longer context")


def test_a_later_turn_counts_its_sessions_history_and_the_template():
    rows = [first(0, 3000, 100, session="s"), later(1, 3000, 100), later(2, 2000, 100)]
    with pytest.raises(ConfigError) as exc:
        check_context(rows, 8192, "error", "t.jsonl", template_tokens=20)
    assert str(exc.value).startswith(
        "t.jsonl:3: input_length: row 2 (a later turn of session 's') needs 8320 tokens of context (template 20 + "
        "history 6200 + input_length 2000 + output_length 100), beyond the server's max_model_len 8192 -- ")


def test_skip_drops_the_row_and_the_rest_of_its_session():
    rows = [first(0, 100, session="s"), first(1, 9000), later(2, 8100), later(3, 10), first(4, 50)]
    kept, notes = check_context(rows, 8192, "skip", "t.jsonl")
    assert [r.index for r in kept] == [0, 4]
    assert notes == ["trace_overlong: skip: 2 rows beyond max_model_len 8192 dropped (and 1 later turn of their "
                     "sessions)"]


def test_clip_shortens_input_length_and_drops_the_ids_beyond_its_blocks():
    rows = [first(0, 2000, 100, ids=(1, 2, 3, 4)), first(1, 500, 100, ids=(5,))]
    kept, notes = check_context(rows, 1124, "clip", "t.jsonl", block_tokens=512)
    assert kept[0].input_length == 1024 and kept[0].hash_ids == (1, 2)  # 1024 + 100 fits exactly
    assert kept[1] == rows[1]
    assert notes == ["trace_overlong: clip: input_length shortened on 1 row to fit max_model_len 1124"]


def test_clip_counts_the_clipped_history_and_drops_a_turn_that_cannot_fit():
    rows = [first(0, 900, 100, session="s"), later(1, 50, 60), later(2, 10, 10), first(3, 10)]
    kept, notes = check_context(rows, 1000, "clip", "t.jsonl")
    assert [(r.index, r.input_length) for r in kept] == [(0, 900), (3, 10)]  # history 1000 + 60 output cannot fit
    assert notes == ["trace_overlong: clip: 1 row dropped: the session's history and the output alone exceed "
                     "max_model_len 1000 (and 1 later turn of their sessions)"]
    kept, _ = check_context([first(0, 1000, 100, session="s"), later(1, 500, 100)], 1400, "clip", "t")
    assert [r.input_length for r in kept] == [1000, 200]  # turn 2 sees the 1100-token history


def test_nothing_fitting_is_an_error():
    with pytest.raises(ConfigError, match=r"^t.jsonl: no row fits the server's max_model_len 100 -- "):
        check_context([first(0, 500)], 100, "skip", "t.jsonl")


# --- declared cache hits ---------------------------------------------------------------------------

def test_block_lengths_full_blocks_then_the_partial_last_one():
    assert block_lengths(first(0, 1200, ids=(1, 2, 3)), 512) == [512, 512, 176]
    assert block_lengths(first(0, 1200, ids=(1, 2)), 512) == [512, 512]  # the tail is the row's own text
    assert block_lengths(first(0, 1024, ids=(1, 2)), 512) == [512, 512]


def test_hits_are_the_leading_run_shared_with_a_completed_row():
    done = first(0, 2048, ids=(1, 2, 3, 4))
    assert declared_hits(first(1, 2048, ids=(1, 2, 9, 4)), [done], 512) == 1024  # the run stops at 9
    assert declared_hits(first(1, 2048, ids=(9, 2, 3, 4)), [done], 512) == 0     # a prefix, not any block
    assert declared_hits(first(1, 2048, ids=(1, 2, 3, 4)), [], 512) == 0          # still in flight: nothing


def test_the_best_completed_row_counts_and_a_partial_last_block_counts_its_length_rounded_to_16():
    a = first(0, 1024, ids=(1, 2))
    b = first(1, 1200, ids=(1, 2, 3))              # its block 3 is 176 tokens
    assert declared_hits(first(2, 1300, ids=(1, 2, 3)), [a, b], 512) == 1024 + 176
    assert declared_hits(first(2, 1100, ids=(1, 2, 3)), [a, b], 512) == 1024 + 64   # its own block 3: 76 -> 64
    assert declared_hits(first(2, 1100, ids=(1, 2, 3)), [a, b], 512, cache_block=1) == 1100
    short = first(3, 300, ids=(7,))
    assert declared_hits(first(4, 700, ids=(7, 8)), [short], 512) == 288     # 300 shared, rounded down to 16


def test_string_ids_compare_as_json_values():
    assert declared_hits(first(1, 512, ids=("7",)), [first(0, 512, ids=(7,))], 512) == 0
    assert declared_hits(first(1, 512, ids=("7",)), [first(0, 512, ids=("7",))], 512) == 512


def test_a_later_turn_expects_its_whole_history_rounded_down():
    t1, t2, t3 = first(0, 1000, 50, ids=(1, 2), session="s"), later(1, 300, 40), later(2, 100, 10)
    cache = DeclaredCache(512)
    cache.completed(t1)
    assert cache.hits(t2) == 1040          # 1050 - 1 (the last answer token, never evaluated) -> 1040
    cache.completed(t2)
    assert cache.hits(t3) == 1376          # 1050 + 340 - 1 = 1389 -> 1376
    whole = DeclaredCache(512)  # a history of whole 16-token blocks loses its last block to that one token
    whole.completed(first(5, 1000, 24, session="w"))
    assert whole.hits(later(6, 10, 10, session="w")) == 1008  # 1024 - 1 = 1023 -> 1008
    # a later turn's own blocks are not at its prompt's start: they explain nothing for other rows
    assert cache.hits(first(3, 600, ids=(1, 9))) == 512


def test_declared_from_stamps_orders_sends_and_ends_as_the_live_books_do():
    """Worker processes: the declared hits and the bound decided after the run from the stamps
    (``declared_from_stamps``) -- a row's send against the other rows' ends (completed: declared)
    and sends (in flight: the bound); an end at the send's instant counts as completed."""
    from pytest_llm_latency.core.spec.trace_tokens import declared_from_stamps

    a = first(0, 192, 10, [1, 2, 3])
    b = first(1, 192, 10, [1, 2, 9])       # shares two blocks with a
    c = first(2, 128, 10, [1, 7])          # shares one block with a
    e = first(4, 64, 8, [5], session="s")
    d = later(3, 40, 10, session="s")      # e's next turn: its history, 64 + 8 tokens
    stamps = {4: (0, 50), 0: (100, 500), 3: (120, 400),
              2: (300, None),              # c failed: sent (in the later rows' bound), never completed
              1: (500, 900)}               # b sent at the instant a ended: a counts as completed
    declared, bound = declared_from_stamps([a, b, c, d, e], stamps, 64, cache_block=16)
    assert declared == {4: 0, 0: 0, 3: 64, 2: 0, 1: 128}   # d: its history but the last token, rounded to 16
    assert bound == {4: 0, 0: 0, 3: 64, 2: 64, 1: 128}     # c's send: a, in flight, shares its first block
    # the same books as the live replay keeps (DeclaredCache, completed/sent in this order)
    live_cache, live_sent = DeclaredCache(64, 16), DeclaredCache(64, 16)
    for row, done_before in ((e, []), (a, [e]), (d, []), (c, []), (b, [d, a])):
        for x in done_before:
            live_cache.completed(x)
        assert (live_cache.hits(row), live_sent.hits(row)) == (declared[row.index], bound[row.index])
        live_sent.completed(row)
    # a row without a send stamp (never sent) is left out
    assert declared_from_stamps([a], {0: (None, None)}, 64) == ({}, {})
