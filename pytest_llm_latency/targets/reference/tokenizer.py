"""The reference server's deterministic tokenizer and text generator.

Tokenizer rule
--------------
**One token per whitespace-separated word** (``str.split()``).  A token's id is
``crc32(word) % VOCAB_SIZE``.  So ``/tokenize``, ``usage.prompt_tokens`` and Ollama's
``prompt_eval_count`` all agree exactly, and a prompt of N tokens is simply N words.
A prompt given as a list of integers is taken as token ids as-is.

Other counting rules (``tokenizer=`` in the reference URL), for clients that must make
prompt lengths exact without a tokenize endpoint (``tokenize_endpoint=0``):

* ``word`` (default): the rule above;
* ``chars3``: **one token per 3 characters** of the text, the last one partial
  (``ceil(len(text) / 3)``; whitespace counts): a server whose counts no word-based or
  chars-per-word estimate predicts exactly.

Chat template
-------------
Messages are rendered as::

    <|system|> You are terse. <|end|> <|user|> Hello there <|end|> <|assistant|>

Each message costs its content's words plus **2** tokens (``<|role|>`` and ``<|end|>``)
and the generation prompt adds **1** (``<|assistant|>``): ``chat prompt tokens =
sum(words(content_i)) + 2 x len(messages) + 1``.  Content given as a list of parts
(``[{"type": "text", "text": ...}]``) uses the text parts joined by spaces.

Generated text
--------------
Each generated token is one ASCII word from ``WORDS`` with a leading space (``" cache"``),
drawn from a ``random.Random`` seeded by the prompt (and the request's ``seed``), so a
completion of N tokens has exactly N words and re-tokenizes to N tokens.  The natural
stop (EOS) point is geometric with a per-token probability ``EOS_PROBABILITY`` (mean
128 tokens), also seeded by the prompt: deterministic, pseudo-random.
"""
from __future__ import annotations

import json
import math
import random
import zlib
from typing import Any, Iterable

VOCAB_SIZE = 128256
EOS_PROBABILITY = 1.0 / 128

WORDS = tuple("""
the of and to in is that for it as with was on be by at this are from or an which have
not but had they his her she he we you all were their been has more one when would there
what so if about out into than them can only other new some could time these two may then
first any like now such over also after use our how most made well way even because through
many where much should before very must between under same last another while being both
each few those long during without again still since against until might never great small
cache token prefill decode batch stream model kernel memory tensor vector layer head value
query key weight scale block queue step graph latency budget window signal matrix compute
bandwidth router server client packet socket buffer thread engine sample river forest stone
cloud light night paper green quiet early north south summer winter garden bridge market
""".split())


def encode_word(word: str) -> int:
    return zlib.crc32(word.encode("utf-8", "surrogatepass")) % VOCAB_SIZE


def encode(text: str) -> list[int]:
    """Token ids of ``text``: one per whitespace-separated word."""
    return [encode_word(w) for w in text.split()]


def count(text: str) -> int:
    return len(text.split())


def encode_chars3(text: str) -> list[int]:
    """Token ids under the ``chars3`` rule: one per 3 characters (the last may be shorter)."""
    return [encode_word(text[i:i + 3]) for i in range(0, len(text), 3)]


#: counting rules by name (``ReferenceConfig.tokenizer``): text -> token ids
RULES = {"word": encode, "chars3": encode_chars3}


def content_text(content: Any) -> str:
    """Text of an OpenAI message ``content`` (a string, a list of parts, or null)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = (p.get("text") if isinstance(p, dict) else p for p in content)
        return " ".join(t for t in texts if isinstance(t, str))
    raise TypeError("message content must be a string or a list of parts")


def _tool_calls_text(calls: Any, tag: str) -> str:
    if not isinstance(calls, list):
        raise TypeError("tool_calls must be a list")
    parts = []
    for c in calls:
        fn = c.get("function") if isinstance(c, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments", "")
        args = args if isinstance(args, str) else json.dumps(args)
        parts.append(f"<|tool_call|>{tag} {fn.get('name', '')} {args}")
    return " ".join(parts)


def render_chat(messages: Iterable[dict], tools: list | None = None, *, rewrite_tool_history: bool = False) -> str:
    """Apply the fixed chat template (module docstring).

    ``tools`` (the request's array) are rendered as ``<|tools|> <JSON> <|end|>`` right after a
    leading system message (else first).  An assistant message's ``tool_calls`` render as
    ``<|tool_call|> name arguments`` after its content.  ``rewrite_tool_history`` (the fault
    ``rewrite_tool_history``) tags every tool call in the history with how many the transcript
    holds (``<|tool_call|>#3``), as templates that renumber or re-serialize the whole tool-call
    history do: from turn 3 on the transcript changes at the first tool call, so the prefix
    cache stops extending there (turn 2 still reuses turn 1's prompt)."""
    messages = list(messages)
    out = []
    tools_text = f"<|tools|> {json.dumps(tools)} <|end|>" if tools else ""
    calls_at = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("tool_calls")]
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TypeError("each message must be an object")
        role = str(m.get("role", "user")).replace(" ", "_") or "user"
        text = content_text(m.get("content"))
        if m.get("tool_calls"):
            tag = f"#{len(calls_at)}" if rewrite_tool_history else ""
            text = f"{text} {_tool_calls_text(m['tool_calls'], tag)}".strip()
        out.append(f"<|{role}|> {text} <|end|>")
        if tools_text and i == 0 and role == "system":
            out.append(tools_text)
            tools_text = ""
    if tools_text:
        out.insert(0, tools_text)
    out.append("<|assistant|>")
    return " ".join(out)


def prompt_seed(token_ids: list[int], seed: int | None = None) -> int:
    """A deterministic seed from the prompt's token ids and the request's ``seed``."""
    h = zlib.crc32(b" ".join(str(t).encode() for t in token_ids[:64] + token_ids[-64:]))
    h = zlib.crc32(str(len(token_ids)).encode(), h)
    if seed is not None:
        h = zlib.crc32(str(seed).encode(), h)
    return h


def natural_length(seed: int, p: float = EOS_PROBABILITY) -> int:
    """Tokens generated before the model 'samples EOS' (geometric, >= 1)."""
    u = random.Random(seed ^ 0x5EED).random()
    return 1 + int(math.log(1.0 - u) / math.log(1.0 - p))


class TextGenerator:
    """Deterministic stream of ``" word"`` tokens."""

    __slots__ = ("_rng", "_words")

    def __init__(self, seed: int):
        self._rng = random.Random(seed)
        self._words = WORDS

    def next(self, n: int = 1) -> str:
        choice = self._rng.choice
        if n == 1:
            return " " + choice(self._words)
        return "".join(" " + choice(self._words) for _ in range(n))
