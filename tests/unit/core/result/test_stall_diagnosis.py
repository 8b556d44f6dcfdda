"""The stall rule of the diagnosis (``core.result.diagnosis._prefill_stall``): long gaps inside other
requests' long prefills name chunked prefill and the token budget per step with the measured numbers;
long gaps everywhere alike say batching or queueing; too little evidence leaves it to the batching-tail
rule."""
from __future__ import annotations

from pytest_llm_latency.core.result.diagnosis import Evidence, diagnose

STALLED = dict(itl_p50=7.0, itl_p99=600.0, concurrency=8, stall_p99=612.0, clean_p99=9.5, clean_p50=7.0,
               stall_gaps=120, stall_prompt_tokens=1024, long_prompt_tokens=16000.0, long_window_ms=702.0,
               stall_cause="95% of the stall gaps during long_summarization's prefills")


def test_stall_gaps_far_above_the_clean_ones_name_chunked_prefill_and_the_token_budget():
    (c,) = [c for c in diagnose(Evidence(**STALLED), {"itl_stall"})]
    assert c.line == (
        "cause: long prefills stall decode — gaps overlapping another request's prefill of >= 1024 prompt tokens: "
        "p99 612.0 ms (120 gaps) vs 9.5 ms otherwise (the long prefills: median 16000 tokens, 702 ms from send to "
        "first token; 95% of the stall gaps during long_summarization's prefills): an unchunked prefill is one "
        "engine step every running stream waits for -- chunk it into the decode batches with a token budget per "
        "step: vLLM --enable-chunked-prefill with --max-num-batched-tokens (around 2048 favours ITL, higher favours "
        "TTFT), SGLang --chunked-prefill-size, llama.cpp -b / -ub (its logical / physical batch)")
    names = [c.name for c in diagnose(Evidence(**STALLED), {"itl"})]
    assert names == ["long prefills stall decode"]  # not also the generic batching tail
    assert diagnose(Evidence(**STALLED), {"ttft"}) == []  # a stall does not explain a first token


def test_long_gaps_not_concentrated_in_prefills_are_batching_with_the_servers_running_gauge():
    e = Evidence(**{**STALLED, "stall_p99": 48.0, "clean_p99": 45.0, "stall_cause": None},
                 server={"server_running_max": 64.0, "server_running_mean": 41.3})
    (c,) = diagnose(e, {"itl"})
    assert c.name == "batching or queueing, not prefill stalls"
    assert c.text == ("gaps overlapping another request's prefill of >= 1024 prompt tokens: p99 48.0 ms (120 gaps) "
                      "vs 45.0 ms otherwise, against 7.0 ms p50: the long gaps are not the long prefills' -- the "
                      "decode step grows with the batch (running max 64, mean 41.3): fewer sequences at once "
                      "(max_num_seqs) or a faster decode")


def test_queueing_is_said_where_the_server_queued_and_both_unknown_says_how_to_tell():
    e = Evidence(**{**STALLED, "stall_p99": 40.0, "clean_p99": 42.0}, server={"server_waiting_max": 12.0})
    (c,) = diagnose(e, {"itl_stall"})
    assert c.text.endswith("the long gaps are not the long prefills' -- requests queue behind one another (up to 12 "
                           "waiting)")
    (c,) = diagnose(Evidence(**{**STALLED, "stall_p99": 40.0, "clean_p99": 42.0}), {"itl"})
    assert c.text.endswith("(the server's /metrics running and waiting gauges would tell which)")


def test_no_tail_no_cause_and_too_few_stall_gaps_leave_it_to_the_batching_tail():
    flat = Evidence(**{**STALLED, "itl_p99": 9.0, "stall_p99": 9.0, "clean_p99": 8.0})
    assert diagnose(flat, {"itl"}) == []
    few = Evidence(**{**STALLED, "stall_p99": 12.0, "clean_p99": 30.0, "stall_gaps": 5})
    assert [c.name for c in diagnose(few, {"itl"})] == ["batching tail"]
    none = Evidence(itl_p50=7.0, itl_p99=60.0, concurrency=8)  # no stall split at all: as before
    assert [c.name for c in diagnose(none, {"itl"})] == ["batching tail"]


#: the chat + summarization mix on a server with 512-token chunks (docs/sharing-a-server.md): every stall gap is
#: one step carrying a chunk (~21 ms), against ~8 ms decode steps; the clean tail holds the chats' own prefill
#: steps, so the tails alone (29.0 vs 17.5 ms) do not show it
CHUNKED = dict(STALLED, stall_p99=29.0, stall_p50=20.9, clean_p99=17.5, clean_p50=7.6, stall_gaps=1335,
               long_window_ms=693.0, stall_cause="100% of the stall gaps during long_summarization's prefills")


def test_chunked_prefill_steps_are_named_by_the_typical_gap_with_a_smaller_token_budget_not_batching():
    (c,) = diagnose(Evidence(**CHUNKED, server={"server_running_max": 15.0}), {"itl_stall"})
    assert c.name == "long prefills stall decode"
    assert c.text == (
        "gaps overlapping another request's prefill of >= 1024 prompt tokens: p99 29.0 ms (1335 gaps) vs 17.5 ms "
        "otherwise, p50 20.9 ms vs 7.6 ms (the long prefills: median 16000 tokens, 693 ms from send to first token; "
        "100% of the stall gaps during long_summarization's prefills): the prefills ran as several steps (a stall "
        "gap is a fraction of the window: chunked), and every step that carries a chunk pauses the running streams "
        "-- a smaller token budget per step shortens the pause, at the cost of more steps per prompt (TTFT): vLLM "
        "--max-num-batched-tokens (around 2048 favours ITL, higher favours TTFT), SGLang --chunked-prefill-size, "
        "llama.cpp -ub (its physical batch)")


def test_a_chunked_tail_far_above_the_clean_one_says_chunked_without_the_medians():
    e = Evidence(**{**CHUNKED, "stall_p99": 142.9, "stall_p50": 80.9, "clean_p99": 19.3})  # 2048-token chunks
    (c,) = diagnose(e, {"itl_stall"})
    assert "p99 142.9 ms (1335 gaps) vs 19.3 ms otherwise (the long prefills" in c.text
    assert "the prefills ran as several steps" in c.text and "an unchunked prefill" not in c.text
    unchunked = Evidence(**{**CHUNKED, "stall_p99": 706.6, "clean_p99": 40.9})  # a stall as long as the window
    assert "an unchunked prefill is one engine step" in diagnose(unchunked, {"itl_stall"})[0].text


def test_typical_stall_gaps_like_the_clean_ones_are_still_batching_or_queueing():
    e = Evidence(**{**CHUNKED, "stall_p50": 8.1}, server={"server_running_max": 15.0, "server_running_mean": 4.7})
    (c,) = diagnose(e, {"itl_stall"})
    assert c.name == "batching or queueing, not prefill stalls" and "running max 15, mean 4.7" in c.text
