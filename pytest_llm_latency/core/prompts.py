"""Seeded prompt synthesis to an exact token count.

Layout of one prompt (completions text = system + user):

    [shared prefix: P tokens, identical across requests]   only if shared_prefix_tokens > 0
    [salt: unique per request]                              defeats prefix caches
    [system part: tool schemas, ~S tokens]                  only if system_prompt_tokens > 0
    [body: filler words up to exactly N tokens]

Lengths are fitted through a ``TokenCounter`` (the server's tokenize endpoint,
or a calibrated estimate); the adapter verifies ``usage.prompt_tokens`` on
every request afterwards.  Pure and deterministic for a given seed.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Protocol

_WORDS = (
    "the of and to in is that it was for on are as with his they at be this from have or by one had not but "
    "what all were when we there can an your which their said if do will each about how up out them then she "
    "many some so these would other into has more her two like him see time could no make than first been its "
    "who now people my made over did down only way find use may water long little very after words called just "
    "where most know get through back much before go good new write our used me man too any day same right look "
    "think also around another came come work three word must because does part even place well such here take "
    "why things help put years different away again off went old number great tell men say small every found "
    "still between name should home big give air line set own under read last never us left end along while "
    "might next sound below saw something thought both few those always looked show large often together asked "
    "house world going want school important until form food keep children feet land side without boy once "
    "animals life enough took sometimes four head above kind began almost live page got earth need far hand high"
).split()

_TOOL_VERBS = ("search", "get", "create", "update", "delete", "list", "send", "fetch", "book", "compute")
_TOOL_NOUNS = ("order", "invoice", "ticket", "weather", "calendar", "email", "flight", "user", "report", "file")


class TokenCounter(Protocol):
    def __call__(self, text: str) -> int: ...


@dataclass(frozen=True)
class Prompt:
    system: str          # "" when the workload has no system part
    user: str
    expected_tokens: int  # the target N (what the plan aimed for)
    counted_tokens: int   # what the counter said for system + user

    @property
    def text(self) -> str:
        return self.system + self.user


def _salt(rng: random.Random) -> str:
    return f"[{rng.getrandbits(48):012x}] "


def _tool_schema_text(rng: random.Random, n_tools: int) -> str:
    lines = ["You are an agent. Call exactly one tool. Tools:\n"]
    for i in range(n_tools):
        verb, noun = rng.choice(_TOOL_VERBS), rng.choice(_TOOL_NOUNS)
        lines.append('{"name": "%s_%s_%d", "description": "%s the %s by id", "parameters": {"type": "object", '
                     '"properties": {"id": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["id"]}}\n'
                     % (verb, noun, i, verb.capitalize(), noun))
    return "".join(lines)


def _words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(_WORDS) for _ in range(n)]


def _fit_words(count: TokenCounter, head: str, words: list[str], target: int) -> tuple[str, int]:
    """Largest prefix of ``words`` such that count(head + words) <= target, then pad
    with one-token fillers until exactly target if possible.  O(log n) counter calls."""
    lo, hi = 0, len(words)
    best_text, best_n = head, count(head) if head else 0
    if best_n > target:
        return best_text, best_n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        text = head + " ".join(words[:mid])
        n = count(text)
        if n <= target:
            lo, best_text, best_n = mid, text, n
        else:
            hi = mid - 1
    for filler in (" a", " I", ".", " x"):
        while best_n < target:
            text = best_text + filler
            n = count(text)
            if n > target or n == best_n:
                break
            best_text, best_n = text, n
        if best_n == target:
            break
    return best_text, best_n


def build_prompts(count: TokenCounter, *, n: int, prompt_tokens: int, seed: int,
                  system_prompt_tokens: int = 0, shared_prefix_tokens: int = 0) -> list[Prompt]:
    """``n`` prompts of ``prompt_tokens`` tokens each (as counted by ``count``).

    The body is fitted once; each request's salted prompt is then re-counted and
    its body trimmed or extended so that every prompt hits the target exactly
    whenever the tokenizer allows it.
    """
    rng = random.Random(seed)
    prefix = ""
    if shared_prefix_tokens:
        prefix, _ = _fit_words(count, "", _words(random.Random(f"prefix-{seed}"), shared_prefix_tokens * 2),
                               shared_prefix_tokens)
    system = ""
    if system_prompt_tokens:
        n_tools = 1
        while count(_tool_schema_text(random.Random(seed), n_tools * 2)) <= system_prompt_tokens:
            n_tools *= 2
        system = _tool_schema_text(random.Random(seed), n_tools)
        system, _ = _fit_words(count, system, _words(rng, system_prompt_tokens), system_prompt_tokens)
        system += "\n"
    body_words = _words(rng, prompt_tokens * 2 + 16)
    prompts = []
    for _ in range(n):
        salt = _salt(rng)
        if prefix:
            sys_part = prefix + " " + salt + system
        else:
            sys_part = salt + system
        user_head = "" if not system else "User: "
        text, got = _fit_words(lambda t: count(sys_part + t), user_head, body_words, prompt_tokens)
        sys_text = sys_part if system or prefix else ""
        user_text = text if system or prefix else sys_part + text
        prompts.append(Prompt(system=sys_text, user=user_text, expected_tokens=prompt_tokens, counted_tokens=got))
    return prompts


def linear_counter(fixed: float, per_char: float) -> Callable[[str], int]:
    """An estimate ``round(fixed + per_char x len(text))``, for servers with no tokenize
    endpoint, calibrated by the adapter from probe requests' ``usage.prompt_tokens``."""
    return lambda text: int(round(fixed + per_char * len(text)))
