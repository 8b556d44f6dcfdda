"""One measurement from its blocks: an A/B arm measured in blocks (``client/drivers/ab_interleaved.py``)
is judged as one sample, so every block's facts and figures must reach it.  Pure: the blocks are
measurements (``core.result.result.measured``), not yet judged.  Field by field (``core.result.facts.Facts``
and the parts of ``core.result.result_parts``): any block's, every block's, summed, recomputed on every
block's records, the worst block's or the first block's -- docs/result-json.md#an-ab-arm-measured-in-blocks.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from ..measure import metrics as m, reasoning, spec_decode
from ..measure.bunching import StallTimeline
from .facts import AgentRun, ColdStarts, Facts, PerChunkItl
from ..measure.prefix_cache import decide as decide_cache, declared
from .result import WorkloadResult, measured
from .result_parts import (ClientHealth, ColdStartInfo, LoadInfo, Measurement, PrefixCacheInfo, SpecDecodeInfo,
    copy_parts)
from ..spec.workload import Workload

#: ``label(k)``: how block ``k`` (0-based) is named in a text: "A/B block 2 (candidate)"
Label = Callable[[int], str]


def combine_blocks(workload: Workload, blocks: Sequence[WorkloadResult], label: Label) -> WorkloadResult:
    """One measurement of ``workload`` from its ``blocks`` (in the order they were sent, each prepared):
    every record and failure, and every block's facts, parts and notes combined."""
    res = measured(workload, [r for b in blocks for r in b.records], [f for b in blocks for f in b.failures])
    copy_parts(blocks[0], res)  # what no rule below replaces is the first block's (the server part: see below)
    # ServerInfo: its /metrics ``metrics`` mix counter deltas and final gauges, and its figures are
    # one scrape window's; nothing tells them apart here, so the first block's stay (no check reads them).
    res.facts = combine_facts(blocks, workload, label)
    res.client = combine_client(blocks, res.records)
    res.measurement = combine_measurement(blocks, res.records)
    res.load = combine_load(blocks, res)
    res.cold_start = combine_cold_start(blocks, res.facts.cold)
    res.prefix_cache = combine_prefix_cache(blocks)
    res.notes = combine_notes(blocks, label)
    parts = [b.spec_decode.to_json() for b in blocks]
    spec = spec_decode.combine(parts, res.records)  # every block's, not the first block's alone
    res.spec_decode = SpecDecodeInfo(**spec) if spec is not None else SpecDecodeInfo()
    if spec is None and any(parts):
        res.notes.append(f"speculative decoding: only {sum(1 for p in parts if p)} of {len(parts)} blocks of this "
                         "arm have acceptance figures (or from different sources), so the arm reports none")
    return res


def _first(values):
    return next((v for v in values if v is not None), None)


def _sum(values):
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _weighted(values: Sequence[float | None], weights: Sequence[float | None]) -> float | None:
    """The mean of ``values`` weighted by ``weights``, to 4 places; None when a block has none (it cannot be
    averaged in)."""
    pairs = [(v, w) for v, w in zip(values, weights) if v is not None and w is not None]
    total = sum(w for _, w in pairs)
    if len(pairs) < len(values) or not total:
        return None
    return round(sum(v * w for v, w in pairs) / total, 4)


def _max(values):
    known = [v for v in values if v is not None]
    return max(known) if known else None


