"""The agent budgets' verdict over measured sessions (``core.measure.agent_turns``), and their figures.
``prefix_reuse_min`` is judged on turns 2+ together (turn 1's salt is new), and a failure names the
turns where reuse fell below the floor and what the pattern says
(docs/agent-sessions.md#why-prefix-reuse-is-the-number-that-matters).
Pure: no I/O; values in ms; an empty sample is an error, never 0.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field

from ..spec.agent_spec import AGENT_METRICS, AgentBudget, AgentSpec
from ..measure.agent_turns import Session, reuse, reuse_by_turn, turn_span, turn_values
from ..findings import Finding, found, part_update
from ..measure.stats import fmt_stat, min_samples_for, summarize

_TURN_REUSE = re.compile(r"^agent_turn(\d+)_reuse$")


def diagnose_reuse(sessions: list[Session], floor: float) -> str | None:
    """The ``prefix_reuse_min`` failure message, or None when turn-2+ reuse meets ``floor``."""
    later = [t for s in sessions for t in s.turns if t.turn >= 2]
    overall = reuse(later)
    if overall is None or overall >= floor:
        return None
    by_turn = reuse_by_turn(sessions)
    low = [k for k, r in by_turn.items() if k >= 2 and r < floor]
    low_reuse = reuse([t for t in later if t.turn in low]) if low else overall
    head = (f"prefix reuse {low_reuse:.0%} on {turn_span(low or sorted(k for k in by_turn if k >= 2))} "
            f"(expected ≥ {floor:.0%}; {overall:.0%} over all turn-2+ prompt tokens)")
    cached = [t.cached_tokens or 0 for t in later]
    if not any(cached):
        return (f"{head}: the server reused nothing from the earlier turns -- is prefix caching on "
                f"(vLLM --enable-prefix-caching, SGLang without --disable-radix-cache, llama.cpp cache_prompt)?")
    first = {s.index: s.turns[0].prompt_tokens for s in sessions if s.turns and s.turns[0].prompt_tokens}
    stuck = [t for s in sessions for t in s.turns if t.turn >= 3 and s.index in first]
    second = {s.index: s.turns[1].prompt_tokens for s in sessions if len(s.turns) > 1 and s.turns[1].prompt_tokens}
    # stuck: from turn 3 on, the cache holds turn 1's prompt (and the few tokens up to the first
    # tool call's arguments) but not the half of turn 2's prompt beyond it
    if stuck and by_turn.get(2, 0.0) >= floor and all(
            (t.cached_tokens or 0) < (first[t.session] + second.get(t.session, first[t.session])) / 2 for t in stuck):
        return (f"{head}: turn 2 reused turn 1's prompt, but later turns reuse no more than turn 1's prompt: "
                f"the cache stops at the first tool call — does the chat template rewrite tool-call history?")
    worst = min(low or [2], key=lambda k: by_turn.get(k, 1.0))
    return (f"{head}: turn {worst} was served {by_turn.get(worst, 0.0):.0%} from cache; turns should reuse the "
            f"whole previous turn -- a transcript that changes before its end (timestamps, reordered tools) "
            f"or a cache too small for the sessions evicts it")


@dataclass
class AgentVerdict:
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def _judge_latency(b: AgentBudget, sessions: list[Session], v: AgentVerdict) -> None:
    label = AGENT_METRICS[b.metric]
    values = turn_values(sessions, b.metric)
    failed_sessions = sum(1 for s in sessions if s.failed)
    if b.metric == "session_e2e":
        values += [float("inf")] * failed_sessions  # a session that broke off is a miss
    if not values:
        why = ("no turn produced a complete tool call (the server answered with text: does its chat template "
               "and tool parser accept tools?)" if b.metric == "tool_call_complete" else "no completed turn")
        v.errors.append(f"{label} {b.stat}: no values to check {b.key} against -- {why}")
        return
    need = min_samples_for(b.stat)
    if len(values) < need:
        v.errors.append(f"{label} {b.stat}: {len(values)} values cannot support a {b.stat} (needs >= {need}); "
                        f"raise samples (sessions) or steps")
        return
    s = summarize(values, label)
    observed = s.get(b.stat)
    if observed > b.limit:
        where = ""
        if b.metric != "session_e2e":
            worst = max((t for ss in sessions for t in ss.turns), default=None,
                        key=lambda t: getattr(t, "ttft_ms" if b.metric == "turn_ttft" else "tool_complete_ms")
                        or 0.0)
            if worst is not None:
                where = f"; slowest on turn {worst.turn} of session {worst.session + 1} ({worst.prompt_tokens} " \
                        f"prompt tokens, {worst.cached_tokens if worst.cached_tokens is not None else '?'} cached)"
        v.failed.append(f"{label} {b.stat} {fmt_stat(observed)} ms > budget {b.limit:g} ms (n={s.n}, "
                        f"p50 {fmt_stat(s.p50)} ms){where}")


def judge(spec: AgentSpec, sessions: list[Session], *, counters_reuse: float | None = None) -> AgentVerdict:
    """Figures (``extra``) and the agent budgets' verdict over ``sessions``.

    ``counters_reuse``: turn-2+ reuse from the server's prefix-cache counters over the run
    (vLLM/SGLang /metrics), used where no turn reported its cached tokens."""
    v = AgentVerdict()
    done = [s for s in sessions if not s.failed]
    v.extra.update({"agent_sessions": len(sessions), "agent_sessions_completed": len(done),
                    "agent_steps": spec.steps})
    later = [t for s in sessions for t in s.turns if t.turn >= 2]
    per_request = reuse(later)
    r = per_request if per_request is not None else counters_reuse
    if r is not None:
        v.extra["agent_prefix_reuse"] = round(r, 4)
        v.extra["agent_prefix_reuse_source"] = "per request" if per_request is not None else "server counters"
    first = [t.cached_tokens for s in sessions for t in s.turns[:1] if t.cached_tokens is not None]
    if first:
        v.extra["agent_turn1_cached_tokens_max"] = max(first)
    for k, val in reuse_by_turn(sessions).items():
        v.extra[f"agent_turn{k}_reuse"] = round(val, 4)
    for metric in AGENT_METRICS:
        if vals := turn_values(sessions, metric):
            s = summarize(vals, metric)
            v.extra[f"agent_{metric}_ms_p50"] = round(s.p50, 4)
            v.extra[f"agent_{metric}_ms_p95"] = round(s.p95, 4)
    calls = sum(1 for s in sessions for t in s.turns if t.tool_call)
    turns = sum(len(s.turns) for s in sessions)
    v.extra["agent_tool_call_turns"] = calls
    if turns and calls < turns:
        v.notes.append(f"{turns - calls} of {turns} turns produced no tool call (the server answered with "
                       f"text); their output was sent back as an assistant message and the tool result as a "
                       f"user message")
    if broke := [s for s in sessions if s.failed]:
        v.notes.append(f"{len(broke)} of {len(sessions)} sessions broke off: session {broke[0].index + 1}: "
                       f"{broke[0].failed}")
    for b in spec.budgets:
        if b.metric != "prefix_reuse":
            _judge_latency(b, sessions, v)
            continue
        if not later:
            v.errors.append(f"{b.key}: no turn 2+ completed: nothing to judge prefix reuse on")
        elif per_request is None and counters_reuse is None:
            v.errors.append(f"{b.key}: the server reported no cached prompt tokens (no usage."
                            f"prompt_tokens_details.cached_tokens, no timings.cache_n, no prefix-cache counters "
                            f"on /metrics): prefix reuse cannot be judged")
        elif per_request is None and counters_reuse is not None:
            if counters_reuse < b.limit:
                v.failed.append(f"prefix reuse {counters_reuse:.0%} over turns 2+ by the server's prefix-cache "
                                f"counters (expected ≥ {b.limit:.0%}); no per-turn counts to name the turn")
        elif msg := diagnose_reuse(sessions, b.limit):
            v.failed.append(msg)
    return v


def check_agent_sessions(res) -> list[Finding]:
    """The agent budgets over the measured sessions (``facts.agent``); their figures go to ``res.agent``."""
    run = res.facts.agent
    if run is None:
        return []
    v = judge(run.spec, list(run.sessions), counters_reuse=run.counters_reuse)
    figures = {k.removeprefix("agent_"): x for k, x in v.extra.items() if not _TURN_REUSE.match(k)}
    reuse = {int(t.group(1)): x for k, x in v.extra.items() if (t := _TURN_REUSE.match(k))}
    if reuse:  # per turn, into agent.turns (a copy of the measured rows: the part is set by judge)
        turns = {r["turn"]: dict(r) for r in res.agent.turns}
        for k, x in reuse.items():
            turns.setdefault(k, {"turn": k})["reuse"] = x
        figures["turns"] = [turns[k] for k in sorted(turns)]
    return ([part_update("agent_sessions", "agent", **figures)] + found("agent_sessions", "failed", v.failed)
            + found("agent_sessions", "error", v.errors) + found("agent_sessions", "note", v.notes))
