"""Speculative decoding and multi-token prediction: the one definition of their figures (decode tokens
and steps, tokens per step, acceptance rate, step time), for every engine, on the run's own requests,
and the acceptance's sources, first found wins (``acceptance``): vLLM ``/metrics`` counters, SGLang's
windowed gauges, llama.cpp's per-response timings, llama.cpp's counters.  The definitions and the
sources: docs/roofline.md#speculative-decoding-and-mtp.  None of them: ``acceptance`` returns None and
decode stays judged per token; multi-token stream chunks alone are never evidence of speculation.

Pure: takes records and parsed counter/gauge dicts by the engine's own names.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .record import RequestRecord

#: field -> counter name (as a scrape's sample name, ``_total`` included)
VLLM_COUNTERS = {"drafts": "vllm:spec_decode_num_drafts_total",
                 "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
                 "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total"}
LLAMACPP_COUNTERS = {"drafts": "llamacpp:spec_decode_num_drafts_total",
                     "draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
                     "accepted_tokens": "llamacpp:spec_decode_num_accepted_tokens_total"}
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"
SGLANG_ACCEPT_RATE = "sglang:spec_accept_rate"
#: the per-response llama.cpp timings (normalized into ``RequestRecord.server_timings``)
DRAFT_N, DRAFT_N_ACCEPTED = "draft_n", "draft_n_accepted"

SOURCE_VLLM = "vLLM /metrics counters"
SOURCE_SGLANG = "SGLang /metrics gauges (the server's windowed estimate)"
SOURCE_LLAMACPP_TIMINGS = "llama.cpp timings (per request)"
SOURCE_LLAMACPP_COUNTERS = "llama.cpp /metrics counters"

#: what would let the gate judge a speculating server (named when none is found)
SOURCES_HINT = ("vLLM's vllm:spec_decode_num_accepted_tokens_total and ..._num_draft_tokens_total, "
                "SGLang's sglang:spec_accept_length, or llama.cpp's per-response timings.draft_n / "
                "draft_n_accepted (or its llamacpp:spec_decode_* counters)")


@dataclass(frozen=True)
class RequestAcceptance:
    """One request's figures (llama.cpp reports them per response)."""
    decode_tokens: int
    accepted_tokens: int
    draft_tokens: int

    @property
    def decode_steps(self) -> int:
        return self.decode_tokens - self.accepted_tokens

    @property
    def tokens_per_step(self) -> float | None:
        """None when the request decoded nothing (or its figures are inconsistent)."""
        steps = self.decode_steps
        return self.decode_tokens / steps if self.decode_tokens > 0 and steps > 0 else None

    @property
    def acceptance_rate(self) -> float | None:
        """None when nothing was drafted (undefined, never 0 or 1)."""
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens > 0 else None


