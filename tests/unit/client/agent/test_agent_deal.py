"""Agent sessions over worker processes (``client/agent/workers.py``, ``client/agent/shard.py``):
the sessions dealt whole (session ``i`` on worker ``i mod N``, with its prepared first prompt and
its turns' positions), the session slots split, a worker's shard run on a fake chat client (exact
records naming the worker, at their session-major positions), and the merge into one result as
one process builds it (a failed worker an error naming it).  No process is spawned here."""
from __future__ import annotations

import pickle

import pytest

from pytest_llm_latency.client.agent.loop import SessionPlan
from pytest_llm_latency.client.agent.plan import PreparedSessions, session_result
from pytest_llm_latency.client.agent.shard import AgentDeal, run_agent_shard
from pytest_llm_latency.client.agent.workers import make_agent_shards, merge_sessions, session_slots, span_s
from pytest_llm_latency.client.transport.http import Timeouts
from pytest_llm_latency.client.drivers.load_report import workers_summary
from pytest_llm_latency.client.placement.processes.shard import ShardRun, WorkerTarget
from pytest_llm_latency.client.placement.processes.workers import merge
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.spec.workload import make_workload

TARGET = WorkerTarget("http://127.0.0.1:9", "openai-chat", "m", Timeouts())
SPEC = {"class": "agent_session", "prompt_tokens": 256, "output_tokens": 4, "steps": 3, "tool_result_tokens": 8,
        "tool_time": 0, "samples": 5, "concurrency": 3, "warmup": 1, "workers": 2,
        "slo": {"prefix_reuse_min": None, "turn_ttft_p95": None, "session_e2e_p95": None, "turn_ttft_max": "10s"}}


def prepared(samples: int = 5, warmers: int = 2, steps: int = 3) -> PreparedSessions:
    w = make_workload("s", {**SPEC, "samples": samples, "steps": steps})
    first = [Prompt(f"salt{i}: sys", f"ask {i}", 256, 256) for i in range(samples)]
    warm = [[Prompt(f"warm{k}: sys", "warm", 256, 256)] for k in range(warmers)]
    plan = SessionPlan(steps, 4, 256, 8, ({"type": "function", "function": {"name": "f"}},), 0,
                       tuple(tuple(10.0 * i + t for t in range(steps)) for i in range(samples)))
    return PreparedSessions(w, None, plan, first, warm, 12, "nonce", ["a note"])


@pytest.mark.parametrize("c,n,slots", [(3, 2, [2, 1]), (5, 2, [3, 2]), (2, 2, [1, 1]), (8, 3, [3, 3, 2]), (4, 1, [4])])
def test_the_session_slots_are_the_concurrency_split_over_the_workers(c, n, slots):
    assert session_slots(c, n) == slots and sum(session_slots(c, n)) == c


def test_sessions_are_dealt_whole_each_with_its_first_prompt_turns_and_warm_up():
    prep = prepared()
    shards = make_agent_shards(prep, 2, TARGET, concurrency=3)
    assert [s.deal.sessions for s in shards] == [(0, 2, 4), (1, 3)]          # session i on worker i mod N
    for s in shards:
        assert [p.system for p in s.prompts] == [f"salt{i}: sys" for i in s.deal.sessions]  # prepared, not rebuilt
        assert s.positions == tuple(i * 3 + t for i in s.deal.sessions for t in range(3))  # its turns, whole
        assert s.deal.plan is prep.plan and s.planned == 3 * len(s.deal.sessions)
    assert [[p.system for p in s.warm] for s in shards] == [["warm0: sys"], ["warm1: sys"]]
    assert [s.streams for s in shards] == [2, 1]
    every = sorted(p for s in shards for p in s.positions)
    assert every == list(range(5 * 3))                                         # every turn once
    assert pickle.loads(pickle.dumps(shards[1])) == shards[1]                  # pure data: crosses a process
    # a hang guard: worker 0 runs 3 sessions 2 at a time (2 rounds), each 3 turns + its pauses
    assert span_s(shards, 10.0) == pytest.approx(2 * (3 * 10.0 + (40 + 41 + 42) / 1e3))


def test_a_worker_never_gets_more_slots_than_sessions():
    shards = make_agent_shards(prepared(samples=2), 2, TARGET, concurrency=8)
    assert [s.streams for s in shards] == [1, 1]


