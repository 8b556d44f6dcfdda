"""Agent sessions as they really run: a multi-turn tool-calling loop per session.

Turn 1: the session's salt at the very start of the system text, then the workload's
system/user prompt (fitted like any prompt, ``client.tokens``) and the real ``tools``
array.  The tools' cost in the rendered prompt is measured once per workload (the same
probe messages sent with and without ``tools``; the difference is what the server's
template adds) and taken off the fitted prompt, so the server's count of turn 1 is
``prompt_tokens``.  Turn k+1: the transcript, the assistant's turn-k output as the server
produced it (a tool call in the message shape the API expects: ``tool_calls`` with its
``id``, then a ``tool`` message answering that id), and a seeded tool result of
``tool_result_tokens``.  Between turns, the client-side ``tool_time`` pause (outside model
time).  Salts: one per session, from the run's nonce, so sessions share no prefix and
a run never hits the cache an earlier run filled, while turns within a session do.

Sessions run at ``concurrency`` through ``run_sessions``: simple bounded threads for now,
one function for the load engine to take over.  Pure arithmetic and the verdict are in
``core.checks.agent_sessions`` (turn types in ``core.agent_turns``); tool-call assembly in ``core.tool_calls``.
"""
from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Callable

import httpx

from ..core import metrics as m
from ..core.agent_turns import Session, Turn, counters_reuse
from ..core.facts import AgentRun
from ..core.agent_spec import tool_result_text, tool_schemas
from ..core.errors import MeasurementError
from ..core.prompts import Prompt, salts
from ..core.record import RequestRecord
from ..core.result import Failure, WorkloadResult, measured, unprepared
from ..core.tool_calls import assemble
from ..core.workload import Workload
from .tokens import model_note, new_nonce, prepare_prompts



def tools_overhead(client, tools: list[dict], seed: int, nonce: str) -> int:
    """Prompt tokens the server's template adds for ``tools`` (0 when it ignores them): the same
    messages with and without them.  Each probe has its own salt of the run (equal lengths), so
    the probes hit no cache, neither each other's nor an earlier run's."""
    counts = []
    for t, salt in zip((None, tools), salts(seed, f"{nonce}|tools-probe", 2)):
        probe = [{"role": "system", "content": f"{salt}calibration probe: how many tokens do the tools add"},
                 {"role": "user", "content": "one two three"}]
        rec = client.stream_messages(probe, 1, tools=t)
        if rec.prompt_tokens is None:
            raise MeasurementError("no_usage", "the server reported no usage.prompt_tokens for the tools probe: "
                                               "turn 1 cannot be sized")
        counts.append(rec.prompt_tokens)
    return counts[1] - counts[0]


def chat_client(client):
    """Sessions send messages and tools: an OpenAI-compatible client set to completions gets a
    chat twin on the same connection pool (the server, model and key are the same)."""
    import copy

    if getattr(client, "api", None) == "completions" and hasattr(client, "stream_messages"):
        twin = copy.copy(client)
        twin.api = "chat"
        return twin
    if not hasattr(client, "stream_messages"):
        raise MeasurementError("config", "agent sessions need an OpenAI-compatible chat endpoint (messages and "
                                         "tools): use --llm-latency-api openai-chat")
    return client


def run_sessions(session: Callable[[int, Prompt], Session], prompts: list[Prompt], concurrency: int,
                 progress=None) -> list[Session]:
    """Run one session per prompt, ``concurrency`` at a time (bounded threads).  The seam
    where the load engine (``client/load.py``) can schedule sessions instead."""
    out: list[Session] = []
    if concurrency <= 1:
        for i, p in enumerate(prompts):
            out.append(session(i, p))
            if progress:
                progress(i + 1, len(prompts))
        return out
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="llm-latency-agent") as pool:
        for i, s in enumerate(pool.map(session, range(len(prompts)), prompts)):
            out.append(s)
            if progress:
                progress(i + 1, len(prompts))
    return out


