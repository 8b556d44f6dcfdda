"""Agent sessions as measured: turns, sessions, prefix reuse over turns (cached / prompt tokens).

Prefix reuse of a turn = the prompt tokens the server says it served from its cache
(``usage.prompt_tokens_details.cached_tokens``, llama.cpp ``timings.cache_n``) over the
turn's prompt tokens.  Pure; the agent budgets are judged in ``core.checks.agent_sessions``.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Turn:
    session: int
    turn: int                       # 1-based
    prompt_tokens: int | None       # the server's count
    cached_tokens: int | None       # the server's own report (None: not reported)
    ttft_ms: float | None
    e2e_ms: float | None
    tool_first_ms: float | None     # first delta.tool_calls
    tool_complete_ms: float | None  # arguments complete JSON
    tool_call: bool = False         # the server produced a tool call

    @property
    def new_tokens(self) -> int | None:
        if self.prompt_tokens is None or self.cached_tokens is None:
            return None
        return self.prompt_tokens - self.cached_tokens


@dataclass
class Session:
    index: int
    turns: list[Turn] = field(default_factory=list)
    failed: str | None = None       # why the session stopped early
    pauses_ms: float = 0.0          # tool time, outside model time

    @property
    def model_ms(self) -> float | None:
        """Session model time: the sum of its turns' E2E (tool pauses excluded)."""
        if self.failed or not self.turns or any(t.e2e_ms is None for t in self.turns):
            return None
        return sum(t.e2e_ms for t in self.turns if t.e2e_ms is not None)


def reuse(turns: list[Turn]) -> float | None:
    """Cached / prompt tokens over ``turns`` (None when the server reported no cached counts)."""
    known = [t for t in turns if t.cached_tokens is not None and t.prompt_tokens]
    if not known:
        return None
    return sum(t.cached_tokens or 0 for t in known) / sum(t.prompt_tokens or 0 for t in known)


def counters_reuse(metrics_delta: dict[str, float] | None, turn1_prompt_tokens: int) -> float | None:
    """Turn-2+ reuse from ``/metrics`` prefix-cache counters over the sessions (vLLM, SGLang,
    llama.cpp), for servers that report no per-request cached tokens: the hits over the prompt
    tokens the server saw beyond the sessions' turn 1s (which, salted, hit nothing)."""
    from .prefix_cache import COUNTERS

    for hits_key, totals in COUNTERS:
        if metrics_delta and hits_key in metrics_delta:
            later = sum(metrics_delta.get(k, 0.0) for k in totals) - turn1_prompt_tokens
            return min(metrics_delta[hits_key] / later, 1.0) if later > 0 else None
    return None


def reuse_by_turn(sessions: list[Session]) -> dict[int, float]:
    steps = max((len(s.turns) for s in sessions), default=0)
    by_turn = {k: reuse([t for s in sessions for t in s.turns if t.turn == k]) for k in range(1, steps + 1)}
    return {k: r for k, r in by_turn.items() if r is not None}


def turn_span(turns: list[int]) -> str:
    """[2, 3, 4, 5] -> 'turns 2–5'; [3] -> 'turn 3'; [2, 4] -> 'turns 2, 4'."""
    if len(turns) == 1:
        return f"turn {turns[0]}"
    if turns == list(range(turns[0], turns[-1] + 1)):
        return f"turns {turns[0]}–{turns[-1]}"
    return "turns " + ", ".join(map(str, turns))


def turn_values(sessions: list[Session], metric: str) -> list[float]:
    if metric == "session_e2e":
        return [s.model_ms for s in sessions if s.model_ms is not None]
    attr = {"turn_ttft": "ttft_ms", "tool_call_complete": "tool_complete_ms"}[metric]
    return [getattr(t, attr) for s in sessions for t in s.turns if getattr(t, attr) is not None]
