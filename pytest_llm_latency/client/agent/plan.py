"""What an agent-session measurement does once, in the test process, however its sessions run
(here, or dealt to worker processes: ``client.agent.workers``): the preparation -- the tools'
cost in the rendered prompt (one probe), the first-turn prompts fitted to ``prompt_tokens`` with
one salt per session from the run's nonce, the drawn tool pauses -- and the result built from the
sessions and their exact records (the facts, the per-turn table, the notes).

Salts: a session's salt is its prompt's place in one seeded sequence (``core.prompts.synthesis.salts``), so
session ``i`` has the same first prompt whether it runs here or on a worker; the workers' extra
warm-up prompts come after the sessions' (their salts are new, and nobody else's).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

import httpx

from ...core.spec.agent_spec import tool_schemas
from ...core.measure.agent_turns import Session, counters_reuse
from ...core.errors import MeasurementError
from ...core.result.facts import AgentRun
from ...core.prompts.synthesis import Prompt
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure, WorkloadResult, measured, unprepared
from ...core.spec.workload import Workload
from .loop import SessionPlan, chat_client, tools_overhead
from ..prepare.tokens import model_note, prepare_prompts


@dataclass
class PreparedSessions:
    """The sessions as the controller prepared them: the chat client, the plan every turn follows,
    each session's first prompt (``first[i]``: session ``i``), the warm-up prompts (``warm[k]``:
    worker ``k``'s, or this process's as ``warm[0]``), the notes and the measured tools overhead."""
    workload: Workload
    client: Any
    plan: SessionPlan
    first: list[Prompt]
    warm: list[list[Prompt]]
    overhead: int
    nonce: str
    notes: list[str]


def prepare_sessions(client, workload: Workload, *, seed: int, nonce: str, salt_context: str = "",
                     extra: dict | None = None, warmers: int = 1) -> "PreparedSessions | WorkloadResult":
    """Everything that must happen once: the tools probe, fitting the first turns, the salts and the
    pauses, with ``warmup`` warm-up prompts for each of ``warmers`` processes.  A probe or tokenize
    failure is the unprepared result (judged as such), never an exception."""
    spec = workload.agent
    assert spec is not None, "prepare_sessions: a workload with agent sessions"
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
        n, warmup = workload.samples, workload.warmup
        base = replace(workload, prompt_tokens=fitted, samples=n + warmup * (warmers - 1),
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
    # [this process's / worker 0's warm-up] [the sessions] [workers 1..N-1's warm-ups] [a cold prompt]
    first = prompts[warmup:warmup + n]
    later = prompts[warmup + n:]
    warm = [prompts[:warmup]] + [later[k * warmup:(k + 1) * warmup] for k in range(warmers - 1)]
    rng = random.Random(f"tool-time-{seed}-{nonce}")
    pauses = tuple(tuple(spec.tool_time.draw(rng) for _ in range(spec.steps)) for _ in range(n))
    plan = SessionPlan(spec.steps, workload.output_tokens, workload.prompt_tokens, spec.tool_result_tokens,
                       tuple(tools), seed, pauses, extra)
    return PreparedSessions(workload, client, plan, first, warm, overhead, nonce, notes)


def session_result(prep: PreparedSessions, sessions: list[Session], records: list[RequestRecord],
                   failures: list[Failure], scraped: dict[str, float] | None) -> WorkloadResult:
    """The measurement of ``sessions`` (their exact ``records`` and ``failures``; ``scraped``: the
    server's ``/metrics`` delta over them), built the same for one process and for workers."""
    workload = prep.workload
    assert workload.agent is not None
    res = measured(workload, records, failures)
    turn1 = sum(s.turns[0].prompt_tokens or 0 for s in sessions if s.turns)
    res.facts.agent = AgentRun(workload.agent, tuple(sessions), counters_reuse(scraped, turn1))
    res.server.metrics.update({k: round(x, 6) for k, x in (scraped or {}).items()})
    res.notes[:0] = prep.notes
    res.measurement.nonce = prep.nonce
    res.agent.tools_overhead_tokens = prep.overhead
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


def turn_table(sessions: list[Session]) -> list[dict]:
    """Per turn index: median TTFT, prompt, cached and new tokens (TTFT against the prompt)."""
    import statistics

    out = []
    for k in range(1, max((len(s.turns) for s in sessions), default=0) + 1):
        ts = [t for s in sessions for t in s.turns if t.turn == k]
        row: dict = {"turn": k, "n": len(ts)}
        for name in ("ttft_ms", "prompt_tokens", "cached_tokens", "new_tokens", "tool_first_ms", "tool_complete_ms"):
            vals = [v for v in (getattr(t, name) for t in ts) if v is not None]
            row[f"{name}_p50"] = round(float(statistics.median(vals)), 4) if vals else None
        out.append(row)
    return out
