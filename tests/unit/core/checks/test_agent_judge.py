"""Agent-session arithmetic and verdicts (core.measure.agent_turns, core.checks.agent_sessions, core.spec.agent_spec):
prefix reuse per turn, the diagnosis naming the turn, the latency budgets, and the spec's errors."""
import pytest

from pytest_llm_latency.core.measure.agent_turns import Session, Turn, reuse, turn_span
from pytest_llm_latency.core.checks.agent_sessions import diagnose_reuse, judge
from pytest_llm_latency.core.spec.agent_spec import make_agent, tool_schemas
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.workload import make_workload, with_budgets


def session(i, prompts, cached, ttft=10.0, e2e=100.0, complete=90.0):
    return Session(i, [Turn(i, k + 1, p, c, ttft, e2e, ttft, complete, True)
                       for k, (p, c) in enumerate(zip(prompts, cached))])


PROMPTS = [1024, 1100, 1176, 1252, 1328]
HEALTHY = [0, 1024, 1088, 1168, 1248]           # each turn reuses the previous prompt (block-floored)
STUCK = [0, 1024, 1024, 1024, 1024]             # the cache stops at the first tool call
NOTHING = [0, 0, 0, 0, 0]


def spec(**slo):
    """Only the given budgets (the agent_session class defaults dropped)."""
    defaults = {"turn_ttft_p95": None, "session_e2e_p95": None, "prefix_reuse_min": None}
    return make_workload("a", {"steps": 5, "slo": {**defaults, **slo}}).agent


def test_reuse_is_cached_over_prompt_tokens_of_turn_2_plus():
    s = [session(0, PROMPTS, HEALTHY), session(1, PROMPTS, HEALTHY)]
    later = [t for x in s for t in x.turns if t.turn >= 2]
    assert reuse(later) == pytest.approx(sum(HEALTHY[1:]) / sum(PROMPTS[1:]))
    assert reuse([Turn(0, 2, 100, None, 1, 1, None, None)]) is None  # not reported: unknown, never 0
    v = judge(spec(prefix_reuse_min=0.9), s)
    assert v.failed == [] and v.errors == []
    assert v.extra["agent_prefix_reuse"] == pytest.approx(sum(HEALTHY[1:]) / sum(PROMPTS[1:]), abs=1e-4)
    assert v.extra["agent_turn1_cached_tokens_max"] == 0


def test_cache_stopping_at_the_first_tool_call_is_named_with_its_turns():
    v = judge(spec(prefix_reuse_min=0.9), [session(0, PROMPTS, STUCK), session(1, PROMPTS, STUCK)])
    (msg,) = v.failed
    low = sum(STUCK[2:]) / sum(PROMPTS[2:])
    assert msg.startswith(f"prefix reuse {low:.0%} on turns 3–5 (expected ≥ 90%")
    assert "the cache stops at the first tool call — does the chat template rewrite tool-call history?" in msg


def test_no_reuse_at_all_says_caching_is_off():
    msg = diagnose_reuse([session(0, PROMPTS, NOTHING)], 0.9)
    assert msg.startswith("prefix reuse 0% on turns 2–5 (expected ≥ 90%") and "is prefix caching on" in msg


def test_partial_reuse_names_the_worst_turn():
    cached = [0, 1024, 1088, 600, 1248]
    msg = diagnose_reuse([session(0, PROMPTS, cached)], 0.9)
    assert msg.startswith("prefix reuse 48% on turn 4") and "turn 4 was served 48% from cache" in msg


def test_not_reported_is_an_error_not_a_pass():
    s = [Session(0, [Turn(0, k, 100 * k, None, 1.0, 2.0, None, None) for k in (1, 2, 3)])]
    v = judge(spec(prefix_reuse_min=0.9), s)
    assert v.failed == [] and "reported no cached prompt tokens" in v.errors[0]
    v2 = judge(spec(prefix_reuse_min=0.9), s, counters_reuse=0.5)
    assert v2.failed == ["prefix reuse 50% over turns 2+ by the server's prefix-cache counters (expected ≥ 90%); "
                         "no per-turn counts to name the turn"]


