"""Streams' gaps split against other requests' long prefills (``core.measure.prefill_overlap``), on
records with explicit ns stamps: which gaps overlap, which prefill is the cause, failures' windows,
the stream's own prefill, the stamp bounds, and the gaps the client's own stalls made."""
from __future__ import annotations

from pytest_llm_latency.core.measure.bunching import StallTimeline
from pytest_llm_latency.core.measure.prefill_overlap import (OTHERS, PrefillWindow, figures, prefill_windows,
                                                             run_span_ns, split_gaps)
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.result.result import Failure

MS = 1_000_000


def stream(send_ms: float, times_ms: list[float], *, prompt: int | None = 100, expected: int | None = None,
           mix_class: str | None = None, stamp: str | None = None, bound_ms: float = 0.0) -> RequestRecord:
    """A completed request sent at ``send_ms`` whose token chunks arrived at ``times_ms``."""
    return RequestRecord(t_send_ns=round(send_ms * MS),
                         chunks=[TokenChunk(round(t * MS), 1, bound_ns=round(bound_ms * MS)) for t in times_ms],
                         t_end_ns=round((times_ms[-1] + 1) * MS), prompt_tokens=prompt,
                         expected_prompt_tokens=expected, completion_tokens=len(times_ms), mix_class=mix_class,
                         stamp=stamp)


def chat(send_ms: float = 0.0, **kw) -> RequestRecord:
    """A short-prompt stream: first token at 20 ms, a chunk every 10 ms to 90 ms, one at 105, the
    stalled one at 705, then 715 and 725 (a 600 ms prefill ran from 100 to 700 beside it)."""
    return stream(send_ms, [20, 30, 40, 50, 60, 70, 80, 90, 105, 705, 715, 725], **kw)


def summary(send_ms: float = 100.0, first_ms: float = 700.0, prompt: int = 16000, **kw) -> RequestRecord:
    return stream(send_ms, [first_ms, first_ms + 10, first_ms + 20], prompt=prompt, **kw)


def test_a_gap_overlapping_another_requests_long_prefill_is_a_stall_gap_the_others_are_clean():
    c, s = chat(mix_class="chat"), summary(mix_class="long_summarization")
    windows = prefill_windows([c, s])
    assert windows == [PrefillWindow(0, 20 * MS, 100, "chat", 1), PrefillWindow(100 * MS, 700 * MS, 16000,
                                                                               "long_summarization", 2)]
    split = split_gaps([c, s], windows, 1024)
    assert [(g.request, g.ms) for g in split.stall] == [(1, 15.0), (1, 600.0)]  # 90->105 and 105->705
    assert list(split.clean_ms) == [10.0] * 11  # chat: 7 before, 2 after; the summary's own 2 gaps
    assert all(g.cause.mix_class == "long_summarization" for g in split.stall)
    assert [w.index for w in split.long_windows] == [2]


def test_a_prefill_below_the_threshold_stalls_nothing_and_the_threshold_is_inclusive():
    c, s = chat(), summary(prompt=1024)
    assert not split_gaps([c, s], prefill_windows([c, s]), 1025).stall
    assert len(split_gaps([c, s], prefill_windows([c, s]), 1024).stall) == 2


def test_the_planned_length_counts_when_the_server_gave_none():
    c, s = chat(), summary(prompt=None, expected=4000)  # type: ignore[arg-type]
    assert prefill_windows([c, s])[1].prompt_tokens == 4000
    assert len(split_gaps([c, s], prefill_windows([c, s]), 1024).stall) == 2


def test_the_cause_is_the_overlapped_prefill_with_the_most_tokens_and_none_is_other_requests():
    c = chat()
    a, b = summary(prompt=2000, mix_class="rag"), summary(send_ms=150, first_ms=690, prompt=8000)
    split = split_gaps([c, a, b], prefill_windows([c, a, b]), 1024)
    big = max(split.stall, key=lambda g: g.ms)
    assert {w.prompt_tokens for w in big.windows} == {2000, 8000}
    assert big.cause.prompt_tokens == 8000 and big.cause.cause == OTHERS
    assert [(g.request, g.ms, g.cause.cause) for g in split.stall] == [(1, 15.0, "rag"), (1, 600.0, OTHERS),
                                                                        (3, 10.0, "rag")]  # b's 690->700 in a's
    rows = figures(split, run_span_ns([c, a, b]))["causes"]
    assert [(r["cause"], r["gaps"], r["share"], r["prefills"]) for r in rows] == [("rag", 2, 0.6667, 1),
                                                                                 (OTHERS, 1, 0.3333, 1)]


def test_a_failed_requests_prefill_stalls_the_others_when_its_first_token_came():
    c = chat()
    failed = Failure("reset", "connection reset", ttft_ms=600.0, t_send_ns=100 * MS, prompt_tokens=16000,
                     mix_class="long_summarization")
    no_token = Failure("reset", "connection reset", t_send_ns=100 * MS, prompt_tokens=16000)
    windows = prefill_windows([c], [failed, no_token])
    assert [(w.start_ns, w.end_ns, w.index) for w in windows] == [(0, 20 * MS, 1), (100 * MS, 700 * MS, 2)]
    split = split_gaps([c], windows, 1024)
    assert [g.ms for g in split.stall] == [15.0, 600.0] and split.stall[0].cause.mix_class == "long_summarization"


