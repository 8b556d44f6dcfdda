"""The bound on the client's own stamping error (``core.measure.stamp_bounds``) and the refusal of verdicts
it could flip (``core.checks.client_skew``): hand-built records on a fake clock, bounds worked out
in each test from the definitions (a kernel stamp is its read's last byte's arrival; TTFT only reads
long; TPOT moves by (b_first + b_last) / (N - 1); a statistic lies between the statistics of the
samples' lower and upper ends)."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.measure import stamp_bounds as sb
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.measure.record import RecordBuilder, RequestRecord, TokenChunk
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.spec.workload import make_workload

MS = 1_000_000
FLOOR = sb.KERNEL_FLOOR_NS / MS


def kernel_record(t_send_ms: float, token_ms: list[float], bounds_ms: list[float] | None = None,
                  written_ms: float | None = None) -> RequestRecord:
    bounds_ms = bounds_ms or [0.0] * len(token_ms)
    rec = RequestRecord(t_send_ns=int(t_send_ms * MS), stamp="kernel",
                        chunks=[TokenChunk(int(t * MS), 1, bound_ns=int(b * MS)) for t, b in zip(token_ms, bounds_ms)])
    rec.t_end_ns = rec.chunks[-1].t_ns
    rec.completion_tokens = len(token_ms)
    rec.t_written_ns = None if written_ms is None else int(written_ms * MS)
    return rec


# ------------------------------------------------------------------ the builder: pieces of one read
def test_chunks_parsed_from_an_earlier_piece_of_a_read_may_have_arrived_up_to_its_span_before_their_stamp():
    b = RecordBuilder(clock=lambda: 0)
    t = b.stamp(100 * MS, read=(1, 20 * MS, 5 * MS))       # read 1: one piece, one event
    b.token_chunk(t)
    t = b.stamp(140 * MS, read=(2, 40 * MS, 30 * MS))      # read 2 in two pieces: two events, 40 ms span
    b.token_chunk(t)
    t = b.stamp(140 * MS, read=(2, 40 * MS, 30 * MS))
    b.token_chunk(t)
    rec = b.record
    assert [c.bound_ns for c in rec.chunks] == [0, 40 * MS, 0]  # only the event before the read's end
    assert rec.read_delays_ns == [5 * MS, 30 * MS]              # one delay per read, not per piece
    assert rec.stamp == "kernel"


def test_a_last_token_followed_in_its_read_by_the_streams_end_written_later_may_be_early_by_the_span():
    # the server wrote the usage chunk and [DONE] after the last token (their own HTTP chunks): the
    # read's stamp is their arrival, and the last token arrived somewhere in the read's span before
    b = RecordBuilder(clock=lambda: 0)
    b.token_chunk(b.stamp(100 * MS, read=(1, 20 * MS, 0)))
    b.token_chunk(b.stamp(120 * MS, read=(2, 20 * MS, 0)))
    b.stamp(120 * MS, read=(2, 20 * MS, 0))
    b.usage(8, 2)
    b.stamp(120 * MS, read=(2, 20 * MS, 0))
    rec = b.finish(120 * MS, "length")
    assert [c.bound_ns for c in rec.chunks] == [0, 20 * MS]


def test_a_token_whose_read_ends_with_its_own_http_chunk_keeps_its_stamp_exact():
    b = RecordBuilder(clock=lambda: 0)
    b.token_chunk(b.stamp(100 * MS, read=(1, 20 * MS, 0)))
    b.event()                                   # a second event in the same HTTP chunk: one write
    b.token_chunk(100 * MS)
    b.token_chunk(b.stamp(120 * MS, read=(2, 20 * MS, 0)))
    b.stamp(125 * MS, read=(3, 5 * MS, 0))      # [DONE] in a read of its own
    assert [c.bound_ns for c in b.finish(125 * MS).chunks] == [0, 0, 0]


def test_without_http_chunks_a_token_followed_by_another_event_of_its_read_may_be_early_by_the_span():
    b = RecordBuilder(clock=lambda: 0)
    b.body_framing(chunked=False)               # a close-delimited body: a piece is a whole read
    t = b.stamp(100 * MS, read=(1, 30 * MS, 0))
    b.event()
    b.token_chunk(t)
    b.event()                                   # the next event of the same read: maybe a later write
    b.token_chunk(t)
    t = b.stamp(120 * MS, read=(2, 20 * MS, 0))
    b.event()
    b.token_chunk(t)
    assert [c.bound_ns for c in b.record.chunks] == [30 * MS, 0, 0]


def test_one_read_without_a_kernel_stamp_makes_the_record_read_stamped():
    b = RecordBuilder(clock=lambda: 0)
    b.token_chunk(b.stamp(10 * MS, read=(1, 0, 2 * MS)))
    b.token_chunk(b.stamp(30 * MS, read=(2, 20 * MS, None)))   # delay None: stamped when it returned
    assert b.record.stamp == "read" and b.record.read_delays_ns == [2 * MS]


def test_a_kernel_transmit_stamp_becomes_t_send_only_between_the_clients_own_stamp_and_the_answer():
    b = RecordBuilder(clock=lambda: 0)
    b.sent(10 * MS)
    b.sent_kernel(9 * MS)          # before the client's stamp before writing: not believed
    assert b.record.t_send_ns == 10 * MS and b.record.t_written_ns is None
    b.sent_kernel(11 * MS)
    assert b.record.t_send_ns == b.record.t_written_ns == 11 * MS


# ------------------------------------------------------------------ per sample, per metric
def test_ttft_reads_long_by_at_most_the_send_slack_plus_the_first_stamps_bound():
    rec = kernel_record(0, [20, 40, 60], bounds_ms=[3, 0, 0], written_ms=0.5)
    (s,) = sb.samples([rec], "ttft", read_ms=9.0)
    assert s.value == 20.0
    assert s.below == pytest.approx(0.5 + 3 + FLOOR) and s.above == 0.0   # never reads short


def test_tpot_moves_by_the_first_and_last_bounds_over_n_minus_1_either_way():
    rec = kernel_record(0, [20, 40, 60, 80, 100], bounds_ms=[4, 0, 0, 0, 2])
    (s,) = sb.samples([rec], "tpot", read_ms=9.0)
    e = ((4 + FLOOR) + (2 + FLOOR)) / (5 - 1)
    assert s.value == pytest.approx(20.0) and s.below == pytest.approx(e) and s.above == pytest.approx(e)


def test_an_itl_gap_reads_long_by_the_later_stamps_bound_and_short_by_the_earlier_ones():
    rec = kernel_record(0, [20, 40, 45], bounds_ms=[0, 7, 0])
    gaps = sb.samples([rec], "itl", read_ms=9.0)
    assert [g.value for g in gaps] == [20.0, 5.0]
    assert gaps[0].below == pytest.approx(7 + FLOOR) and gaps[0].above == pytest.approx(FLOOR)
    assert gaps[1].below == pytest.approx(FLOOR) and gaps[1].above == pytest.approx(7 + FLOOR)


def test_read_stamped_records_carry_the_runs_read_bound_on_every_token():
    rec = kernel_record(0, [20, 40])
    rec.stamp = "read"
    assert sb.chunk_bounds_ms(rec, read_ms=6.5) == [6.5, 6.5]
    assert sb.read_bound_ms(2.0) == pytest.approx(sb.READ_LAG_FACTOR * 2.0 + sb.READ_FLOOR_MS)


def test_the_open_loops_ttft_counts_from_its_due_time_so_the_send_has_no_slack():
    rec = kernel_record(10, [30], written_ms=15)
    rec.t_scheduled_ns = 5 * MS
    assert sb.send_slack_ms(rec) == 0.0
    rec.t_scheduled_ns = None
    assert sb.send_slack_ms(rec) == 5.0


# ------------------------------------------------------------------ per statistic
def test_a_statistic_lies_between_the_statistics_of_the_samples_lower_and_upper_ends():
    # values 1..100 ms; the slowest sample carries a 30 ms bound below, a fast one 50 ms above
    bounded = [sb.Bounded(float(v), 30.0 if v == 100 else 1.0, 50.0 if v == 3 else 0.0) for v in range(1, 101)]
    p99 = sb.stat_bound(bounded, "p99")
    # type-7 p99 of 1..100: rank 98.01 -> 99.01.  Lower ends: 0..98 and 70 -> sorted, rank 98.01 lies
    # between 97 and 98 -> 97.01; upper ends: 1, 2, 53, 4..100 -> rank 98.01 -> 99.01 (53 stays below)
    assert p99.measured == pytest.approx(99.01)
    assert p99.below == pytest.approx(2.0) and p99.above == pytest.approx(0.0)
    p50 = sb.stat_bound(bounded, "p50")    # rank 49.5 -> 50.5; lower ends -> 49.5; upper ends -> 51.5
    assert p50.below == pytest.approx(1.0) and p50.above == pytest.approx(1.0)
    mean = sb.stat_bound(bounded, "mean")
    assert mean.below == pytest.approx((99 * 1 + 30) / 100) and mean.above == pytest.approx(50 / 100)


def test_a_few_widened_samples_move_a_p99_only_as_far_as_the_next_samples_allow():
    # 1,000 TTFTs of 20.0..20.999 ms; 5 of them (the largest) could be 20 ms early: the true p99 is
    # no lower than the p99 of the rest
    bounded = [sb.Bounded(20.0 + i / 1000, 20.0 if i >= 995 else 0.0, 0.0) for i in range(1000)]
    p99 = sb.stat_bound(bounded, "p99")
    assert p99.measured == pytest.approx(20.98901)
    assert p99.below == pytest.approx(20.98901 - 20.98401)   # the p99 of the lower ends: rank 989.01 -> 20.98401


def test_misses_count_as_the_result_counts_them_and_no_clock_moves_a_miss():
    bounded = [sb.Bounded(float(v), 1.0, 1.0) for v in range(1, 11)]
    assert sb.stat_bound(bounded, "max", misses=1).below == 0.0       # the max is the miss
    with_miss = sb.stat_bound(bounded, "p50", misses=1)              # rank 5 of 11 values: 6
    assert with_miss.measured == 6.0 and with_miss.below == 1.0 and with_miss.above == 1.0


def test_the_bound_is_never_under_the_error_of_the_statistic_whatever_the_errors_inside_their_bounds():
    import random

    rng = random.Random(7)
    for _ in range(200):
        truth = [rng.uniform(10, 50) for _ in range(60)]
        bounds = [rng.choice([0.0, 0.0, 0.0, rng.uniform(0, 15)]) for _ in truth]
        measured_vals = [t + rng.uniform(0, b) for t, b in zip(truth, bounds)]   # stamps only late
        bounded = [sb.Bounded(m, b, 0.0) for m, b in zip(measured_vals, bounds)]
        for stat in ("p50", "p90", "p99", "max", "mean"):
            got = sb.stat_bound(bounded, stat)
            true_stat = sb.stat_bound([sb.Bounded(t, 0, 0) for t in truth], stat).measured
            assert got.measured - got.below <= true_stat + 1e-9 <= got.measured + got.above + 2e-9


# ------------------------------------------------------------------ the refusal
def _judged(records, slo: dict, lag_ms: float | None = None):
    w = make_workload("w", {"prompt_tokens": 8, "output_tokens": 3, "samples": len(records), "warmup": 0,
                            "confidence": None, "slo": slo})  # the point estimate: the bound is the subject
    res = measured(w, records, [])
    res.client.client_lag_ms_p99 = lag_ms
    return judge(res)


def test_a_ttft_fail_the_first_tokens_shared_read_could_explain_is_refused_naming_the_bound_and_the_way_out():
    # 20 samples at 30 ms TTFT; their first tokens shared a read spanning 12 ms
    recs = [kernel_record(0, [30, 50, 70], bounds_ms=[12, 0, 0]) for _ in range(100)]
    res = _judged(recs, {"ttft_p99": "25ms"})
    assert res.verdict == "error" and not res.violations
    (err,) = [e for e in res.errors if e.startswith("TTFT p99 cannot be judged")]
    assert "measured 30.00 ms against the budget 25 ms" in err and "up to 12.02 ms" in err
    assert "workers: auto" in err and "kernel arrival stamps" in err


def test_a_ttft_fail_beyond_the_bound_stands_and_a_ttft_pass_is_never_refused():
    recs = [kernel_record(0, [30, 50, 70], bounds_ms=[2, 0, 0]) for _ in range(100)]
    res = _judged(recs, {"ttft_p99": "25ms"})           # 30 - 2.02 > 25: a fail whatever the client did
    assert res.verdict == "fail" and not res.errors
    res = _judged(recs, {"ttft_p99": "31ms"})           # it only reads long: the truth passes too
    assert res.verdict == "pass" and not res.errors


def test_tpot_is_hurt_far_less_than_ttft_by_the_same_late_first_token():
    recs = [kernel_record(0, [30] + [30 + 10 * i for i in range(1, 41)], bounds_ms=[12] + [0] * 40)
            for _ in range(100)]
    for r in recs:
        r.completion_tokens = 41
    res = _judged(recs, {"ttft_p99": "25ms", "tpot_p99": "9.8ms"})
    # TTFT 30 ms is within 12.02 ms of its 25 ms budget: refused.  TPOT = (430 - 30) / 40 = 10 ms moves by
    # (12.02 + 0.02) / 40 = 0.30 ms only: 10 - 0.30 <= 9.8 could flip (refused), 10 - 0.30 > 9.6 cannot
    assert any(e.startswith("TTFT p99 cannot be judged") for e in res.errors)
    assert any(e.startswith("TPOT p99 cannot be judged") for e in res.errors)
    res = _judged(recs, {"tpot_p99": "9.6ms"})
    assert res.verdict == "fail" and not res.errors and res.violations[0].budget.metric == "tpot"


def test_read_stamps_refuse_a_fail_their_calibrated_lag_bound_could_explain():
    recs = [kernel_record(0, [30, 50, 70]) for _ in range(100)]
    for r in recs:
        r.stamp = "read"
    bound = sb.read_bound_ms(0.5)                            # READ_LAG_FACTOR x 0.5 + READ_FLOOR_MS
    res = _judged(recs, {"ttft_p99": f"{30 - bound + 0.5}ms"}, lag_ms=0.5)   # 30 - bound <= budget: may pass
    assert res.verdict == "error" and "read stamps" in res.errors[0] and "lag p99 0.5 ms" in res.errors[0]
    res = _judged(recs, {"ttft_p99": f"{30 - bound - 0.5}ms"}, lag_ms=0.5)   # 30 - bound > budget: judged
    assert res.verdict == "fail"


def test_records_without_stamps_an_injected_clock_are_judged_as_before():
    recs = [kernel_record(0, [30, 50, 70], bounds_ms=[12, 0, 0]) for _ in range(100)]
    for r in recs:
        r.stamp = None
    assert _judged(recs, {"ttft_p99": "25ms"}).verdict == "fail"


# ------------------------------------------------------------------ the load engine's GIL switch interval
@pytest.mark.parametrize("kernel", [True, False])
def test_stream_threads_hurry_to_their_reads_only_where_reads_are_stamped_when_they_return(monkeypatch, kernel):
    import sys

    from pytest_llm_latency.client.load import engine as load
    from pytest_llm_latency.client.transport import recv_stamp

    monkeypatch.setattr(recv_stamp, "_LATEST", [kernel])
    before = sys.getswitchinterval()
    seen = []

    def body():
        seen.append(sys.getswitchinterval())
        return load.LoadRun(mode="closed")

    ticks = iter(range(0, 10**12, 10**6))
    load._monitored(body, lambda: next(ticks), lambda s: None)
    want = load.KERNEL_STAMPED_SWITCH_INTERVAL_S if kernel else load.SWITCH_INTERVAL_S
    assert seen == [pytest.approx(want)] and sys.getswitchinterval() == before
