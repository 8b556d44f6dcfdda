"""Can a fixed sample pass?  The collection-time refusal of a budget that, judged at a
confidence on a fixed number of samples with ``inconclusive: fail``, could only fail.

A p95 at 95% confidence has an upper bound only from 59 samples on (0.95^59 <= 5%: the
sample maximum is then the bound, ``core.measure.verdict.min_n_to_pass``); with ``samples: 20`` it
can fail or be inconclusive, and inconclusive fails -- whatever the server does.  Refused
before any request (``check_min_samples`` below, called at collection and by ``measure()``), naming the minimum and the
ways out.  Pure.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..measure.coldstart import COLD_BUDGET
from ..errors import ConfigError
from ..measure.stats import PERCENTILES
from ..measure.verdict import GAP_METRICS, min_n_to_pass

if TYPE_CHECKING:
    from ..spec.workload import Workload


def values_per_sample(w) -> int:
    """Values of a per-request metric that one sample gives: a session's turns, a prompt sweep's
    lengths (judged together), else one request."""
    if w.agent is not None:
        return w.agent.steps
    return len(w.prompt_sweep) or 1


def check_can_pass(w, where: str) -> None:
    """A fixed sample judged at a confidence with ``inconclusive: fail``: refuse a budget that
    could never *pass* at ``w.samples`` (``verdict.min_n_to_pass``; a p95 at 95% needs 59), since
    the run could then only fail.  ITL counts its gaps (many per request), extremes and means
    need one or two values; fractions of the run are judged apart."""
    per = values_per_sample(w)
    for b in w.budgets:
        if b.is_fraction or b.key == COLD_BUDGET or b.metric in GAP_METRICS or b.is_kv_transfer:
            continue
        need = min_n_to_pass(b.stat, b.metric, w.confidence, b.is_floor)
        if w.samples * per >= need:
            continue
        alpha = 1.0 - w.confidence
        pct = PERCENTILES[b.stat] / 100 if b.stat in PERCENTILES else None
        unit = "values" if per > 1 else "samples"
        why = (f"a t interval needs >= 2 {unit}" if pct is None else
               f"its {'lower' if b.is_floor else 'upper'} bound needs >= {need} {unit}: "
               f"{(1 - pct) if b.is_floor else pct:g}^{need} <= {alpha:g}")
        got = f"{w.samples} sample{'s' if w.samples != 1 else ''}" + (f" ({w.samples * per} values)" if per > 1 else "")
        fewest = -(-need // per)
        auto_ok = (w.load is None and w.sweep is None and not w.prompt_sweep and w.agent is None
                   and w.baseline_target is None)
        ways = (["samples: auto"] if auto_ok else []) + [f"samples: {fewest} or more", "confidence: null (point "
                                                         "estimate)", "inconclusive: warn"]
        raise ConfigError(f"{where}: budget {b.key} ({b.source or 'class default'}): {got} can never pass a "
                          f"{b.stat} at {w.confidence:.0%} confidence ({why}), so with inconclusive: fail the test "
                          f"could only fail: use {', '.join(ways[:-1])} or {ways[-1]}")


def check_min_samples(w: Workload, where: str, samples: Any = None) -> None:
    """Config-time check that ``samples`` (default ``w.samples``) can support every percentile budget.

    Point estimate (``confidence`` None): a percentile q needs n >= 1/(1-q) samples
    (``stats.min_samples_for``); below that it is just the max.  At a confidence: fewer samples
    only widen the bounds (inconclusive), and the error is for a budget that no sample size up
    to ``samples`` (``max_samples`` with ``samples: auto``) could decide either way, and, for a
    fixed sample under ``inconclusive: fail``, one that could never pass (``check_can_pass``: a
    p95 at 95% below 59).  ITL is exempt: every request contributes ``output_tokens - 1`` values.
    """
    from ..measure.stats import min_samples_for
    from ..measure.verdict import decidable
    from ..spec.workload import with_statistics

    if samples is not None:
        w = with_statistics(w, {}, lambda p: where, samples)
    if w.trace is not None and samples is None and not w.samples_given:
        return  # the rows, not yet loaded, are the samples
    if w.mix is not None and not w.mix.from_rows:  # every class, on its share of the requests
        from ..spec.mix_spec import class_counts
        from ..spec.mix_workload import class_workload

        counts = list(zip(w.mix.classes, class_counts(w.mix, w.samples)))
        for c, k in counts:
            if k == 0:
                raise ConfigError(f"{where}: class {c.name} of the mix (weight {c.weight:g}) gets no request of "
                                  f"{w.samples}: raise requests to at least {-(-1 // c.weight):.0f}")
        for c, k in counts:
            check_min_samples(class_workload(w, c, k), f"{where} class {c.name} ({k} of {w.samples} requests)")
        return
    n = w.samples
    if w.confidence is not None:
        for b in w.budgets:
            if b.is_kv_transfer:
                continue  # a server histogram, judged on its buckets (core.checks.kv_transfer)
            if not decidable(b.stat, b.metric, w.confidence, n, w.sequential, w.min_samples):
                raise ConfigError(f"{where}: budget {b.key} ({b.source or 'class default'}): no sample size up to "
                                  f"{n} can decide a {b.stat} at {w.confidence:.0%} confidence: raise "
                                  f"{'max_samples' if w.sequential else 'samples'}, lower the confidence, "
                                  f"or use confidence: null (point estimate)")
        if not w.sequential and w.inconclusive == "fail":
            check_can_pass(w, where)  # a fixed sample that could only fail
        return
    short = [(min_samples_for(b.stat), b) for b in w.budgets
             if b.metric not in GAP_METRICS and not b.is_kv_transfer and n < min_samples_for(b.stat)]
    if not short:
        return
    need, b = max(short, key=lambda nb: nb[0])  # the first of the most demanding
    fallback = [s for s in ("p95", "p90", "p50") if min_samples_for(s) <= n]
    alt = f" or use {fallback[0]}" if fallback else ""
    more = "replay more rows (trace_rows, trace_start_ms)" if w.trace is not None else "raise samples"
    raise ConfigError(f"{where}: budget {b.key} ({b.source or 'class default'}): {b.stat} needs >= {need} samples, "
                      f"got {n}: {more}{alt}, or set confidence (e.g. 0.95) for a verdict with bounds")
