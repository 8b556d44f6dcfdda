"""A structured workload's run (issue 36): its prompts ask for the schema, and with
``structured_tpot_overhead_max`` every sample has an unconstrained twin sent interleaved with it
through the same send path (``pipeline.measure_samples``): the driver is given twice the samples, in
pairs whose order alternates (``core.measure.structured.pair_roles``), each prompt with its own salt.
The twins are set apart after the run; their TPOT is the comparison (``core.measure.structured.tpot_overhead``)."""
from __future__ import annotations

import statistics
from dataclasses import replace

from ...core.measure import metrics as m
from ...core.measure.record import RequestRecord
from ...core.measure.structured import COMPARISON, CONSTRAINED, SCHEMA_VIOLATION, tpot_overhead
from ...core.prompts.synthesis import Prompt
from ...core.result.result import Failure, WorkloadResult
from ...core.spec.structured_spec import structured_prompts
from ...core.spec.workload import Workload


def sent_workload(workload: Workload) -> Workload:
    """The workload as its driver sends it: twice the samples when the twins are asked for."""
    s = workload.structured
    return replace(workload, samples=2 * workload.samples) if s is not None and s.compares else workload


def ask(prompts: list[Prompt], workload: Workload) -> list[Prompt]:
    """``prompts`` (warm-up first, then the samples) asking for the workload's schema, the samples in pairs
    with their twins when compared; unchanged for a workload without ``structured:``."""
    s = workload.structured
    if s is None:
        return prompts
    return structured_prompts(prompts, s, workload.warmup, workload.samples if s.compares else 0)


def split_twins(outcomes: list) -> tuple[list, list]:
    """(the workload's outcomes, the unconstrained twins') in arrival order."""
    mine = [o for o in outcomes if getattr(o, "structured", None) != COMPARISON]
    return mine, [o for o in outcomes if getattr(o, "structured", None) == COMPARISON]


def _p50(values: list[float]) -> float | None:
    return round(float(statistics.median(values)), 4) if values else None


def record_structured(res: WorkloadResult, twins: list) -> None:
    """The ``structured`` part: the schema, its violations, the constrained lengths, and the TPOT
    overhead against ``twins`` (the unconstrained requests) when they were sent."""
    s = res.workload.structured
    if s is None:
        return
    part = res.structured
    constrained = [r for r in res.records if r.structured == CONSTRAINED]
    lengths = sorted(r.output_tokens for r in constrained)
    part.set(schema=s.path, schema_violations=sum(1 for f in res.failures if f.kind == SCHEMA_VIOLATION),
             tpot_overhead_max=s.overhead_max)
    if lengths:
        part.set(output_tokens_min=lengths[0], output_tokens_p50=float(statistics.median(lengths)),
                 output_tokens_max=lengths[-1])
    tpots = [t for r in constrained if (t := m.tpot_ms(r)) is not None]
    part.tpot_ms_p50 = _p50(tpots)
    if not s.compares:
        return
    twin_records = [o for o in twins if isinstance(o, RequestRecord)]
    twin_tpots = [t for r in twin_records if not r.short_output and (t := m.tpot_ms(r)) is not None]
    part.set(comparison_requests=len(twin_records), comparison_failed=sum(1 for o in twins if isinstance(o, Failure)),
             comparison_tpot_ms_p50=_p50(twin_tpots))
    overhead = tpot_overhead(tpots, twin_tpots)
    part.tpot_overhead = None if overhead is None else round(overhead, 4)
