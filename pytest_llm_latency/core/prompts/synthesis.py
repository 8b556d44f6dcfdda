"""Seeded prompt synthesis to an exact token count (docs/concepts.md#exact-salted-prompts).

Layout of one prompt (completions text = system + user): the shared prefix (``shared_prefix_tokens``,
or group ``i mod N``'s of ``shared_prefix_groups``), the salt (unique per request and per run), the
system part (tool schemas) and a body of filler words up to exactly N tokens, fitted through a
``TokenCounter``.  The seed fixes the bodies, the nonce the salts.  Pure: no I/O, no clock.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Callable, Protocol

from ..measure.structured import SchemaAsk

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
    def __call__(self, text: str, /) -> int: ...


@dataclass(frozen=True)
class Prompt:
    system: str          # "" when the workload has no system part
    user: str
    expected_tokens: int  # the target N (what the plan aimed for)
    counted_tokens: int   # what the counter said for system + user
    body_start: int = 0   # where the fitted body starts in ``user`` (``resized`` never cuts before it)
    output_tokens: int | None = None  # this request's forced output length (None: the workload's)
    shared_tokens: int = 0  # leading tokens declared shared with other requests (shared_prefix_groups)
    key: int | str | None = None  # the trace row this prompt replays (core.prompts.block_text.BlockSpec.key), else None
    # a structured workload's request: its schema and role (core.measure.structured), else None
    structured: SchemaAsk | None = None
    mix_class: str | None = None  # a mixed workload's class this request belongs to (core.spec.mix_spec), else None

    @property
    def text(self) -> str:
        return self.system + self.user


# Four-letter words only: every salt has the same length in characters (a linear counter
# sees the same count) and, as " word" pieces, the same length in tokens.
_SALT_VOCAB = tuple(w for w in _WORDS if len(w) == 4)
SALT_WORDS = 10  # 85 ** 10 ~ 2 ** 64 distinct salts per run: collisions are negligible


def salts(seed: int, nonce: str, n: int) -> list[str]:
    """``n`` salts, determined by (seed, nonce) and independent of the prompt bodies."""
    rng = random.Random(f"salt|{seed}|{nonce}")
    # the first word at the very start (no bracket before it): a character-level tokenizer then
    # shares only BOS and the leading space with the previous prompt (plus chance letters),
    # which is all that llama.cpp's slot cache can reuse
    return [" ".join(rng.choice(_SALT_VOCAB) for _ in range(SALT_WORDS)) + ": " for _ in range(n)]


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


def build_prompts(count: TokenCounter, *, n: int, prompt_tokens: int, seed: int, nonce: str = "",
                  system_prompt_tokens: int = 0, shared_prefix_tokens: int = 0,
                  lengths: list[int] | None = None, output_lengths: list[int] | None = None,
                  prefix_groups: tuple[int, int] | None = None) -> list[Prompt]:
    """``n`` prompts of ``prompt_tokens`` tokens each (as counted by ``count``), or of
    ``lengths[i]`` tokens each (issue 27: lengths drawn per request, ``core.spec.lengths``), with
    ``output_lengths[i]`` recorded as each prompt's forced output length.

    ``prefix_groups`` ``(N, T)``: prompt i starts with group ``i mod N``'s prefix of T tokens,
    whose words are drawn from (seed, nonce, group), so the groups are shared within a run and
    never across runs; the salt and the body follow it.

    The body is fitted once per distinct (length, group) (against the first salt of that kind,
    O(log length) counter calls); every other salted prompt costs one verify call, and is re-fitted
    only when its count differs.
    """
    rng = random.Random(seed)
    prefixes = [""]
    if shared_prefix_tokens:
        prefixes = [_fit_words(count, "", _words(random.Random(f"prefix-{seed}"), shared_prefix_tokens * 2),
                               shared_prefix_tokens)[0]]
    shared = shared_prefix_tokens
    if prefix_groups is not None:
        groups, shared = prefix_groups
        prefixes = [_fit_words(count, "", _words(random.Random(f"group|{seed}|{nonce}|{g}"), shared * 2),
                               shared)[0] for g in range(groups)]
    system = ""
    if system_prompt_tokens:
        n_tools = 1
        while count(_tool_schema_text(random.Random(seed), n_tools * 2)) <= system_prompt_tokens:
            n_tools *= 2
        system = _tool_schema_text(random.Random(seed), n_tools)
        system, _ = _fit_words(count, system, _words(rng, system_prompt_tokens), system_prompt_tokens)
        system += "\n"
    body_state = rng.getstate()  # every length's body words start here (the same words, more of them)
    lengths = [prompt_tokens] * n if lengths is None else lengths
    if len(lengths) != n or (output_lengths is not None and len(output_lengths) != n):
        raise ValueError(f"build_prompts: {n} prompts but {len(lengths)} lengths")
    kinds: dict[tuple[int, int], list[int]] = {}
    for i, length in enumerate(lengths):
        kinds.setdefault((length, i % len(prefixes)), []).append(i)
    all_salts = salts(seed, nonce, n)
    out: list[Prompt | None] = [None] * n
    for (length, g), idx in kinds.items():
        body_rng = random.Random()
        body_rng.setstate(body_state)
        made = _build_same(count, [all_salts[i] for i in idx], length, _words(body_rng, length * 2 + 16),
                           system, prefixes[g])
        for i, p in zip(idx, made):
            out[i] = replace(p, output_tokens=output_lengths[i] if output_lengths is not None else None,
                             shared_tokens=shared if prefixes[g] else 0)
    return [p for p in out if p is not None]


def _build_same(count: TokenCounter, salt_list: list[str], prompt_tokens: int, body_words: list[str],
                system: str, prefix: str) -> list[Prompt]:
    """Prompts of one length and one prefix, one per salt (``build_prompts``)."""
    user_head = "" if not system else "User: "
    separate = bool(system or prefix)  # the salt lives in the system part, else it heads the user text

    def head(salt: str) -> str:
        return (prefix + " " + salt + system) if prefix else salt + system

    def fit(salt: str) -> tuple[str, int]:
        sys_part = head(salt)
        return _fit_words(lambda t: count(sys_part + t), user_head, body_words, prompt_tokens)

    def prompt(salt: str, body: str, got: int) -> Prompt:
        sys_part = head(salt)
        sys_text, user, start = (sys_part, body, len(user_head)) if separate else ("", sys_part + body, len(sys_part))
        return Prompt(system=sys_text, user=user, expected_tokens=prompt_tokens, counted_tokens=got, body_start=start)

    prompts: list[Prompt] = []
    body = ""
    fitted = -1
    for salt in salt_list:
        if not prompts:
            body, fitted = fit(salt)
            prompts.append(prompt(salt, body, fitted))
            continue
        got = count(head(salt) + body)
        if got != prompt_tokens and got != fitted:  # this salt tokenizes differently: re-fit this one
            text, got = fit(salt)
            prompts.append(prompt(salt, text, got))
        else:
            prompts.append(prompt(salt, body, got))
    return prompts


def resized(p: Prompt, delta_chars: int, seed: int) -> Prompt:
    """``p`` with its body ``delta_chars`` characters longer (seeded filler words appended) or
    shorter (cut from the end, never into the salt or system part).  Unlike a re-fit through
    an estimate, a body that grows one character at a time grows one token at a time under
    word- and character-level tokenizers (a new word, or 3 more characters): the server's
    count is a monotone, unit-step function of ``delta_chars``, so a search on it can hit any
    count exactly (``client.prepare.tokens.correct_plan``).  ``counted_tokens`` becomes -1: no
    counter has seen the new text; the server's count decides."""
    if delta_chars >= 0:
        rng = random.Random(f"extend-{seed}")
        ext = ""
        while len(ext) < delta_chars:
            ext += " " + rng.choice(_WORDS)
        user = p.user + ext[:delta_chars]
    else:
        user = p.user[:max(p.body_start + 1, len(p.user) + delta_chars)]
    return replace(p, user=user, counted_tokens=-1)


def linear_counter(fixed: float, per_char: float) -> Callable[[str], int]:
    """An estimate ``round(fixed + per_char x len(text))``, for servers with no tokenize
    endpoint, calibrated by the adapter from probe requests' ``usage.prompt_tokens``."""
    return lambda text: int(round(fixed + per_char * len(text)))