@dataclass(frozen=True)
class Acceptance:
    """How many tokens each engine step emitted over the run, and where that came from.

    ``tokens_per_step`` / ``acceptance_rate`` are None when they cannot be computed (no decode,
    a counter reset, a missing counter, nothing drafted); ``notes`` then says why."""
    source: str
    scope: str                          # run | window | per request
    decode_tokens: int
    accepted_tokens: float | None
    draft_tokens: float | None
    drafts: float | None
    tokens_per_step: float | None
    acceptance_rate: float | None
    per_request: tuple[RequestAcceptance, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def decode_steps(self) -> float | None:
        if self.tokens_per_step is None or self.tokens_per_step <= 0:
            return None
        return self.decode_tokens / self.tokens_per_step


def _decoding(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The requests whose decode was timed: at least 2 tokens, first and last stamped (TPOT's
    requests, ``core.measure.metrics.tpot_ms``).  Decode tokens and decode time are both taken over them."""
    return [r for r in records
            if r.output_tokens >= 2 and r.t_first_token_ns is not None and r.t_last_token_ns is not None]


def decode_tokens(records: Sequence[RequestRecord]) -> int:
    """Σ (N − 1): the tokens decode produced (over ``_decoding``'s requests)."""
    return sum(r.output_tokens - 1 for r in _decoding(records))


def decode_time_ms(records: Sequence[RequestRecord]) -> float:
    """Σ (t_last − t_first): the time decode took (TPOT's numerator), over the same requests."""
    total = 0
    for r in _decoding(records):
        assert r.t_last_token_ns is not None and r.t_first_token_ns is not None  # _decoding's filter
        total += r.t_last_token_ns - r.t_first_token_ns
    return total / 1e6


def speculating(tokens_per_step: float | None, draft_tokens: float | None = None,
                drafts: float | None = None) -> bool:
    """The one rule for "this run speculated": tokens per step is known, and the server drafted
    (drafted tokens, drafting steps, or more than 1 token per step).  A server that exports the
    counters but drafted nothing is judged per token, like one that does not speculate."""
    if tokens_per_step is None:
        return False
    return tokens_per_step > 1.0 or bool(draft_tokens) or bool(drafts)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _from_totals(source: str, scope: str, decoded: int, accepted: float | None, drafted: float | None,
                 drafts: float | None, notes: list[str], per_request: tuple[RequestAcceptance, ...] = ()
                 ) -> Acceptance:
    """The definition applied to run totals, with a note for every figure left undefined."""
    tps = rate = None
    if decoded <= 0:
        notes.append(f"speculative decoding ({source}): the run decoded no tokens (every request produced "
                     "< 2 tokens), so tokens per step is undefined")
    elif accepted is None:
        pass  # said by the caller (a missing or reset counter)
    elif accepted > decoded:  # or == decoded: zero steps, impossible for a real run
        notes.append(f"speculative decoding ({source}): {accepted:g} accepted tokens but this run decoded only "
                     f"{decoded}: the counters include other clients' requests, so tokens per step cannot be "
                     "computed for this run")
    elif accepted == decoded:
        notes.append(f"speculative decoding ({source}): {accepted:g} accepted tokens for {decoded} decoded ones "
                     "leaves no engine step; the figures are inconsistent, tokens per step is undefined")
    else:
        tps = decoded / (decoded - accepted)
    if drafted is not None:
        if drafted > 0 and accepted is not None:
            rate = accepted / drafted
        elif drafted == 0:
            notes.append(f"speculative decoding ({source}): the server drafted nothing during the samples "
                         "(0 draft tokens): the acceptance rate is undefined"
                         + (" and every step emitted 1 token" if tps is not None else ""))
    return Acceptance(source=source, scope=scope, decode_tokens=decoded, accepted_tokens=accepted,
                      draft_tokens=drafted, drafts=drafts, tokens_per_step=tps, acceptance_rate=rate,
                      per_request=per_request, notes=tuple(notes))


def from_counters(before: Mapping[str, float], after: Mapping[str, float], decoded: int,
                  names: Mapping[str, str] = VLLM_COUNTERS, source: str = SOURCE_VLLM) -> Acceptance | None:
    """Counter deltas ``after − before`` (a counter first seen after counts from 0).  None when
    the server exports none of ``names``; a counter that went down (a restart) or is missing
    leaves its figures undefined, with a note."""
    if not any(n in after for n in names.values()):
        return None
    notes: list[str] = []
    got: dict[str, float | None] = {}
    for field_name, name in names.items():
        if name not in after or not _finite(after[name]):
            got[field_name] = None
            if field_name != "drafts":
                notes.append(f"speculative decoding ({source}): {name} is missing from /metrics, so "
                             f"{'tokens per step' if field_name == 'accepted_tokens' else 'the acceptance rate'} "
                             "cannot be computed")
            continue
        d = after[name] - before.get(name, 0.0)
        if d < 0:
            got[field_name] = None
            notes.append(f"speculative decoding ({source}): {name} went down during the samples "
                         f"({before.get(name, 0.0):g} → {after[name]:g}: the server restarted or reset its "
                         "counters), so this run's acceptance cannot be computed")
        else:
            got[field_name] = d
    return _from_totals(source, "run", decoded, got["accepted_tokens"], got["draft_tokens"], got["drafts"], notes)


def from_sglang(gauges: Sequence[Mapping[str, float]], decoded: int) -> Acceptance | None:
    """SGLang's windowed gauges, averaged over the scrapes taken during the run.  A window with
    no decode reports 0 (not a real accept length of 0): those scrapes are skipped."""
    if not any(SGLANG_ACCEPT_LENGTH in g for g in gauges):
        return None
    live = [g for g in gauges if _finite(g.get(SGLANG_ACCEPT_LENGTH)) and g[SGLANG_ACCEPT_LENGTH] >= 1.0]
    lengths = [g[SGLANG_ACCEPT_LENGTH] for g in live]
    rates = [g[SGLANG_ACCEPT_RATE] for g in live if _finite(g.get(SGLANG_ACCEPT_RATE))]
    notes = [f"speculative decoding: {SOURCE_SGLANG}: {SGLANG_ACCEPT_LENGTH} over {len(lengths)} of "
             f"{len(gauges)} scrapes during the run; a windowed estimate, not a count of this run's tokens"]
    if not lengths:
        notes.append(f"speculative decoding: {SGLANG_ACCEPT_LENGTH} was never ≥ 1 during the run "
                     "(no decode in the server's windows), so tokens per step is undefined")
    tps = sum(lengths) / len(lengths) if lengths and decoded > 0 else None
    rate = sum(rates) / len(rates) if rates else None
    accepted = decoded - decoded / tps if tps is not None else None
    return Acceptance(source=SOURCE_SGLANG, scope="window", decode_tokens=decoded, accepted_tokens=accepted,
                      draft_tokens=None, drafts=None, tokens_per_step=tps, acceptance_rate=rate, notes=tuple(notes))


def per_request(records: Sequence[RequestRecord]) -> tuple[RequestAcceptance, ...] | None:
    """Each request's figures from its llama.cpp timings; None when no response carried
    ``draft_n`` (the server does not speculate, or is not llama.cpp).  A response without it
    beside ones with it drafted nothing (llama.cpp leaves it out then)."""
    if not any(DRAFT_N in r.server_timings for r in records):
        return None
    out = []
    for r in records:
        st = r.server_timings
        drafted, accepted = st.get(DRAFT_N, 0), st.get(DRAFT_N_ACCEPTED, 0)
        if not (_finite(drafted) and _finite(accepted)) or drafted < 0 or accepted < 0:
            drafted, accepted = 0, r.output_tokens  # unreadable: marked inconsistent below (accepted > decoded)
        out.append(RequestAcceptance(decode_tokens=max(r.output_tokens - 1, 0), accepted_tokens=int(accepted),
                                     draft_tokens=int(drafted)))
    return tuple(out)


def from_timings(records: Sequence[RequestRecord]) -> Acceptance | None:
    rows = per_request(records)
    if rows is None:
        return None
    notes = []
    silent = sum(1 for r in records if DRAFT_N not in r.server_timings)
    if silent:
        notes.append(f"speculative decoding ({SOURCE_LLAMACPP_TIMINGS}): {silent} of {len(records)} responses "
                     "carried no timings.draft_n: they drafted nothing (counted as 1 token per step)")
    bad = [x for x in rows if x.accepted_tokens > x.decode_tokens]
    if bad:
        notes.append(f"speculative decoding ({SOURCE_LLAMACPP_TIMINGS}): {len(bad)} responses report more "
                     "accepted draft tokens than decoded tokens, or unreadable draft_n / draft_n_accepted; their "
                     "figures are inconsistent")
    accepted = None if bad else sum(x.accepted_tokens for x in rows)
    drafted = None if bad else sum(x.draft_tokens for x in rows)
    return _from_totals(SOURCE_LLAMACPP_TIMINGS, "per request", sum(x.decode_tokens for x in rows), accepted, drafted,
                        None, notes, rows)


def acceptance(records: Sequence[RequestRecord], before: Mapping[str, float] | None = None,
               after: Mapping[str, float] | None = None,
               gauges: Sequence[Mapping[str, float]] = ()) -> Acceptance | None:
    """The run's acceptance from the first source found (vLLM counters, SGLang gauges, llama.cpp
    timings, llama.cpp counters); None: no source.

    ``before`` / ``after``: the counters of the scrapes around the samples (by sample name);
    ``gauges``: the gauges of the scrapes taken during the run."""
    decoded = decode_tokens(records)
    found = ((from_counters(before, after, decoded) if before is not None and after is not None else None)
             or from_sglang(gauges, decoded) or from_timings(records))
    if found is not None or before is None or after is None:
        return found
    found = from_counters(before, after, decoded, LLAMACPP_COUNTERS, SOURCE_LLAMACPP_COUNTERS)
    # llama.cpp exports these counters (as zeros) without a draft model too: nothing drafted and
    # nothing accepted is a server that does not speculate, not a speculating one that drafted nothing
    if found is not None and found.draft_tokens == 0 and found.accepted_tokens == 0 and found.drafts in (0, None):
        return None
    return found


def step_ms(acc: Acceptance, decode_ms: float) -> float | None:
    """Mean engine step time on run totals: Σ decode time ÷ decode steps (None if unknown)."""
    steps = acc.decode_steps
    if steps is None or steps <= 0 or not _finite(decode_ms) or decode_ms <= 0:
        return None
    return decode_ms / steps


def as_part(acc: Acceptance, decode_ms: float) -> dict:
    """The figures of the result's ``spec_decode`` part (``core.result.result_parts.SpecDecodeInfo``)."""
    steps = acc.decode_steps
    return {"source": acc.source, "scope": acc.scope, "decode_tokens": acc.decode_tokens,
            "decode_steps": None if steps is None else round(steps, 3),
            "accepted_tokens": acc.accepted_tokens, "draft_tokens": acc.draft_tokens, "drafts": acc.drafts,
            "tokens_per_step": acc.tokens_per_step, "acceptance_rate": acc.acceptance_rate,
            "decode_ms": round(decode_ms, 3) if decode_ms > 0 else None, "step_ms": step_ms(acc, decode_ms)}


def combine(blocks: Sequence[Mapping], records: Sequence[RequestRecord]) -> dict | None:
    """One run's ``spec_decode`` figures from the parts of its blocks (an A/B arm measured in
    blocks): per-request figures are recomputed from all ``records``; counter deltas are summed
    (each block's counters cover its own samples); windowed estimates are averaged, weighted by
    each block's decode tokens.  None unless every block has figures from the same source."""
    parts = list(blocks)
    if not parts or not all(b.get("source") for b in parts) or len({b["source"] for b in parts}) != 1:
        return None  # a block without the figures (a failed scrape) would mix its time with others' tokens
    decode_ms = decode_time_ms(records)
    if parts[0].get("scope") == "per request":
        acc = from_timings(records)
        return None if acc is None else as_part(acc, decode_ms)
    decoded = sum(int(b.get("decode_tokens") or 0) for b in parts)
    if parts[0].get("scope") == "window":
        known = [b for b in parts if b.get("tokens_per_step") is not None and b.get("decode_tokens")]
        weight = sum(b["decode_tokens"] for b in known)
        tps = sum(b["tokens_per_step"] * b["decode_tokens"] for b in known) / weight if weight else None
        rates = [b["acceptance_rate"] for b in parts if b.get("acceptance_rate") is not None]
        acc = Acceptance(source=parts[0]["source"], scope="window", decode_tokens=decoded,
                         accepted_tokens=None if tps is None else decoded - decoded / tps, draft_tokens=None,
                         drafts=None, tokens_per_step=tps, acceptance_rate=sum(rates) / len(rates) if rates else None)
        return as_part(acc, decode_ms)

    def total(key: str) -> float | None:
        vals = [b.get(key) for b in parts]
        return None if any(v is None for v in vals) else float(sum(float(v) for v in vals if v is not None))

    return as_part(_from_totals(parts[0]["source"], "run", decoded, total("accepted_tokens"), total("draft_tokens"),
                                total("drafts"), []), decode_ms)
