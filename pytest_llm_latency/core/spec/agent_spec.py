"""Agent sessions (``steps: K`` or ``class: agent_session``): the loop's shape and its budgets.

A session is K turns.  Turn 1 is a system text, the real ``tools`` array and a user ask
(``prompt_tokens`` in all, as the server counts the rendered prompt); turn k+1 is the
transcript so far, the assistant's turn-k tool call as the server produced it, and a tool
result of ``tool_result_tokens``.  Between turns a client-side ``tool_time`` pause holds the
session (a live agent waiting on its tool); it is not model time.

Budgets (in ``slo:`` beside the latency budgets, judged by ``core.checks.agent_sessions``):

* ``turn_ttft_<stat>``           -- TTFT of every turn (ms);
* ``session_e2e_<stat>``         -- a session's model time: the sum of its turns' E2E,
  without the tool pauses (ms);
* ``tool_call_complete_<stat>``  -- from sending a turn to its tool call's arguments
  being complete JSON (ms);
* ``prefix_reuse_min``           -- the fraction of turn-2+ prompt tokens the server
  served from its prefix cache (a floor in (0, 1]).

Pure: parses plain mappings, raises ``ConfigError`` naming the key and the fix.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import ConfigError
from .budgets import parse_int
from ..measure.stats import STATS

AGENT_KEYS = ("steps", "tool_time", "tool_result_tokens", "tools")
AGENT_METRICS = {"turn_ttft": "turn TTFT", "session_e2e": "session model time",
                 "tool_call_complete": "tool call complete"}
REUSE_BUDGET = "prefix_reuse_min"
AGENT_BUDGET_KEYS = tuple(f"{m}_{s}" for m in AGENT_METRICS for s in STATS) + (REUSE_BUDGET,)
AGENT_CLASS = "agent_session"
#: ``class: agent_session`` when the spec does not say otherwise
DEFAULT_STEPS, DEFAULT_TOOL_RESULT_TOKENS, DEFAULT_TOOL_TIME_MS, DEFAULT_TOOLS = 5, 64, 200.0, 4


@dataclass(frozen=True)
class AgentBudget:
    key: str
    metric: str          # turn_ttft | session_e2e | tool_call_complete | prefix_reuse
    stat: str            # a STATS entry, or "min" for prefix_reuse
    limit: float         # ms, or a fraction for prefix_reuse
    source: str = ""

    @property
    def is_floor(self) -> bool:
        return self.metric == "prefix_reuse"


@dataclass(frozen=True)
class ToolTime:
    """The client-side pause between turns: fixed, or uniform in [low, high] (seeded)."""

    low_ms: float
    high_ms: float

    def draw(self, rng: random.Random) -> float:
        return self.low_ms if self.high_ms == self.low_ms else rng.uniform(self.low_ms, self.high_ms)


@dataclass(frozen=True)
class AgentSpec:
    steps: int
    tool_result_tokens: int
    tool_time: ToolTime
    tools: int                               # how many function schemas the ``tools`` array holds
    budgets: tuple[AgentBudget, ...] = ()

    def budget_map(self) -> dict[str, AgentBudget]:
        return {b.key: b for b in self.budgets}


#: ``(value, where) -> ms``: ``core.spec.workload.parse_duration_ms``, passed in (workload imports this module)
DurationParser = Callable[[Any, str], float]


def parse_tool_time(value: Any, where: str, parse_duration_ms: DurationParser) -> ToolTime:
    """``200ms`` / ``0`` (no pause) / ``{min: 100ms, max: 300ms}`` (uniform, seeded)."""
    if value == 0 and not isinstance(value, bool):
        return ToolTime(0.0, 0.0)
    if isinstance(value, Mapping):
        unknown = set(value) - {"min", "max"}
        if unknown or not {"min", "max"} <= set(value):
            raise ConfigError(f"{where}: a tool_time distribution is {{min: 100ms, max: 300ms}} (uniform), "
                              f"got {dict(value)!r}")
        low = parse_duration_ms(value["min"], f"{where}.min")
        high = parse_duration_ms(value["max"], f"{where}.max")
        if high < low:
            raise ConfigError(f"{where}: max ({high:g} ms) is below min ({low:g} ms)")
        return ToolTime(low, high)
    ms = parse_duration_ms(value, where)
    return ToolTime(ms, ms)


def parse_agent_budget(key: str, value: Any, where: str, parse_duration_ms: DurationParser) -> AgentBudget:
    if key == REUSE_BUDGET:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ConfigError(f"{where}: {REUSE_BUDGET} is the fraction of turn-2+ prompt tokens served from "
                              f"the prefix cache, in (0, 1], e.g. 0.9; got {value!r}")
        return AgentBudget(key, "prefix_reuse", "min", float(value), where)
    metric, stat = key.rsplit("_", 1)
    return AgentBudget(key, metric, stat, parse_duration_ms(value, where), where)


def make_agent(klass: str, spec: Mapping[str, Any], agent_slo: Mapping[str, tuple[Any, str]],
               where, parse_duration_ms: DurationParser) -> AgentSpec | None:
    """The agent part of a workload spec, or None when it is not a session workload.

    ``agent_slo``: the agent budgets found in ``slo:`` (key -> (value, where))."""
    session = klass == AGENT_CLASS or "steps" in spec
    if not session:
        extra = [k for k in AGENT_KEYS if k in spec] + list(agent_slo)
        if extra:
            k = extra[0]
            w = agent_slo[k][1] if k in agent_slo else where((k,))
            raise ConfigError(f"{w}: {k} belongs to an agent session: set steps (e.g. steps: 5) or "
                              f"class: {AGENT_CLASS}")
        return None
    steps = parse_int(spec.get("steps", DEFAULT_STEPS), where(("steps",)), 2 if "steps" in spec else 1)
    result = parse_int(spec.get("tool_result_tokens", DEFAULT_TOOL_RESULT_TOKENS),
                           where(("tool_result_tokens",)), 1)
    pause = parse_tool_time(spec.get("tool_time", f"{DEFAULT_TOOL_TIME_MS:g}ms"), where(("tool_time",)),
                            parse_duration_ms)
    tools = parse_int(spec.get("tools", DEFAULT_TOOLS), where(("tools",)), 1)
    budgets = tuple(parse_agent_budget(k, v, src, parse_duration_ms) for k, (v, src) in agent_slo.items()
                    if v is not None)
    return AgentSpec(steps=steps, tool_result_tokens=result, tool_time=pause, tools=tools, budgets=budgets)


# ------------------------------------------------------------------ what the session sends
_VERBS = ("search", "get", "create", "update", "list", "fetch", "book", "compute")
_NOUNS = ("order", "invoice", "ticket", "weather", "calendar", "flight", "report", "file")


def tool_schemas(seed: int, n: int) -> list[dict]:
    """``n`` OpenAI ``tools`` entries (JSON-schema functions), fixed by ``seed``."""
    rng = random.Random(f"tools-{seed}")
    out = []
    for i in range(n):
        verb, noun = rng.choice(_VERBS), rng.choice(_NOUNS)
        out.append({"type": "function", "function": {
            "name": f"{verb}_{noun}_{i}", "description": f"{verb.capitalize()} the {noun} by its id.",
            "parameters": {"type": "object", "properties": {
                "id": {"type": "string", "description": f"the {noun} id"},
                "limit": {"type": "integer", "description": "most results"}}, "required": ["id"]}}})
    return out


def tool_result_text(seed: int, session: int, turn: int, tokens: int) -> str:
    """A seeded tool result of ``tokens`` words (one token each under word counting)."""
    from ..prompts.synthesis import _WORDS

    rng = random.Random(f"tool-result-{seed}-{session}-{turn}")
    return " ".join(rng.choice(_WORDS) for _ in range(tokens))