def test_latency_budgets_sessions_and_tool_calls():
    sessions = [session(i, PROMPTS, HEALTHY, ttft=10.0 + i, e2e=100.0, complete=50.0) for i in range(20)]
    v = judge(spec(turn_ttft_p95="30ms", session_e2e_p95="400ms", tool_call_complete_p95="40ms"), sessions)
    assert len(v.failed) == 2
    assert v.failed[0].startswith("session model time p95 500.0 ms > budget 400 ms (n=20")
    assert v.failed[1].startswith("tool call complete p95 50.0 ms > budget 40 ms (n=100")
    few = judge(spec(session_e2e_p95="1s"), sessions[:3])
    assert "3 values cannot support a p95 (needs >= 20)" in few.errors[0]
    broke = sessions[:19] + [Session(19, sessions[19].turns[:2], failed="turn 3: reset")]
    v3 = judge(spec(session_e2e_max="10s"), broke)
    assert v3.failed[0].startswith("session model time max inf ms > budget 10000 ms")  # a broken session: a miss
    assert "1 of 20 sessions broke off: session 20: turn 3: reset" in v3.notes


def test_tool_call_budget_without_any_tool_call_is_an_error():
    s = [Session(0, [Turn(0, 1, 100, 0, 1.0, 2.0, None, None, False)])]
    v = judge(spec(tool_call_complete_p50="1s"), s)
    assert "no turn produced a complete tool call" in v.errors[0]
    assert "1 of 1 turns produced no tool call" in v.notes[0]


def test_turn_span_words():
    assert (turn_span([2, 3, 4, 5]), turn_span([3]), turn_span([2, 4])) == ("turns 2–5", "turn 3", "turns 2, 4")


def test_spec_parsing_and_its_errors():
    w = make_workload("s", {"class": "agent_session", "tool_time": {"min": "100ms", "max": "300ms"}})
    assert (w.agent.steps, w.prompt_tokens, w.output_tokens) == (5, 2048, 32)
    assert {b.key for b in w.agent.budgets} == {"turn_ttft_p95", "session_e2e_p95", "prefix_reuse_min"}
    assert not any(b.key == "prefix_reuse_min" for b in w.budgets)  # judged on sessions, not per request
    assert (w.agent.tool_time.low_ms, w.agent.tool_time.high_ms) == (100.0, 300.0)
    with pytest.raises(ConfigError, match=r"slo.prefix_reuse_min: prefix_reuse_min belongs to an agent session: "
                                          r"set steps"):
        make_workload("w", {"class": "chat", "slo": {"prefix_reuse_min": 0.9}})
    with pytest.raises(ConfigError, match=r"prefix_reuse_min is the fraction .* in \(0, 1\]"):
        make_workload("w", {"steps": 3, "slo": {"prefix_reuse_min": 90}})
    with pytest.raises(ConfigError, match=r"steps: expected an integer >= 2"):
        make_workload("w", {"class": "agent", "steps": 1})
    with pytest.raises(ConfigError, match=r"max \(100 ms\) is below min"):
        make_workload("w", {"steps": 2, "tool_time": {"min": "200ms", "max": "100ms"}})
    with pytest.raises(ConfigError, match="unknown budget 'turn_tft_p95'"):
        make_workload("w", {"steps": 2, "slo": {"turn_tft_p95": "1s"}})
    w2 = with_budgets(w, {"prefix_reuse_min": 0.5}, "check()")
    assert w2.agent.budget_map()["prefix_reuse_min"].limit == 0.5
    with pytest.raises(ConfigError, match="needs a session workload"):
        with_budgets(make_workload("c", {"class": "chat"}), {"prefix_reuse_min": 0.5}, "marker")
    assert make_agent("chat", {}, {}, lambda p: "x", float) is None


def test_tool_schemas_are_seeded_json_schema_functions():
    a, b = tool_schemas(3, 4), tool_schemas(3, 4)
    assert a == b and len(a) == 4 and a != tool_schemas(4, 4)
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in a)


def test_counters_reuse_where_no_turn_reports_its_cached_tokens():
    from pytest_llm_latency.core.measure.agent_turns import counters_reuse

    vllm = {"vllm:prefix_cache_hits_total": 900.0, "vllm:prefix_cache_queries_total": 2000.0}
    assert counters_reuse(vllm, 1000) == pytest.approx(0.9)  # 900 of the 1000 turn-2+ tokens
    llama = {"llamacpp:prompt_tokens_cached_total": 450.0, "llamacpp:prompt_tokens_total": 550.0}
    assert counters_reuse(llama, 500) == pytest.approx(0.9)  # llama.cpp counts cached apart
    assert counters_reuse({}, 10) is None and counters_reuse(None, 10) is None
    assert counters_reuse(vllm, 2000) is None  # nothing beyond turn 1: no figure, never 0