class FakeChat:
    """A chat client whose turns answer with a tool call and report their prompt's length."""
    api = "chat"

    def __init__(self, fail_at: tuple[int, int] | None = None):
        self.fail_at, self.sent = fail_at, []

    def stream_messages(self, messages, max_tokens, *, tools=None, expected_prompt_tokens=None, extra=None):
        from pytest_llm_latency.core.errors import MeasurementError

        session = int(messages[0]["content"].removeprefix("salt").split(":")[0])
        turn = sum(1 for m in messages if m["role"] == "assistant") + 1
        self.sent.append((session, turn))
        if (session, turn) == self.fail_at:
            raise MeasurementError("http_500", "boom")
        t = 1_000_000 * len(self.sent)
        return RequestRecord(t_send_ns=t, t_first_byte_ns=t + 10, t_end_ns=t + 100, prompt_tokens=256 * turn,
                             completion_tokens=2, chunks=[TokenChunk(t + 20, 1), TokenChunk(t + 90, 1)],
                             server_timings={"cached_tokens": 0 if turn == 1 else 250 * (turn - 1)},
                             content_parts=["ok"])


def run_worker(k: int, prep: PreparedSessions, client: FakeChat) -> tuple[ShardRun, list[int]]:
    shard = make_agent_shards(prep, 2, TARGET, concurrency=2)[k]
    out = ShardRun(k, 1000 + k, "host")
    seen: list[int] = []
    now = [0]

    def clock() -> int:
        now[0] += 1000
        return now[0]
    run_agent_shard(client, shard, out, 0, None, clock, lambda s: None, seen.append)
    return out, seen


def test_a_worker_runs_its_sessions_whole_and_names_itself_on_every_record():
    prep = prepared()
    out, seen = run_worker(1, prep, FakeChat())
    assert sorted(pos for pos, _ in out.outcomes) == [3, 4, 5, 9, 10, 11]  # sessions 1 and 3, turns 1-3
    assert all(o.worker == "1001@host" for _, o in out.outcomes)
    assert seen == list(range(1, 7))                                          # the test hook: after each request
    sessions = out.books["sessions"]
    assert [s.index for s in sessions] == [1, 3] and all(len(s.turns) == 3 for s in sessions)
    assert [s.pauses_ms for s in sessions] == [11 + 12.0, 31 + 32.0]  # its own drawn pauses, before turns 2-3


def test_the_merge_is_one_processs_result_and_a_failed_worker_an_error_naming_it():
    prep = prepared()
    a, _ = run_worker(0, prep, FakeChat())
    b, _ = run_worker(1, prep, FakeChat())
    shards = make_agent_shards(prep, 2, TARGET, concurrency=2)
    run = merge(shards, {0: a, 1: b}, {})
    sessions, records, failures = merge_sessions(run)
    assert [s.index for s in sessions] == [0, 1, 2, 3, 4] and not failures
    assert [r.prompt_tokens for r in records[:6]] == [256, 512, 768] * 2      # session-major: turns in order
    assert [r.worker for r in records[::3]] == ["1000@host", "1001@host"] * 2 + ["1000@host"]
    res = session_result(prep, sessions, records, failures, None)
    workers_summary(res, run)
    assert res.n == 15 and res.notes[0] == "a note" and res.agent.tools_overhead_tokens == 12
    assert res.load.workers == 2 and [x["worker"] for x in res.load.worker_lag] == ["1000@host", "1001@host"]
    assert [x["requests"] for x in res.load.worker_lag] == [9, 6]
    assert judge(res).verdict == "pass", res.failure_message()

    lost = merge(shards, {0: a}, {1: "worker 1 (pid 1001) died with exit code 86 after 2 of 6 requests"})
    sessions, records, failures = merge_sessions(lost)
    assert [s.index for s in sessions] == [0, 2, 4]
    res = session_result(prep, sessions, records, failures, None)
    workers_summary(res, lost)
    res = judge(res)
    assert res.verdict == "error" and res.load.workers == 2
    assert any("worker 1 (pid 1001) died with exit code 86" in e for e in res.errors), res.errors


def test_a_failed_turn_ends_its_session_on_its_worker_as_in_one_process():
    out, _ = run_worker(0, prepared(), FakeChat(fail_at=(2, 2)))  # session 2 breaks off at turn 2
    by_pos = dict(out.outcomes)
    assert sorted(by_pos) == [0, 1, 2, 6, 7, 12, 13, 14]                   # turn 3 of session 2 never sent
    assert isinstance(by_pos[7], Failure) and by_pos[7].worker == "1000@host"
    (broken,) = [s for s in out.books["sessions"] if s.index == 2]
    assert broken.failed == "turn 2: boom" and len(broken.turns) == 1


def test_a_deal_is_pure_data():
    deal = AgentDeal(prepared().plan, (0, 2))
    assert pickle.loads(pickle.dumps(deal)) == deal