# ---------------------------------------------------------------------- facts
def combine_facts(blocks: Sequence[WorkloadResult], workload: Workload, label: Label) -> Facts:
    """Every block's facts as one arm's (``core.result.facts.Facts``, field by field)."""
    facts = [b.facts for b in blocks]
    ev_block = worst_cache_block(blocks, workload)
    return Facts(
        server_failed=any(f.server_failed for f in facts),
        server_died=_first(f.server_died for f in facts),
        cold=combine_cold(blocks),
        # the worst block's evidence and its own bound: the judge's allowance is per request, so a sum
        # would let one block's replayed prompts hide behind the others' allowance
        prefix_cache=_labelled_evidence(blocks, ev_block, label),
        cache_bound_tokens=blocks[ev_block].facts.cache_bound_tokens if ev_block is not None else None,
        trace_incomplete="; ".join(f"{label(k)}: {f.trace_incomplete}" for k, f in enumerate(facts)
                                   if f.trace_incomplete) or None,
        per_chunk_itl=combine_per_chunk(blocks),
        client_fell_behind=any(f.client_fell_behind for f in facts),  # one starved block: the arm is unjudgeable
        workers_failed=workers_failed(blocks, label),
        agent=combine_agent([f.agent for f in facts]),
        sweep_parts=[(f"{label(k)}: {tag}", part) for k, f in enumerate(facts) for tag, part in f.sweep_parts],
        # two sweeps' bisections cannot be merged; an A/B block never runs one (its inner driver is the
        # base driver), so the first (the only) one is kept
        rate_sweep=_first(f.rate_sweep for f in facts),
        server_sweep=_first(f.server_sweep for f in facts),  # as a rate sweep: never inside a block
        baseline_target_empty=_first(f.baseline_target_empty for f in facts),  # the plugin's, after the arms
        gates=[g for f in facts for g in f.gates],                              # the plugin's gates run after
        comparisons=[c for f in facts for c in f.comparisons],
        baseline_target_arm=_first(f.baseline_target_arm for f in facts),
        # a class of a mix: every block's whole-run windows (a block's prefills never overlap another block's)
        prefill_windows=None if all(f.prefill_windows is None for f in facts) else
        [w for f in facts for w in f.prefill_windows or ()],
        client_stalls=combine_stalls([f.client_stalls for f in facts]),
        unmeasured_windows=[w for f in facts for w in f.unmeasured_windows],
        request_order=None if all(f.request_order is None for f in facts) else   # a class of a mix's, as its windows
        [x for f in facts for x in f.request_order or ()],
    )


def combine_stalls(timelines: Sequence) -> StallTimeline | None:
    """Every block's lag-monitor stalls on one timeline, spanning them all (as the worker processes' are
    merged: ``client/placement/processes/pool.py``); None when no block had one."""
    given = [t for t in timelines if t is not None]
    if not given:
        return None
    return StallTimeline(tuple(sorted(x for t in given for x in t.stalls)), given[0].tick_ns,
                         min(t.start_ns for t in given), max(t.end_ns for t in given))


def combine_cold(blocks: Sequence[WorkloadResult]) -> ColdStarts | None:
    """Every block's cold samples, numbered in the arm's order (a block's numbers count its records
    before cold ones were excluded); the ``cold_ttft_max`` request: the first block's that sent one."""
    if all(b.facts.cold is None for b in blocks):
        return None
    numbers: list[int] = []
    cold: list = []
    total, offset, outcome = 0, 0, None
    for b in blocks:
        c = b.facts.cold
        kept = len(b.records)
        if c is None:
            total += len(b.records) + len(b.failures)
        else:
            numbers += [offset + i for i in c.numbers]
            cold += c.cold
            total += c.total
            kept += sum(1 for r in c.cold if not any(r is x for x in b.records))  # cold_starts: exclude
            outcome = c.outcome if outcome is None else outcome
        offset += kept
    return ColdStarts(numbers, cold, total, outcome)


def worst_cache_block(blocks: Sequence[WorkloadResult], workload: Workload) -> int | None:
    """The block whose prefix-cache evidence ``core.measure.prefix_cache.decide`` finds worst: an error before a
    note before nothing, then the most cached tokens beyond what a salted run and the workload explain."""
    groups = workload.shared_prefix_groups
    ranked = []
    for k, b in enumerate(blocks):
        ev = b.facts.prefix_cache
        if ev is None:
            continue
        expected, by = declared(ev, groups.tokens if groups is not None else None, b.facts.cache_bound_tokens)
        v = decide_cache(ev, shared_prefix_tokens=workload.shared_prefix_tokens, expected_tokens=expected,
                        declared_by=by)
        ranked.append(((v.error is not None, v.note is not None, ev.cached_tokens - ev.allowance - expected, -k), k))
    return max(ranked)[1] if ranked else None


