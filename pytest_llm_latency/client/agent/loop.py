"""An agent session's turn loop (``client.drivers.agent_session``): what one process -- the test process,
or a worker process running the sessions dealt to it (``client.agent.shard``) -- does per session, the turns
docs/agent-sessions.md describes.  Everything the loop needs is a ``SessionPlan``: pure data, made once by the
controller (``client.agent.plan``), so a worker process runs exactly the turns the test process would.
"""
from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from ...core.measure import metrics as m
from ...core.spec.agent_spec import tool_result_text
from ...core.measure.agent_turns import Session, Turn
from ...core.errors import MeasurementError
from ...core.prompts.synthesis import Prompt, salts
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure
from ...core.measure.tool_calls import assemble

#: ``keep(session, turn, outcome)``: a measured turn's record, or the failure that ended its session
Keep = Callable[[int, int, "RequestRecord | Failure"], None]


@dataclass(frozen=True)
class SessionPlan:
    """What every session's turns need, the same in every process: pure data, no client."""
    steps: int
    output_tokens: int
    prompt_tokens: int                          # turn 1's planned length, as the server counts it
    tool_result_tokens: int
    tools: tuple[dict, ...]                     # the ``tools`` array every turn sends
    seed: int                                   # the tool results' seed
    pauses_ms: tuple[tuple[float, ...], ...]    # per session index: its drawn tool_time before each turn
    extra: dict | None = None                   # extra request fields

    def turn_position(self, session: int, turn: int) -> int:
        """Where turn ``turn`` (1-based) of session ``session`` stands in the session-major order."""
        return session * self.steps + turn - 1


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
        raise MeasurementError("config", "agent sessions need messages and tools: use --llm-latency-api "
                                         "openai-chat, openai-responses or anthropic-messages")
    return client


def first_messages(p: Prompt) -> list[dict]:
    """Turn 1's messages: the salted system text (always there: the salt heads it), then the ask."""
    return ([{"role": "system", "content": p.system}] if p.system else []) + [{"role": "user", "content": p.user}]


def run_session(client, plan: SessionPlan, index: int, prompt: Prompt, keep: Keep,
                sleep: Callable[[float], None] = time.sleep) -> Session:
    """Session ``index`` from its prepared first prompt; never raises for a server fault (a failed
    turn ends the session: ``keep`` gets its failure, and the session says why it stopped)."""
    s = Session(index)
    messages = first_messages(prompt)
    for k in range(1, plan.steps + 1):
        if k > 1:
            pause = plan.pauses_ms[index][k - 1] / 1000.0
            s.pauses_ms += pause * 1000.0
            if pause:
                sleep(pause)  # the live agent's tool runs: the session holds its slot
        try:
            rec = client.stream_messages(messages, plan.output_tokens, tools=list(plan.tools),
                                         expected_prompt_tokens=plan.prompt_tokens if k == 1 else None,
                                         extra=plan.extra)
        except MeasurementError as exc:
            s.failed = f"turn {k}: {exc.message}"
            keep(index, k, Failure.from_error(exc))
            return s
        keep(index, k, rec)
        s.turns.append(turn_of(rec, index, k))
        messages = messages + turn_messages(rec, index, k, plan.seed, plan.tool_result_tokens)
    return s


def run_sessions(session: Callable[[int, Prompt], Session], prompts: list[Prompt], concurrency: int,
                 progress=None) -> list[Session]:
    """Run one session per prompt (``session(i, prompts[i])``), ``concurrency`` at a time (bounded
    threads), in prompt order.  The seam where the load engine (``client/load/engine.py``) can schedule
    sessions instead."""
    out: list[Session] = []
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="llm-latency-agent") if concurrency > 1 \
        else None
    with pool or contextlib.nullcontext():  # one at a time on this thread, or ``concurrency`` at once
        for i, s in enumerate((map if pool is None else pool.map)(session, range(len(prompts)), prompts)):
            out.append(s)
            if progress:
                progress(i + 1, len(prompts))
    return out


def warm(client, prompts: list[Prompt], plan: SessionPlan) -> int:
    """Unmeasured turn 1s with their own salts (connections, first use); how many failed (a failing
    server shows in the measured sessions)."""
    failed = 0
    for p in prompts:
        try:
            client.stream_messages(first_messages(p), plan.output_tokens, tools=list(plan.tools))
        except MeasurementError:
            failed += 1
    return failed


def turn_messages(rec: RequestRecord, session: int, turn: int, seed: int, result_tokens: int) -> list[dict]:
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


def turn_of(rec: RequestRecord, session: int, k: int) -> Turn:
    """Turn ``k`` of ``session`` as measured (``core.measure.agent_turns``)."""
    st = rec.server_timings
    cached = st.get("cached_tokens", st.get("cache_n"))
    calls = assemble(rec.tool_deltas)
    ms = lambda t: None if t is None else (t - rec.t_send_ns) / 1e6  # noqa: E731
    return Turn(session=session, turn=k, prompt_tokens=rec.prompt_tokens, cached_tokens=cached,
                ttft_ms=m.ttft_ms(rec), e2e_ms=m.e2e_ms(rec), tool_first_ms=ms(calls.t_first_ns),
                tool_complete_ms=ms(calls.t_complete_ns), tool_call=bool(calls.calls))
