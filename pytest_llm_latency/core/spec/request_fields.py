"""Reasoning requests: the workload keys ``reasoning: {effort: low|medium|high}`` and
``thinking: {budget_tokens: N}`` (YAML, marker and ``measure()`` kwargs alike), and the one mapping
from them to the request-body fields of each API dialect (``request_fields``).  Pure.

What each API is sent, E the effort and N the budget (docs/writing-slos.md#reasoning-requests-and-reasoning-budgets):

* openai-chat: ``reasoning_effort: E``; thinking: ``chat_template_kwargs: {enable_thinking: true}``,
  ``thinking_token_budget: N`` (vLLM) and ``thinking_budget_tokens: N`` (llama.cpp);
* openai-responses: ``reasoning: {effort: E}``; thinking refused (use ``reasoning``);
* anthropic-messages: ``thinking: {type: enabled, budget_tokens: N}``; reasoning refused (use ``thinking``);
* ollama, ollama-chat: ``think: E`` (Ollama's switch; a level for models that take one); thinking
  refused (``think`` has no token budget);
* openai-completions: both refused.

A server ignores a field it does not know (vLLM logs it, llama.cpp drops it), so openai-chat sends
both engines' budget names.  ``budget_tokens`` must be below the request's ``max_tokens`` (the
workload's ``output_tokens``; with a length distribution, its ``min`` where given): the answer
needs room.  Anthropic's hosted API also wants ``budget_tokens >= 1024``; self-hosted Messages
servers (llama.cpp) do not, so that is not enforced here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ConfigError

#: the workload keys of this module, in ``core.spec.workload.WORKLOAD_KEYS``
REQUEST_KEYS = ("reasoning", "thinking")
EFFORTS = ("low", "medium", "high")
_CHAT, _RESPONSES, _MESSAGES = "openai-chat", "openai-responses", "anthropic-messages"
_OLLAMA = ("ollama", "ollama-chat")


@dataclass(frozen=True)
class RequestKeys:
    """The reasoning keys of a workload, validated (``parse_request_keys``)."""
    effort: str | None = None          # reasoning.effort
    budget_tokens: int | None = None   # thinking.budget_tokens

    def to_json(self) -> dict[str, Any]:
        """The keys as written in YAML (``{"reasoning": {"effort": "high"}}``)."""
        out: dict[str, Any] = {}
        if self.effort is not None:
            out["reasoning"] = {"effort": self.effort}
        if self.budget_tokens is not None:
            out["thinking"] = {"budget_tokens": self.budget_tokens}
        return out


def parse_request_keys(spec: Mapping[str, Any], output_tokens: int | None, where) -> RequestKeys | None:
    """``reasoning`` and ``thinking`` of a workload spec (None when neither is given).  ``output_tokens``
    is the smallest ``max_tokens`` a request may be sent with (None: per trace row, not checked);
    ``where(path)`` names a key's place."""
    effort = budget = None
    if spec.get("reasoning") is not None:
        effort = _one_key(spec["reasoning"], "reasoning", "effort", "{effort: high}", where)
        if effort not in EFFORTS:
            raise ConfigError(f"{where(('reasoning', 'effort'))}: expected one of {', '.join(EFFORTS)}, got "
                              f"{effort!r}")
    if spec.get("thinking") is not None:
        budget = _one_key(spec["thinking"], "thinking", "budget_tokens", "{budget_tokens: 1024}", where)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ConfigError(f"{where(('thinking', 'budget_tokens'))}: expected a positive integer (reasoning "
                              f"tokens the server may spend), got {budget!r}")
        if output_tokens is not None and budget >= output_tokens:
            raise ConfigError(f"{where(('thinking', 'budget_tokens'))}: budget_tokens ({budget}) must be below "
                              f"output_tokens ({output_tokens}), the max_tokens every request is sent with: the "
                              f"answer needs room after the reasoning -- raise output_tokens above {budget} or lower "
                              f"budget_tokens")
    return None if effort is None and budget is None else RequestKeys(effort, budget)


def _one_key(value: Any, key: str, inner: str, example: str, where) -> Any:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where((key,))}: expected a mapping like {key}: {example}, got "
                          f"{type(value).__name__} {value!r}")
    unknown = [k for k in value if k != inner]
    if unknown:
        raise ConfigError(f"{where((key, unknown[0]))}: unknown key {unknown[0]!r} -- {key} takes {inner} only, "
                          f"e.g. {key}: {example}")
    if inner not in value:
        raise ConfigError(f"{where((key,))}: {key} needs {inner}, e.g. {key}: {example}")
    return value[inner]


def _refuse(key: str, api: str, field: str, fix: str, where: str) -> ConfigError:
    at = f"{where} " if where else ""
    return ConfigError(f"{at}{key}: the {api} API has no {field} -- {fix}, or drop the key")


def request_fields(keys: RequestKeys | None, api: str, where: str = "") -> dict[str, Any]:
    """The request-body fields that ask ``api`` for the reasoning in ``keys`` (the table in the module
    docstring); a ``ConfigError`` naming the key, the API and the fix where a key means nothing there."""
    if keys is None:
        return {}
    out: dict[str, Any] = {}
    if keys.effort is not None:
        if api == _CHAT:
            out["reasoning_effort"] = keys.effort
        elif api == _RESPONSES:
            out["reasoning"] = {"effort": keys.effort}
        elif api in _OLLAMA:
            out["think"] = keys.effort
        elif api == _MESSAGES:
            raise _refuse("reasoning", api, "reasoning effort field",
                          "use thinking: {budget_tokens: N} (sent as thinking: {type: enabled, budget_tokens: N}), "
                          "or api openai-chat or openai-responses", where)
        else:
            raise _refuse("reasoning", api, "reasoning field", "use api openai-chat or openai-responses", where)
    if keys.budget_tokens is not None:
        n = keys.budget_tokens
        if api == _CHAT:
            out.update(chat_template_kwargs={"enable_thinking": True}, thinking_token_budget=n,
                       thinking_budget_tokens=n)
        elif api == _MESSAGES:
            out["thinking"] = {"type": "enabled", "budget_tokens": n}
        elif api == _RESPONSES:
            raise _refuse("thinking", api, "thinking budget field",
                          "use reasoning: {effort: low|medium|high} (sent as reasoning.effort), or api "
                          "anthropic-messages or openai-chat", where)
        elif api in _OLLAMA:
            raise _refuse("thinking", api, "thinking budget (think: true has no token cap)",
                          "use reasoning: {effort: low|medium|high} (sent as think), or api anthropic-messages or "
                          "openai-chat", where)
        else:
            raise _refuse("thinking", api, "thinking field", "use api anthropic-messages or openai-chat", where)
    return out
