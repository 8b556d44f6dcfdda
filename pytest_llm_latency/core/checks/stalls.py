"""The stall budgets ``itl_stall_<stat>`` and ``stall_max`` (``core.spec.stall_spec``): ceilings (ms) on the
gaps of the streams that overlapped another request's prefill of at least ``stall_prompt_tokens`` prompt
tokens (``core.measure.prefill_overlap``: the split, what is left out and why), with the cause named.

The prefill windows are the whole run's (``res.facts.prefill_windows``, set for one class of a mixed
workload: its streams stall on every class's prefills), else the result's own requests'.  The stall
figures are written to ``res.stall`` whenever a stream overlapped a long prefill or a stall budget is set.

Stall gaps are a stream's gaps, as ITL's: many per request and not independent draws (one prefill step
stalls every running stream at once), so a budget is judged on the point estimate even at the
workload's confidence (``core.measure.verdict.GAP_METRICS``; the verdict is listed with the others), and
needs ``min_samples_for(stat)`` stall gaps (a p99 of fewer than 100 is just their max): fewer is an error.
No stall gap at all (no long prefill overlapped a stream) is an error naming why, never a pass."""
from __future__ import annotations

from dataclasses import dataclass

from ..findings import Finding, part_update
from ..measure.prefill_overlap import (GapSplit, PrefillWindow, figures, possessive, prefill_windows, run_span_ns,
                                      send_order, split_gaps)
from ..measure.stamp_bounds import read_bound_ms
from ..measure.stats import fmt_stat, min_samples_for, summarize
from ..measure.verdict import budget_verdict, estimate
from ..result.result import Violation, WorkloadResult
from ..spec.budgets import Budget
from .samples import judgeable

CHECK = "stalls"


@dataclass(frozen=True)
class StallViolation(Violation):
    """A stall budget missed: the figure, the gaps over it and what they overlapped."""
    detail: str = ""

    @property
    def message(self) -> str:
        b = self.budget
        what = "ITL stall max" if b.stat == "max" else f"ITL stall {b.stat}"
        return f"{what} {fmt_stat(self.observed)} ms > budget {b.limit:g} ms: {self.detail}"


def windows_of(res: WorkloadResult) -> list[PrefillWindow]:
    """The whole run's prefill windows for one class of a mix, else this result's requests'; with the windows
    of requests sent but not measured (a closed loop's ramp-up and drain: ``facts.unmeasured_windows``)."""
    own = res.facts.prefill_windows if res.facts.prefill_windows is not None else \
        prefill_windows(res.records, res.failures)
    return list(own) + list(res.facts.unmeasured_windows)


def split_of(res: WorkloadResult) -> GapSplit:
    """``res``'s streams' gaps split against the long prefills (``core.measure.prefill_overlap``)."""
    order = res.facts.request_order if res.facts.request_order is not None else send_order(res.records, res.failures)
    numbers = {id(x): i for i, x in enumerate(order, 1)}  # a class's streams: their numbers in the whole run
    return split_gaps(res.records, windows_of(res), res.workload.stall_prompt_tokens, numbers=numbers,
                      stalls=res.facts.client_stalls, read_ms=read_bound_ms(res.client.client_lag_ms_p99))


def check_stalls(res: WorkloadResult) -> list[Finding]:
    budgets = [b for b in res.workload.budgets if b.is_stall]
    if not judgeable(res):
        return []
    split = split_of(res)
    if not budgets and not split.stall:
        return []  # nothing overlapped a long prefill, and nothing asks: no figures
    figs = figures(split, run_span_ns(res.records, res.failures))
    figs["windows"] = "the whole mixed run's" if res.facts.prefill_windows is not None else "this result's requests"
    out = [part_update(CHECK, "stall", **figs)]
    for b in budgets:
        out += _judge(res, b, split, figs)
    return out


def _none_overlapped(res: WorkloadResult, b: Budget, split: GapSplit) -> str:
    n = split.threshold
    windows = windows_of(res)
    longest = max((w.prompt_tokens or 0 for w in windows), default=0)
    head = f"{b.key}: cannot be judged: no gap of any stream overlapped another request's prefill of >= {n} prompt " \
           f"tokens"
    if not split.long_windows:
        return (f"{head} -- no request had a prompt that long (the longest: {longest} tokens): lower "
                f"stall_prompt_tokens (now {n}) or send longer prompts (prompt_tokens)")
    if split.client_stall_gaps:
        return (f"{head} that the client's own stalls did not make -- all {split.client_stall_gaps} gaps overlapping "
                f"one came late while the client's threads were stalled (left out): give the test process a CPU of "
                f"its own (fewer pytest-xdist workers, no other load on the runner)")
    return (f"{head} -- {len(split.long_windows)} request(s) had one, but no other stream was decoding during "
            f"it: run streams beside the long prompts (concurrency > 1 or an open loop, rate:) with prompts that "
            f"are shorter than stall_prompt_tokens among them")


def _judge(res: WorkloadResult, b: Budget, split: GapSplit, figs: dict) -> list[Finding]:
    vals = split.stall_ms
    if not vals:
        return [Finding(CHECK, "error", _none_overlapped(res, b, split))]
    need = min_samples_for(b.stat)
    if len(vals) < need:
        return [Finding(CHECK, "error", f"{b.key}: {len(vals)} stall gaps cannot support a {b.stat} (needs >= "
                                        f"{need}): send more requests, or more long prompts among them")]
    if res.workload.confidence is not None:  # a point estimate (GAP_METRICS), listed with the other verdicts
        verdict = budget_verdict(b.key, b.metric, b.stat, b.limit, False, vals, res.workload.confidence)
        res.verdicts.append(verdict)
        observed = verdict.estimate
    else:
        verdict, observed = None, estimate(vals, b.stat)
    if observed <= b.limit:
        return []
    v = StallViolation(b, observed, summarize(vals, "ITL stall"), verdict, detail=_detail(split, b.limit, figs))
    return [Finding(CHECK, "violation", v.message, v)]


def _detail(split: GapSplit, limit: float, figs: dict) -> str:
    """``41 of the 52 gaps overlapping a >= 1024-token prefill were over it, 39 of them during
    long_summarization's prefills (16000 tokens, median window 702 ms); clean gaps p99 31.0 ms (n=1200)``."""
    over = [g for g in split.stall if g.ms > limit]
    by: dict[str, int] = {}
    for g in over:
        by[g.cause.cause] = by.get(g.cause.cause, 0) + 1
    rows = {r["cause"]: r for r in figs["causes"]}
    causes = []
    for cause, n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0]))[:3]:
        row = rows.get(cause, {})
        causes.append(f"{n} during {possessive(cause)} prefills ({fmt_stat(row.get('prompt_tokens_p50'), 0)} "
                      f"tokens, median window {fmt_stat(row.get('window_ms_p50'), 0)} ms)")
    clean = (f"clean gaps p99 {fmt_stat(figs['clean_ms_p99'])} ms (n={figs['clean_gaps']})" if figs["clean_gaps"]
             else "no clean gaps")
    left = f"; {split.client_gaps} gaps the client's own stalls made left out" if split.client_gaps else ""
    return (f"{len(over)} of the {len(split.stall)} gaps overlapping a >= {split.threshold}-token prefill were over "
            f"it, {', '.join(causes) if causes else 'none'}; {clean}{left}")
