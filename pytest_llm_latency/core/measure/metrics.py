"""Every latency metric, defined once, in milliseconds, from one request's ``RequestRecord`` (times in ns).
The notation (t_submit, t_connect, t_sched, t_start, t_send, t_first, t_out, t_last, t_end, N) and the
formulas: docs/concepts.md#metric-definitions.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Callable

from . import reasoning
from .record import RequestRecord

NS_PER_MS = 1e6

METRICS = ("ttft", "ttfo", "tpot", "itl", "e2e")
#: per-request counts, not times: budgets ``<metric>_<stat>`` in tokens (``reasoning_tokens``)
COUNT_METRICS = ("reasoning_tokens",)


def connect_ms(rec: RequestRecord) -> float | None:
    """connect = t_connected − t_connect: the TCP connect (and TLS handshake) this request
    paid before it could be sent.  None when it was sent on an already open connection.

    Client-side setup, not server time: reported on its own, never inside TTFT or E2E."""
    if rec.t_connect_ns is None or rec.t_connected_ns is None:
        return None
    return (rec.t_connected_ns - rec.t_connect_ns) / NS_PER_MS


def start_ns(rec: RequestRecord) -> int:
    """t_start: the scheduled send time in an open loop, else t_send.

    Open loop (coordinated omission): a request that the client sent late because it fell
    behind, or because a stalled server held every connection, still waited from the moment
    it was due; measuring from t_send would hide exactly the queueing a load test is for.
    How late the client was is reported on its own (``client_lag_ms``)."""
    return rec.t_send_ns if rec.t_scheduled_ns is None else min(rec.t_scheduled_ns, rec.t_send_ns)


def _since_start(rec: RequestRecord, t_ns: int | None) -> float | None:
    return None if t_ns is None else (t_ns - start_ns(rec)) / NS_PER_MS


def client_lag_ms(rec: RequestRecord) -> float | None:
    """client lag = t_send − t_sched: how late the request went out against its schedule
    (open loop only; None otherwise)."""
    if rec.t_scheduled_ns is None:
        return None
    return max(rec.t_send_ns - rec.t_scheduled_ns, 0) / NS_PER_MS


def ttft_ms(rec: RequestRecord) -> float | None:
    """TTFT = t_first − t_start (t_start = t_send, or the scheduled time in an open loop).
    None when no token arrived.

    Closed loop: from the moment the request is written on an open connection: the client's
    own waits (pool, TCP/TLS connect: see ``connect_ms``) are not the server's latency."""
    return _since_start(rec, rec.t_first_token_ns)


def ttfo_ms(rec: RequestRecord) -> float | None:
    """TTFO (time to first output) = t_out − t_start: the first non-reasoning token.

    Equals TTFT for non-reasoning models; larger when the model "thinks" first.
    """
    return _since_start(rec, rec.t_first_output_ns)


def reasoning_tokens(rec: RequestRecord) -> float | None:
    """Reasoning tokens of one response: the server's ``usage.completion_tokens_details.reasoning_tokens``
    where it reports one, else the stream's reasoning chunks counted as ITL counts them
    (``core.measure.reasoning.split``); 0 for a response that did not reason; None when it cannot
    be known (chunks without per-chunk token counts and no server count)."""
    s = reasoning.split(rec)
    return None if s is None else float(s.reasoning_tokens)


def tpot_ms(rec: RequestRecord) -> float | None:
    """TPOT = (t_last − t_first) / (N − 1), N from usage.

    The first token's time belongs to TTFT, so N − 1 tokens share the decode
    interval.  None when N < 2 (undefined), never 0.
    """
    n = rec.output_tokens
    if n < 2 or rec.t_first_token_ns is None or rec.t_last_token_ns is None:
        return None
    return (rec.t_last_token_ns - rec.t_first_token_ns) / NS_PER_MS / (n - 1)


def itl_ms(rec: RequestRecord) -> list[float]:
    """ITL, token-weighted: for consecutive token-bearing chunks i−1, i with
    gap g = t_i − t_{i−1} and k_i tokens in chunk i, emit k_i values of g / k_i.

    So a chunk carrying 3 tokens after 30 ms contributes three 10 ms gaps, and
    mean(ITL) x count equals (t_last − t_first), consistent with TPOT.
    (vLLM's serve.py emits one value per chunk; this weights by tokens.)  k_i: the first rule of
    ``COUNT_RULES`` that applies (``recover_token_counts``).
    """
    out: list[float] = []
    chunks = rec.chunks
    for prev, cur in zip(chunks, chunks[1:]):
        k = max(cur.tokens, 1)
        out.extend([(cur.t_ns - prev.t_ns) / NS_PER_MS / k] * k)
    return out


#: how a stream's per-chunk token counts (k_i of ITL) were known, in the order they are tried
COUNT_RULES = {
    "server": "the server's per-chunk counts (continuous_usage_stats)",
    "one each": "as many token chunks as output tokens: one each",
    "tokenize": "each chunk's text counted with the server's tokenize endpoint after the stream "
                "(the counts sum to completion_tokens)",
    "apportioned": "completion_tokens apportioned over the chunks by text length",
    "per chunk": "not known: ITL is per chunk, not per token",
}


