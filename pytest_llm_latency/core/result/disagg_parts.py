"""The ``disagg`` part of a result: a disaggregated target's KV transfer, its floor and the TTFT split
(issue 37).  Measured by ``client/drivers/pipeline.py`` from the pools' ``/metrics``
(``core.measure.kv_transfer``), the floor's arithmetic added by the plugin (``plugin/disagg_floor.py``,
``core.roofline.kv_transfer``), judged by ``core.checks.kv_transfer``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .part import Part


@dataclass
class DisaggInfo(Part):
    """Prefill pool → KV transfer → decode pool: what the pools reported over the run and the floor."""
    NAME: ClassVar[str] = "disagg"
    prefill_metrics_url: str | None = None     # where the pools were scraped (credentials masked)
    decode_metrics_url: str | None = None
    pools_scraped: list[str] = field(default_factory=list)   # the pools whose /metrics answered before and after
    # the transfers (core.measure.kv_transfer.TransferStats): ms, from the run's delta histogram
    transfer_source: str | None = None         # the engine's histogram and the pool
    transfers: float | None = None             # observations in the run (vLLM: per transfer and rank)
    kv_transfer_ms_mean: float | None = None
    kv_transfer_ms_p50: float | None = None
    kv_transfer_ms_p90: float | None = None
    kv_transfer_ms_p95: float | None = None
    kv_transfer_ms_p99: float | None = None
    kv_transfer_ms_max: float | None = None
    kv_transfer_buckets: dict[str, str] = field(default_factory=dict)  # stat -> the bucket it was interpolated in
    transfer_bytes_mean: float | None = None   # the server's bytes per transfer
    transfer_bytes_source: str | None = None
    transfer_gb_s: float | None = None         # achieved: Σ bytes ÷ Σ time (or the server's speed histogram)
    transfer_gb_s_source: str | None = None
    failed_transfers: float | None = None
    transfer_note: str | None = None           # why no transfer was measured (no answer, a gauge only...)
    # the link and the floor (core.roofline.kv_transfer): the prompt's KV bytes ÷ the link's bandwidth
    link: str | None = None                    # catalog key, or "custom"
    link_name: str | None = None
    link_gb_s: float | None = None             # one direction
    link_source: str | None = None
    kv_bytes_per_token: float | None = None    # the prompt's KV bytes ÷ its tokens
    prompt_tokens: float | None = None         # the completed requests' mean prompt tokens
    kv_bytes: float | None = None              # KV cache bytes of that prompt
    floor_ms: float | None = None              # kv_bytes ÷ link bandwidth
    achieved_fraction: float | None = None     # floor ÷ mean transfer time (achieved GB/s ÷ link)
    floor_arithmetic: str | None = None
    # prompts of different lengths (a mix, a distribution, a trace): a p95 transfer is a long prompt's, so each
    # percentile's floor is at that percentile of the prompt tokens: stat -> {prompt_tokens, kv_bytes, floor_ms}
    floor_by_stat: dict[str, dict] = field(default_factory=dict)
    floor_note: str | None = None              # why there is no floor (no model bytes, no link)
    # the TTFT split (means): [{part, ms, source}] -- queue, prefill, kv_transfer, first_decode_step, remainder
    client_ttft_ms_mean: float | None = None
    ttft_split: list[dict] = field(default_factory=list)

    def floor_at(self, stat: str) -> tuple[float | None, float | None]:
        """``(kv_bytes, floor_ms)`` a transfer's ``stat`` compares with: that percentile's prompt where the
        prompts' lengths differ (``floor_by_stat``), else the one prompt length's (the mean)."""
        at = self.floor_by_stat.get(stat)
        if isinstance(at, dict) and isinstance(at.get("kv_bytes"), (int, float)) \
                and isinstance(at.get("floor_ms"), (int, float)):
            return float(at["kv_bytes"]), float(at["floor_ms"])
        return self.kv_bytes, self.floor_ms