def _labelled_evidence(blocks: Sequence[WorkloadResult], k: int | None, label: Label):
    if k is None:
        return None
    ev = blocks[k].facts.prefix_cache
    if len(blocks) == 1 or not ev.cached_tokens:
        return ev
    return replace(ev, source=f"{ev.source}; {label(k)}, the worst of {len(blocks)} blocks")


def combine_per_chunk(blocks: Sequence[WorkloadResult]) -> PerChunkItl | None:
    """Streams left per chunk in any block, out of every block's streams with a count rule."""
    pcs = [b.facts.per_chunk_itl for b in blocks]
    if all(pc is None for pc in pcs):
        return None
    total = sum(pc.total if pc is not None else sum(1 for r in b.records if r.token_count_rule)
                for b, pc in zip(blocks, pcs))
    return PerChunkItl(sum(pc.streams for pc in pcs if pc is not None), total,
                       next((pc.why for pc in pcs if pc is not None and pc.why), ""))


def combine_agent(runs: Sequence[AgentRun | None]) -> AgentRun | None:
    """Every block's sessions; the counters' reuse (a ratio over one block's counters) is the lowest
    block's: the budget is a floor, so the worst block decides (agent workloads take no A/B today)."""
    known = [r for r in runs if r is not None]
    if not known:
        return None
    reuse = [r.counters_reuse for r in known]
    return AgentRun(known[0].spec, tuple(s for r in known for s in r.sessions),
                    None if None in reuse else min(reuse))  # type: ignore[type-var]


# ---------------------------------------------------------------------- parts
#: ``ClientHealth`` figures whose samples are not kept, so their percentiles cannot be recomputed: the worst
#: block's; and its counts, summed
_CLIENT_WORST = ("client_lag_ms_p50", "client_lag_ms_p90", "client_lag_ms_p99", "client_lag_ms_max",
                 "client_send_lag_ms_p99", "client_fell_behind", "stamp_bound_ms_p99", "stamp_bound_ms_max",
                 "read_delay_ms_p99", "read_delay_ms_max", "client_limited")
_CLIENT_SUMMED = ("burst_chunks", "bursts_client", "bursts_upstream", "connect_samples", "reconnected_samples")


def combine_client(blocks: Sequence[WorkloadResult], records: list) -> ClientHealth:
    """The client's health over every block (``ClientHealth``, field by field)."""
    parts = [b.client for b in blocks]
    connects = [c for c in (m.connect_ms(r) for r in records) if c is not None]
    epr = m.events_per_read(records)
    return ClientHealth(
        **{name: _max(getattr(p, name) for p in parts) for name in _CLIENT_WORST},
        **{name: _sum(getattr(p, name) for p in parts) for name in _CLIENT_SUMMED},
        events_per_read=round(epr, 3) if epr is not None and any(p.events_per_read is not None for p in parts)
        else None,
        connect_ms_p50=round(float(statistics.median(connects)), 4) if connects else None,
    )


def combine_measurement(blocks: Sequence[WorkloadResult], records: list) -> Measurement:
    """How every block was taken: counts summed, the window from the first start to the last end, ITL's
    count rules and the reasoning figures recomputed on every block's records."""
    parts = [b.measurement for b in blocks]
    out = parts[0].copy()
    out.measure_start_ns = min((p.measure_start_ns for p in parts if p.measure_start_ns is not None), default=None)
    out.measure_end_ns = _max(p.measure_end_ns for p in parts)
    for name in ("prompt_deviation_requests", "prompt_exact_requests", "retries"):
        setattr(out, name, _sum(getattr(p, name) for p in parts))
    if all(p.samples_mode == "fixed" for p in parts):  # as client/drivers/pipeline.stop_info says it
        sent = sum(b.facts.cold.total if b.facts.cold is not None else b.n + b.failed_requests for b in blocks)
        out.stop_reason = f"fixed samples ({sent})"
    if any(p.stamp for p in parts):  # read as soon as one block kept read stamps (core.measure.stamp_bounds)
        out.stamp = "read" if any(p.stamp == "read" for p in parts) else "kernel"
    if any(p.itl_token_counts for p in parts):
        out.itl_token_counts = m.itl_token_counts(records)
    figures, _ = reasoning.totals(records)  # the blocks' notes already say what these would
    for name in ("reasoning_tokens", "answer_tokens", "reasoning_share", "reasoning_requests", "reasoning_source"):
        setattr(out, name, figures.get(name))
    return out


