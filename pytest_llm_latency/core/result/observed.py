"""The figure a budget was judged on, read from the judged result (one place for every kind of budget):
a per-request metric's statistic (``res.summaries``, failures counted as misses: ``core.checks.budgets``), a
fraction of the run (``res.load``), a speculative-decoding floor (``res.spec_decode``), a stall budget's
statistic of the stall gaps (``res.stall``: ``core.checks.stalls``) and a KV-transfer budget's of the pools'
histogram (``res.disagg``: ``core.checks.kv_transfer``).  Read by a server sweep's ranking
(``core.result.arm_ranking``) and a mix's class rows (``core.checks.mix``).  Pure."""
from __future__ import annotations

from ..measure.coldstart import COLD_BUDGET
from ..spec.budgets import Budget
from .result import WorkloadResult


def observed(res: WorkloadResult, b: Budget) -> float | None:
    """The figure budget ``b`` was judged on, from the judged ``res`` (ms for a ceiling on a time, tok/s for
    ``output_tps_min``, a fraction, tokens per step); None where it has none (not measured, no samples, or
    ``cold_ttft_max``: one request after an unload, not the samples)."""
    if b.key == COLD_BUDGET:
        return None
    if b.is_fraction:
        return res.load.goodput_fraction if b.metric == "goodput" else res.load.fluidity_index
    if b.is_acceptance:
        return getattr(res.spec_decode, b.metric, None)
    if b.is_stall:
        return getattr(res.stall, f"stall_ms_{b.stat}", None)
    if b.is_kv_transfer:
        return getattr(res.disagg, f"kv_transfer_ms_{b.stat}", None)
    s = res.summaries.get(b.metric)
    return s.get(b.stat) if s is not None and s.n else None
