"""The trace replay's sending (``client/drivers/trace_replay.py``) with a fake ``send`` and a virtual
clock: each row stamped with its own scheduled time (timestamp ÷ speed), a session's later turn due
its delay after the previous turn ended and sent as history + new tokens, nothing dropped when a
turn fails, a rejected row named by its file line, and the cached tokens each row's declaration
explains."""
from __future__ import annotations

import json
import threading
import time

from pytest_llm_latency.client.drivers.base import Run
from pytest_llm_latency.client.drivers.trace_replay import Replay
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.result.result import Failure, measured
from pytest_llm_latency.core.spec.trace import TraceSpec, read_trace
from pytest_llm_latency.core.spec.workload import make_workload

E2E_NS = 5_000_000  # each fake request takes 5 ms of virtual time


class VirtualClock:
    """ns clock that only moves when the replay waits, and then only once every request in flight
    has returned (except those a test holds on purpose), so virtual time never runs ahead of them."""

    T0 = 1_000_000_000

    def __init__(self, gates=()):
        """``gates``: (ms, n): the clock passes T0 + ms only once n requests have returned."""
        self.t = self.T0
        self.cond = threading.Condition()
        self.busy = self.returned = 0
        self.gates = [(self.T0 + int(ms * 1e6), n) for ms, n in gates]

    def __call__(self) -> int:
        with self.cond:
            return self.t

    def sleep(self, s: float) -> None:
        with self.cond:
            to = self.t + max(int(s * 1e9), 1)
            ready = lambda: self.busy == 0 and all(self.returned >= n for t, n in self.gates if to > t)  # noqa: E731
            assert self.cond.wait_for(ready, timeout=10.0), "a request never returned"
            self.t = to

    def request(self, delta: int) -> None:
        with self.cond:
            self.busy += delta
            self.returned += delta < 0
            self.cond.notify_all()


def rows_of(dicts, block=16):
    return read_trace([json.dumps(d) for d in dicts], "t.jsonl", block)


def prompts_for(rows):
    return [Prompt(system="", user=f" new{r.index}", expected_tokens=r.input_length, counted_tokens=r.input_length,
                   output_tokens=r.output_length, key=r.index) for r in rows]


def fake_one(clock, fail=None):
    """Records what was sent; a request 'takes' E2E_NS (its stamps, not the clock); ``fail``:
    {user text prefix: kind} answered with a Failure."""
    sent = []
    lock = threading.Lock()

    def one(p: Prompt, t_sched):
        clock.request(+1)
        try:
            return answer(p, t_sched)
        finally:
            clock.request(-1)

    def answer(p: Prompt, t_sched):
        with lock:
            sent.append((p, t_sched))
        for prefix, kind in (fail or {}).items():
            if p.user.startswith(prefix):
                return Failure(kind, "the server said no")
        t = max(clock(), t_sched)
        out = p.output_tokens or 1
        return RequestRecord(t_send_ns=t, chunks=[TokenChunk(t + E2E_NS - 1, out, text=" ok" * out)],
                             t_end_ns=t + E2E_NS, prompt_tokens=p.expected_tokens, completion_tokens=out,
                             expected_prompt_tokens=p.expected_tokens, t_scheduled_ns=t_sched)
    return one, sent


def replay(rows, clock, speed=1.0):
    spec = TraceSpec("/traces/t.jsonl", speed=speed, block_tokens=16)
    return Replay(list(rows), spec, clock=clock, sleep=clock.sleep, lag_sleep=time.sleep)


W = make_workload("w", {"trace": "t.jsonl", "warmup": 0})


def test_each_row_is_sent_once_at_its_timestamp_divided_by_the_speed():
    rows = rows_of([{"timestamp": t, "input_length": 20, "output_length": 2, "hash_ids": [i, 9]}
                    for i, t in enumerate((0, 40, 40, 250, 1000))])
    for speed in (1.0, 2.0):
        clock = VirtualClock()
        one, sent = fake_one(clock)
        r = replay(rows, clock, speed)
        out = r.send(one, prompts_for(rows), W, Run(), lambda recs: None)
        assert len(sent) == 5 and sorted(p.key for p, _ in sent) == [0, 1, 2, 3, 4]
        t0 = min(t for _, t in sent)
        due = {p.key: t - t0 for p, t in sent}
        assert due == {i: int(ts / speed * 1e6) for i, ts in enumerate((0, 40, 40, 250, 1000))}
        assert [o.trace.line for o in sorted(out.outcomes, key=lambda o: o.trace.row)] == [1, 2, 3, 4, 5]
        assert out.load_run.mode == "trace" and len(out.load_run.send_lag_ns) == 5


def test_a_later_turn_is_due_its_delay_after_the_previous_ended_and_carries_the_history():
    rows = rows_of([
        {"session_id": "a", "timestamp": 0, "input_length": 30, "output_length": 3, "hash_ids": [1, 2]},
        {"timestamp": 10, "input_length": 20, "output_length": 2},
        {"session_id": "a", "delay": 100, "input_length": 8, "output_length": 4, "hash_ids": [3]},
        {"session_id": "a", "delay": 50, "input_length": 5, "output_length": 1},
    ])
    clock = VirtualClock()
    one, sent = fake_one(clock)
    out = replay(rows, clock, speed=2.0).send(one, prompts_for(rows), W, Run(), lambda recs: None)
    by_row = {o.trace.row: o for o in out.outcomes}
    turns = [(p, t) for p, t in sent if p.key in (0, 2, 3)]
    assert [p.key for p, _ in turns] == [0, 2, 3]  # in order, one at a time
    for (prev, _), (cur, t_sched), delay in zip(turns, turns[1:], (100, 50)):
        assert t_sched == by_row[prev.key].t_end_ns + int(delay / 2.0 * 1e6)  # the delay ÷ the speed
        answer = " ok" * prev.output_tokens
        assert cur.user == prev.user + answer + f" new{cur.key}"  # history (prompt + answer) + new tokens
        history = prev.expected_tokens + prev.output_tokens
        assert cur.expected_tokens == history + rows[cur.key].input_length
        assert by_row[cur.key].trace.history_tokens == history
    assert by_row[3].expected_prompt_tokens == 30 + 3 + 8 + 4 + 5