def combine_load(blocks: Sequence[WorkloadResult], res: WorkloadResult) -> LoadInfo:
    """The load over every block: rates over the sum of the blocks' windows, exclusions summed, the
    workers as many as a block had and every block's in ``worker_lag``."""
    parts = [b.load for b in blocks]
    out = parts[0].copy()  # the offered load (mode, rate, arrival) is every block's
    windows = [p.window_s for p in parts]
    window = _sum(windows)
    if window is not None and None not in windows:
        out.window_s = round(window, 4)
        if window > 0:
            out.throughput_rps = round((res.n + res.failed_requests) / window, 4)
            out.output_tok_s = round(sum(r.output_tokens for r in res.records) / window, 3)
    # blocks are sent without budgets, so they have no goodput today; were they to, per window
    out.goodput_rps = _weighted([p.goodput_rps for p in parts], windows)
    sent = [b.n + b.failed_requests for b in blocks]
    out.goodput_fraction = _weighted([p.goodput_fraction for p in parts], sent)
    out.fluidity_index = _weighted([p.fluidity_index for p in parts], sent)
    if any(p.itl_ms_p99_under_load is not None for p in parts) and "itl" in res.summaries:
        out.itl_ms_p99_under_load = round(res.summaries["itl"].p99, 4)
    out.ramp_excluded = _sum(p.ramp_excluded for p in parts)
    out.drain_excluded = _sum(p.drain_excluded for p in parts)
    combine_workers(parts, out)
    return out


def workers_failed(blocks: Sequence[WorkloadResult], label: Label) -> list[str]:
    """Every block's lost or lagging workers, each naming its block (``facts.workers_failed``)."""
    return [f"{label(k)}: {why}" for k, b in enumerate(blocks) for why in b.facts.workers_failed]


def combine_workers(parts: Sequence[LoadInfo], out: LoadInfo) -> None:
    """``load.workers``: the most a block had; ``load.worker_lag``: every block's workers (each ``pid@host``)."""
    if any(p.workers for p in parts):
        out.workers = max(p.workers or 0 for p in parts)
        out.worker_lag = [entry for p in parts for entry in p.worker_lag]


def combine_cold_start(blocks: Sequence[WorkloadResult], cold: ColdStarts | None) -> ColdStartInfo:
    parts = [b.cold_start for b in blocks]
    at = next((p for p in parts if p.cold_ttft_ms is not None), None)  # the cold_ttft_max request's block
    return ColdStartInfo(cold_starts=_sum(p.cold_starts for p in parts),
                         cold_start_samples=",".join(map(str, cold.numbers)) if cold is not None and cold.cold
                         else None,
                         cold_ttft_ms=at.cold_ttft_ms if at is not None else None,
                         cold_load_ms=at.cold_load_ms if at is not None else None)


def combine_prefix_cache(blocks: Sequence[WorkloadResult]) -> PrefixCacheInfo:
    return PrefixCacheInfo(cached_tokens=_sum(b.prefix_cache.cached_tokens for b in blocks),
                           expected_cached_tokens=_sum(b.prefix_cache.expected_cached_tokens for b in blocks))


def combine_notes(blocks: Sequence[WorkloadResult], label: Label) -> list[str]:
    """Every block's notes once: a note every block gave as it is, another naming its blocks."""
    where: dict[str, dict[int, None]] = {}  # a text -> the blocks that gave it (in order, once each)
    for k, b in enumerate(blocks):
        for text in b.notes:
            where.setdefault(text, {})[k] = None
    return [text if len(ks) == len(blocks) else f"{', '.join(label(k) for k in ks)}: {text}"
            for text, ks in where.items()]