def _turn_messages(rec: RequestRecord, session: int, turn: int, seed: int, result_tokens: int) -> list[dict]:
    """The assistant's output as the server produced it, then the tool's result."""
    calls = assemble(rec.tool_deltas).ordered()
    content = "".join(rec.content_parts or [])
    result = tool_result_text(seed, session, turn, result_tokens)
    if not calls:  # the server answered with text: no tool call to answer
        return [{"role": "assistant", "content": content}, {"role": "user", "content": f"Tool result: {result}"}]
    ids = [c.id or f"call_{session}_{turn}_{c.index}" for c in calls]
    msg = {"role": "assistant", "content": content or None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for i, c in zip(ids, calls)]}
    return [msg] + [{"role": "tool", "tool_call_id": i, "content": result} for i in ids]


def _turn(rec: RequestRecord, session: int, k: int) -> Turn:
    st = rec.server_timings
    cached = st.get("cached_tokens", st.get("cache_n"))
    calls = assemble(rec.tool_deltas)
    ms = lambda t: None if t is None else (t - rec.t_send_ns) / 1e6  # noqa: E731
    return Turn(session=session, turn=k, prompt_tokens=rec.prompt_tokens, cached_tokens=cached,
                ttft_ms=m.ttft_ms(rec), e2e_ms=m.e2e_ms(rec), tool_first_ms=ms(calls.t_first_ns),
                tool_complete_ms=ms(calls.t_complete_ns), tool_call=bool(calls.calls))