def test_a_failed_turn_ends_its_session_and_each_later_turn_is_a_failure_naming_its_line():
    rows = rows_of([
        {"session_id": "s", "timestamp": 0, "input_length": 30, "output_length": 3},
        {"session_id": "s", "delay": 10, "input_length": 8, "output_length": 4},
        {"session_id": "s", "delay": 10, "input_length": 8, "output_length": 4},
        {"timestamp": 5, "input_length": 20, "output_length": 2},
    ])
    clock = VirtualClock()
    one, sent = fake_one(clock, fail={" new0": "http_503"})
    out = replay(rows, clock).send(one, prompts_for(rows), W, Run(), lambda recs: None)
    assert len(sent) == 2 and len(out.outcomes) == 4  # nothing dropped: every row is an outcome
    failed = sorted((o for o in out.outcomes if isinstance(o, Failure)), key=lambda o: o.trace.row)
    # the later turns keep the cause's kind: a server fault stays one (judged against max_error_rate as such)
    assert [f.kind for f in failed] == ["http_503", "http_503", "http_503"]
    assert failed[0].message == "trace t.jsonl:1 (row 0): the server said no"
    assert failed[1].message == "trace t.jsonl:2 (row 1): not sent: turn 1 of session 's' failed (http_503)"


def test_a_rejected_row_is_named_by_its_line_and_stops_the_replay_as_an_error():
    rows = rows_of([{"timestamp": 100 * i, "input_length": 20 + 1000 * (i == 1), "output_length": 2}
                    for i in range(4)])
    clock = VirtualClock(gates=[(150, 2)])  # row 2 (due at 200 ms) only after row 1's rejection came back
    one, sent = fake_one(clock, fail={" new1": "context_length"})
    r = replay(rows, clock)
    out = r.send(one, prompts_for(rows), W, Run(), lambda recs: None)
    rejected = [o for o in out.outcomes if isinstance(o, Failure)]
    assert [f.message for f in rejected] == ["trace t.jsonl:2 (row 1): the server said no"]
    assert r.stopped is rejected[0] and r.unsent == 2 and len(sent) == 2
    res = measured(W, [o for o in out.outcomes if isinstance(o, RequestRecord)], rejected)
    r.record(res)  # the rows not sent make the run an error, whatever max_error_rate allows
    assert res.facts.trace_incomplete == (
        "trace not replayed: 2 of 4 rows were not sent: trace t.jsonl:2 (row 1): the server said no -- a rejection "
        "every row would get (context_length); set trace_overlong: skip or clip, or shorten the trace's rows")
    assert judge(res).verdict == "error"


def test_under_trace_overlong_skip_a_row_the_server_rejects_as_too_long_is_left_out_with_a_note():
    rows = rows_of([{"timestamp": 100 * i, "input_length": 20, "output_length": 2} for i in range(4)])
    clock = VirtualClock(gates=[(150, 2)])
    one, sent = fake_one(clock, fail={" new1": "context_length"})
    r = Replay(list(rows), TraceSpec("/traces/t.jsonl", overlong="skip", block_tokens=16), clock=clock,
               sleep=clock.sleep, lag_sleep=time.sleep)
    out = r.send(one, prompts_for(rows), W, Run(), lambda recs: None)
    assert len(sent) == 4 and r.stopped is None and r.skipped == [1]
    assert sorted(o.trace.row for o in out.outcomes) == [0, 2, 3] and all(
        isinstance(o, RequestRecord) for o in out.outcomes)
    assert out.notes == ["trace_overlong: skip: 1 row(s) left out: the server rejected t.jsonl:2 as beyond its "
                         "context (it lists no max_model_len to check against before sending); a session's later "
                         "turns go with its rejected turn"]


def test_declared_hits_count_rows_completed_before_the_send_and_the_bound_rows_in_flight():
    rows = rows_of([
        {"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": ["sys", 1, 2]},
        {"timestamp": 2, "input_length": 40, "output_length": 2, "hash_ids": ["sys", 3, 4]},   # row 0 in flight
        {"timestamp": 100, "input_length": 40, "output_length": 2, "hash_ids": ["sys", 1, 5]},  # 0 and 1 done
    ])
    clock = VirtualClock(gates=[(50, 2)])  # row 2 (due at 100 ms) only after rows 0 and 1 came back
    inner, _ = fake_one(clock)
    row1_sent = threading.Event()

    def one(p, t_sched):  # row 0 is still streaming when row 1 goes out (held: not counted as busy)
        if p.key == 1:
            row1_sent.set()
        elif p.key == 0:
            assert row1_sent.wait(10.0)
        return inner(p, t_sched)
    r = replay(rows, clock)
    r.send(one, prompts_for(rows), W, Run(), lambda recs: None)
    assert r.declared == {0: 0, 1: 0, 2: 32}  # two full 16-token blocks shared with row 0, which completed
    assert r.bound == {0: 0, 1: 16, 2: 32}    # row 1 may hit row 0's first block, prefilled while in flight