def reported_output_tokens(rec: RequestRecord) -> int | None:
    """N as the server reported it: ``usage.completion_tokens``, else llama.cpp's
    ``timings.predicted_n`` (a chat stream without usage still has it); None if neither."""
    if rec.completion_tokens is not None:
        return rec.completion_tokens
    n = rec.server_timings.get("predicted_n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


def apportion(weights: list[int], total: int) -> list[int] | None:
    """``total`` tokens over chunks in proportion to ``weights`` (text lengths), each chunk at
    least one token (it carried output), largest remainders first.  None when there are more
    chunks than tokens (no such split) or no chunk at all."""
    n = len(weights)
    if n == 0 or total < n:
        return None
    w = [max(x, 0) for x in weights]
    s = sum(w)
    ideal = [total * x / s for x in w] if s else [total / n] * n
    out = [max(1, int(x)) for x in ideal]
    diff = total - sum(out)
    if diff > 0:  # the rest to the largest remainders (fewer than n: each floor lost < 1)
        for j in sorted(range(n), key=lambda j: ideal[j] - out[j], reverse=True)[:diff]:
            out[j] += 1
    while diff < 0:  # chunks raised to 1 took more than their share: back from those most over it
        for j in sorted((j for j in range(n) if out[j] > 1), key=lambda j: out[j] - ideal[j], reverse=True):
            if diff == 0:
                break
            out[j] -= 1
            diff += 1
    return out


def recover_token_counts(rec: RequestRecord, count: Callable[[str], int | None] | None) -> str | None:
    """Set ``rec.token_count_rule`` and, where recovered, each chunk's token count; returns why
    a rule was passed over (None when the first applicable one held).

    For a stream without per-chunk counts (``token_count_rule`` None), the rules of ``COUNT_RULES``
    after the server's own (docs/concepts.md#metric-definitions, ITL): ``count`` is the server's
    tokenize endpoint (None where there is none; a call answers None when it failed)."""
    if rec.token_count_rule is not None or not rec.chunks:
        return None
    n = reported_output_tokens(rec)
    if n is None:
        rec.token_count_rule = "per chunk"
        return "the server reported no completion_tokens to recover per-chunk counts from"
    if n == len(rec.chunks):  # llama.cpp chat without usage: timings.predicted_n
        _set_counts(rec, [1] * n, "one each")
        return None
    why = None
    if count is not None:
        counts = []
        for c in rec.chunks:
            k = count(c.text) if c.text else None
            if k is None:
                why = "the tokenize endpoint could not count every chunk"
                break
            counts.append(k)
        else:
            extra, rem = divmod(sum(counts) - n, len(counts))
            if rem == 0 and extra >= 0 and min(counts) - extra >= 1:  # extra: what every call adds
                _set_counts(rec, [k - extra for k in counts], "tokenize")
                return None
            why = (f"the chunks tokenized one by one sum to {sum(counts)} tokens, not the {n} the server "
                   f"reported (counting pieces apart is not counting the whole: the tokenizer merges across "
                   f"chunk boundaries)")
    shares = apportion([len(c.text or "") for c in rec.chunks], n)
    if shares is None:
        rec.token_count_rule = "per chunk"
        return f"{len(rec.chunks)} token chunks for {n} output tokens: no split gives each chunk a token"
    _set_counts(rec, shares, "apportioned")
    return why or "the server has no tokenize endpoint"


def _set_counts(rec: RequestRecord, counts: list[int], rule: str) -> None:
    rec.chunks = [replace(c, tokens=k) for c, k in zip(rec.chunks, counts)]
    rec.token_count_rule = rule


def e2e_ms(rec: RequestRecord) -> float | None:
    """E2E = t_end − t_start: the whole request as the user waits for it."""
    return _since_start(rec, rec.t_end_ns)


def output_tps(rec: RequestRecord) -> float | None:
    """Output tokens per second of one request = N / E2E (in seconds).

    This is the user-visible rate, TTFT included.  The decode rate alone is
    1000 / TPOT (used by the roofline gate).
    """
    e2e = e2e_ms(rec)
    if e2e is None or e2e <= 0 or rec.output_tokens <= 0:
        return None
    return rec.output_tokens / (e2e / 1000.0)


def decode_tps(tpot: float) -> float:
    """Decode rate of a stream in tok/s = 1000 / TPOT (ms)."""
    return 1000.0 / tpot


def burst_chunks(rec: RequestRecord, threshold_ns: int = 100_000) -> int:
    """Token chunks that arrived < 0.1 ms after the previous one: a sign of a
    buffering proxy or gzip bunching tokens (ITL then looks falsely small)."""
    return sum(1 for a, b in zip(rec.chunks, rec.chunks[1:]) if b.t_ns - a.t_ns < threshold_ns)


def events_per_read(records: list[RequestRecord]) -> float | None:
    """Token events per socket read: the adapters stamp once per read, so chunks with the same
    timestamp arrived in one read (1.0: every event read on its own)."""
    chunks = sum(len(r.chunks) for r in records)
    reads = sum(len({c.t_ns for c in r.chunks}) for r in records)
    return chunks / reads if reads else None


def itl_token_counts(records: list[RequestRecord]) -> str | None:
    """Which rule of ``COUNT_RULES`` gave the streams' per-chunk token counts: one rule, or each with
    its number of streams, most first (``measurement.itl_token_counts``); None when no stream says."""
    rules = Counter(r.token_count_rule for r in records if r.token_count_rule)
    if len(rules) <= 1:
        return next(iter(rules), None)
    return ", ".join(f"{rule} {n}" for rule, n in rules.most_common())


def per_request(rec: RequestRecord) -> dict[str, float | None]:
    """The scalar metrics of one request (ITL is a list and handled separately)."""
    return {"ttft": ttft_ms(rec), "ttfo": ttfo_ms(rec), "tpot": tpot_ms(rec), "e2e": e2e_ms(rec),
            "output_tps": output_tps(rec), "reasoning_tokens": reasoning_tokens(rec)}
