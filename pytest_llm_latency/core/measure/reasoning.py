"""Reasoning models: how many of a response's output tokens were reasoning, how many the answer
(docs/roofline.md#reasoning-models).  Per request, the first that applies (``split``): the server's
``usage.completion_tokens_details.reasoning_tokens`` (``server_timings["reasoning_tokens"]``), else the
stream's reasoning chunks counted as ITL counts them (none where the per-chunk counts are not known);
``answer = N − reasoning``.  Nothing here changes a latency.  Pure: reads records only.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .record import RequestRecord

#: the server's count as the client keeps it (``RequestRecord.server_timings``)
REASONING_TOKENS = "reasoning_tokens"
SOURCE_SERVER = "server"   # usage.completion_tokens_details.reasoning_tokens
SOURCE_STREAM = "stream"   # the stream's reasoning chunks
SOURCE_WORDS = {SOURCE_SERVER: "usage.completion_tokens_details.reasoning_tokens",
                SOURCE_STREAM: "the stream's reasoning chunks"}


@dataclass(frozen=True)
class Split:
    """One response's output tokens: ``reasoning_tokens + answer_tokens`` = N."""
    reasoning_tokens: int
    answer_tokens: int
    source: str                         # SOURCE_SERVER | SOURCE_STREAM


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def split(rec: RequestRecord) -> Split | None:
    """The response's reasoning / answer split (module docstring); None when it cannot be known:
    the server's count exceeds N and the stream's is not in tokens, or exceeds N."""
    n = rec.output_tokens
    server = _count(rec.server_timings.get(REASONING_TOKENS))
    if server is not None and server <= n:
        return Split(server, n - server, SOURCE_SERVER)
    streamed = sum(c.tokens for c in rec.chunks if c.reasoning)  # where counts are per chunk: chunks, not tokens
    if streamed and (rec.token_count_rule == "per chunk" or streamed > n):
        return None
    return Split(streamed, n - streamed, SOURCE_STREAM)


def hidden_reasoning(rec: RequestRecord) -> bool:
    """The server counts reasoning tokens that never arrived in the stream (a model that
    reasons without showing it): their time is inside TTFT, yet TPOT divides by all N − 1."""
    server = _count(rec.server_timings.get(REASONING_TOKENS))
    return bool(server) and not any(c.reasoning for c in rec.chunks)


def totals(records: Sequence[RequestRecord]) -> tuple[dict, list[str]]:
    """(the ``measurement`` part's reasoning figures, notes) over the run's completed requests;
    nothing at all when no request reasoned (a model that does not reason adds no keys)."""
    splits = [split(r) for r in records]
    unknown = sum(1 for r, s in zip(records, splits) if s is None)
    known = [s for s in splits if s is not None]
    reasoned = [s for s in known if s.reasoning_tokens > 0]
    if not reasoned and not unknown:
        return {}, []
    reasoning = sum(s.reasoning_tokens for s in known)
    answer = sum(s.answer_tokens for s in known)
    sources = Counter(s.source for s in reasoned)
    figures: dict = {"reasoning_tokens": reasoning, "answer_tokens": answer,
                     "reasoning_requests": len(reasoned) + unknown}
    if sources:  # one source, or each with its number of responses ("server 18, stream 2")
        figures["reasoning_source"] = next(iter(sources)) if len(sources) == 1 else \
            ", ".join(f"{src} {k}" for src, k in sources.most_common())
    if reasoning + answer > 0:
        figures["reasoning_share"] = round(reasoning / (reasoning + answer), 4)
    notes = []
    if unknown:
        notes.append(f"reasoning: {unknown} of {len(records)} responses streamed reasoning but their tokens per "
                     f"chunk are not known (ITL per chunk) and the server gave no "
                     f"{SOURCE_WORDS[SOURCE_SERVER]}: their reasoning / answer split is left out of the totals")
    over = sum(1 for r in records if (_count(r.server_timings.get(REASONING_TOKENS)) or 0) > r.output_tokens)
    if over:
        notes.append(f"reasoning: on {over} of {len(records)} responses the server's "
                     f"{SOURCE_WORDS[SOURCE_SERVER]} exceeds its completion_tokens: not a count of this output, "
                     f"so {SOURCE_WORDS[SOURCE_STREAM]} were counted instead")
    hidden = sum(1 for r in records if hidden_reasoning(r))
    if hidden:
        notes.append(f"reasoning: {hidden} of {len(records)} responses count reasoning tokens "
                     f"({SOURCE_WORDS[SOURCE_SERVER]}) that the stream never showed: that thinking time is inside "
                     "TTFT, yet TPOT divides the first-to-last-token time by all N − 1 tokens, so TPOT (and the "
                     "decode roofline) read too fast there; stream the reasoning (a reasoning parser) to measure it")
    return figures, notes