def test_a_streams_own_prefill_never_stalls_it_even_where_the_stamp_bounds_reach_back_into_it():
    s = summary(stamp="kernel", bound_ms=5.0)  # its first chunk may have come 5 ms before its stamp
    assert not split_gaps([s], prefill_windows([s]), 1024).stall
    other = summary(send_ms=650, first_ms=695)  # another long prefill, ending within s's first gap's bound
    split = split_gaps([s, other], prefill_windows([s, other]), 1024)
    assert [(g.request, g.ms) for g in split.stall] == [(1, 10.0), (2, 10.0)]  # s: 700->710; other: 695->705
    assert [w.index for w in split.stall[0].windows] == [2] and [w.index for w in split.stall[1].windows] == [1]


def test_the_stamp_bound_of_a_gaps_first_chunk_widens_it_back():
    c = stream(0, [20, 702, 712], stamp="kernel", bound_ms=3.0)  # 702 may have been 699.98: inside [100, 700]
    s = summary()
    assert [g.ms for g in split_gaps([c, s], prefill_windows([c, s]), 1024).stall] == [682.0, 10.0]
    exact = stream(0, [20, 702, 712])
    assert [g.ms for g in split_gaps([exact, s], prefill_windows([exact, s]), 1024).stall] == [682.0]


def timeline(stalls: dict[float, float]) -> StallTimeline:
    """A lag monitor ticking every 2 ms over the first second, late by ``{t_wake_ms: lag_ms}``."""
    return StallTimeline(tuple(sorted((round(t * MS), round(lag * MS)) for t, lag in stalls.items())), 2 * MS, 0,
                         1000 * MS)


def test_gaps_the_clients_own_stall_made_are_left_out_and_counted_unless_kernel_stamped():
    s = summary()
    late = timeline({705: 400.0, 60: 8.0})  # the client slept 305..705, and 52..60
    read = chat(stamp="read")
    split = split_gaps([read, s], prefill_windows([read, s]), 1024, stalls=late, read_ms=1.0)
    assert [g.ms for g in split.stall] == [15.0]  # 105->705 was the client's (400 + 2 >= 0.5 x 600)
    assert split.client_gaps == 2 and split.client_stall_gaps == 1  # and 50->60 (8 + 2 >= 5)
    kernel = chat(stamp="kernel")  # the kernel stamped the arrivals: the client's sleep moved nothing
    split = split_gaps([kernel, s], prefill_windows([kernel, s]), 1024, stalls=late)
    assert [g.ms for g in split.stall] == [15.0, 600.0] and split.client_gaps == 0
    short = timeline({705: 100.0})  # a stall too short to have made a 600 ms gap
    assert [g.ms for g in split_gaps([read, s], prefill_windows([read, s]), 1024, stalls=short).stall] == [15.0, 600.0]
    elsewhere = StallTimeline(((705 * MS, 400 * MS),), 2 * MS, 10_000 * MS, 20_000 * MS)  # another clock
    assert split_gaps([read, s], prefill_windows([read, s]), 1024, stalls=elsewhere).client_gaps == 0


def test_figures_name_the_worst_stall_per_stream_the_causes_and_the_stalls_per_minute():
    c1, c2 = chat(mix_class="chat"), stream(5, [25, 35, 95, 108, 701, 711], mix_class="chat")
    s = summary(mix_class="long_summarization")
    split = split_gaps([c1, c2, s], prefill_windows([c1, c2, s]), 1024, numbers={id(c1): 1, id(c2): 2, id(s): 3})
    f = figures(split, 60_000 * MS)
    assert f["stall_gaps"] == 4 and f["clean_gaps"] == len(split.clean_ms)
    assert f["worst_per_stream"] == [{"request": 1, "stall_ms": 600.0, "stall_gaps": 2},
                                     {"request": 2, "stall_ms": 593.0, "stall_gaps": 2}]
    assert (f["stall_ms_max"], f["worst_request"], f["worst_cause"], f["worst_cause_request"],
            f["worst_cause_prompt_tokens"]) == (600.0, 1, "long_summarization", 3, 16000)
    assert f["clean_ms_p99"] == 53.5  # 13 gaps of 10 ms and c2's 35->95
    assert f["stalls"] == 2 and f["stalls_per_min"] == 2.0  # the two gaps above the clean p99, in one minute
    assert f["causes"] == [{"cause": "long_summarization", "gaps": 4, "share": 1.0, "prefills": 1,
                            "prompt_tokens_p50": 16000, "window_ms_p50": 600.0}]
    assert (f["long_prefills"], f["long_prompt_tokens_p50"], f["long_window_ms_p50"]) == (1, 16000, 600.0)


def test_nothing_to_split_gives_no_figures_of_nothing():
    f = figures(split_gaps([chat()], [], 1024), 0)
    assert f["stall_gaps"] == 0 and f["stall_ms_p99"] is None and f["stalls_per_min"] is None
    assert f["causes"] == [] and "worst_request" not in f