def measure_sessions(client, workload: Workload, *, seed: int = 0, nonce: str | None = None,
                     salt_context: str = "", progress=None, sleep: Callable[[float], None] = time.sleep,
                     extra: dict | None = None, **_ignored) -> WorkloadResult:
    """Run ``workload.samples`` sessions of ``workload.agent.steps`` turns; never raises for a
    server fault (a failed turn ends its session and counts as a failed request)."""
    spec = workload.agent
    assert spec is not None, "run_agent_sessions: a workload with agent sessions"
    nonce = new_nonce() if nonce is None else nonce
    notes: list[str] = []
    tools = tool_schemas(seed, spec.tools)
    try:
        client = chat_client(client)
        model = model_note(client)
        notes += [model] if model else []
        overhead = tools_overhead(client, tools, seed, f"{nonce}|{salt_context}")
        fitted = workload.prompt_tokens - overhead
        if fitted < 8:
            raise MeasurementError("config", f"the {spec.tools} tool schemas alone take {overhead} prompt tokens "
                                             f"of prompt_tokens {workload.prompt_tokens}: raise prompt_tokens")
        base = replace(workload, prompt_tokens=fitted, samples=workload.samples,
                       # a system message always: the salt heads it, before the tools the template renders
                       system_prompt_tokens=max(min(workload.system_prompt_tokens, fitted // 2), min(32, fitted // 2)),
                       shared_prefix_tokens=0)
        prompts, _how = prepare_prompts(client, base, seed=seed, nonce=f"{nonce}|{salt_context}|agent")
    except (MeasurementError, httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        kind = getattr(exc, "kind", "tokenize")
        msg = exc.message if isinstance(exc, MeasurementError) else f"{type(exc).__name__}: {exc}"
        res = unprepared(workload, Failure(kind, msg))
        res.measurement.nonce = nonce
        return res

    records: list[RequestRecord] = []
    failures: list[Failure] = []
    rng = random.Random(f"tool-time-{seed}-{nonce}")
    pauses = [[spec.tool_time.draw(rng) for _ in range(spec.steps)] for _ in prompts]

    def first_messages(p: Prompt) -> list[dict]:
        return ([{"role": "system", "content": p.system}] if p.system else []) + [{"role": "user", "content": p.user}]

    def session(index: int, p: Prompt, *, measured: bool = True) -> Session:
        s = Session(index)
        messages = first_messages(p)
        for k in range(1, spec.steps + 1):
            if k > 1:
                pause = pauses[index % len(pauses)][k - 1] / 1000.0
                s.pauses_ms += pause * 1000.0
                if pause:
                    sleep(pause)  # the live agent's tool runs: the session holds its slot
            try:
                rec = client.stream_messages(messages, workload.output_tokens, tools=tools,
                                             expected_prompt_tokens=workload.prompt_tokens if k == 1 else None,
                                             extra=extra)
            except MeasurementError as exc:
                s.failed = f"turn {k}: {exc.message}"
                if measured:
                    failures.append(Failure.from_error(exc))
                return s
            if measured:
                records.append(rec)
            s.turns.append(_turn(rec, index, k))
            messages = messages + _turn_messages(rec, index, k, seed, spec.tool_result_tokens)
        return s

    for p in prompts[:workload.warmup]:  # unmeasured turn 1s with their own salts: connections, first use
        _warm(client, first_messages(p), tools, workload.output_tokens)
    from .prometheus import delta
    from .drivers.pipeline import scrape as _scrape

    before = _scrape(client)  # the server's prefix-cache counters, where no turn reports its own
    sessions = run_sessions(session, prompts[workload.warmup:], workload.concurrency, progress)
    after = _scrape(client) if before is not None else None
    scraped = delta(before, after) if before is not None and after is not None else None
    res = measured(workload, records, failures)
    turn1 = sum(s.turns[0].prompt_tokens or 0 for s in sessions if s.turns)
    res.facts.agent = AgentRun(spec, tuple(sessions), counters_reuse(scraped, turn1))  # core.checks.agent_sessions
    res.server.metrics.update({k: round(x, 6) for k, x in (scraped or {}).items()})
    res.notes[:0] = notes
    res.measurement.nonce = nonce
    res.agent.tools_overhead_tokens = overhead
    for row in turn_table(sessions):  # JSON agent.turns: one row per turn index
        k = row.pop("turn")
        row.pop("n")
        res.agent.turn(k).update({key: val for key, val in row.items() if val is not None})
    first = [t for s in sessions for t in s.turns[:1]]
    off = [t.prompt_tokens - workload.prompt_tokens for t in first if t.prompt_tokens is not None]
    if any(off):
        res.notes.append(f"turn-1 prompt_tokens deviated from the planned {workload.prompt_tokens} on "
                         f"{sum(1 for d in off if d)} of {len(off)} sessions (by {min(off):+d}..{max(off):+d})")
    return res


def _warm(client, messages: list[dict], tools: list[dict], output_tokens: int) -> None:
    try:
        client.stream_messages(messages, output_tokens, tools=tools)
    except MeasurementError:
        pass  # a failing server shows in the measured sessions


def turn_table(sessions: list[Session]) -> list[dict]:
    """Per turn index: median TTFT, prompt, cached and new tokens (TTFT against the prompt)."""
    import statistics

    out = []
    for k in range(1, max((len(s.turns) for s in sessions), default=0) + 1):
        ts = [t for s in sessions for t in s.turns if t.turn == k]
        med = lambda vals: round(float(statistics.median(vals)), 4) if vals else None  # noqa: E731
        out.append({"turn": k, "n": len(ts),
                    "ttft_ms_p50": med([t.ttft_ms for t in ts if t.ttft_ms is not None]),
                    "prompt_tokens_p50": med([t.prompt_tokens for t in ts if t.prompt_tokens is not None]),
                    "cached_tokens_p50": med([t.cached_tokens for t in ts if t.cached_tokens is not None]),
                    "new_tokens_p50": med([t.new_tokens for t in ts if t.new_tokens is not None]),
                    "tool_first_ms_p50": med([t.tool_first_ms for t in ts if t.tool_first_ms is not None]),
                    "tool_complete_ms_p50": med([t.tool_complete_ms for t in ts if t.tool_complete_ms is not None])})
    return out
