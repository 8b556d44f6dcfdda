"""Verdicts on a clock the client skewed are refused, not guessed: a latency budget whose verdict the
client's own stamping error (``core.measure.stamp_bounds``) could flip is not judged; the rule:
docs/load.md#stamps-and-their-bound."""
from __future__ import annotations

import math

from ..findings import Finding
from ..result.result import METRIC_LABEL, WorkloadResult, metric_values
from ..measure.stamp_bounds import SOURCES, Bounded, StatBound, read_bound_ms, samples, stat_bound, stamp_mode
from ..spec.workload import Budget

CHECK = "client_skew"
WAY_OUT = ("give the test process a CPU of its own (no other load, fewer pytest-xdist workers), fewer streams, or "
           "more worker processes (workers: auto, or workers: N)")


def skew_bound(res: WorkloadResult, b: Budget, observed: float) -> StatBound | None:
    """How far the true value of ``b``'s statistic may lie from ``observed`` (None: no stamped
    sample).  Failed requests count as the result counts them: a miss (+inf) exactly, a partial
    stream's finite values with the widest bound of the run's samples."""
    mode = stamp_mode(res.records)
    if mode is None:
        return None
    read_ms = read_bound_ms(res.client.client_lag_ms_p99)
    bounded = samples(res.records, b.metric, read_ms)
    if not bounded:
        return None
    failed = metric_values([], res.failures, res.workload.output_tokens).get(b.metric, [])
    misses = sum(1 for v in failed if math.isinf(v))
    below, above = max(x.below for x in bounded), max(x.above for x in bounded)
    bounded += [Bounded(v, below, above) for v in failed if not math.isinf(v)]
    return stat_bound(bounded, b.stat, observed, misses=misses)


def check_skew(res: WorkloadResult, b: Budget, observed: float) -> Finding | None:
    """The refusal of ``b`` measured at ``observed`` when the client's error could flip it."""
    if b.is_floor or b.is_count or (sb := skew_bound(res, b, observed)) is None:  # a count has no clock
        return None
    fail = observed > b.limit
    flips = (observed - sb.below <= b.limit) if fail else (observed + sb.above > b.limit)
    if not flips:
        return None
    by = sb.below if fail else sb.above
    verb = "fail" if fail else "pass"
    c = res.client
    figures = ", ".join(f"{k} {v:g} ms" for k, v in (("stamp bound p99", c.stamp_bound_ms_p99),
                                                     ("read delay p99", c.read_delay_ms_p99),
                                                     ("lag p99", c.client_lag_ms_p99)) if v is not None)
    mode = stamp_mode(res.records) or "read"
    return Finding(CHECK, "error",
                   f"{METRIC_LABEL[b.metric]} {b.stat} cannot be judged: measured {observed:.2f} ms against the budget "
                   f"{b.limit:g} ms, and the client's own stamps could have moved it by up to {by:.2f} ms, enough to "
                   f"turn this {verb} around ({SOURCES[mode]}; {figures}) -- {WAY_OUT}")
