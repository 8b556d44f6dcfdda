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
    # the stats whose rank fell in the +Inf bucket: their figure is the highest finite bound, the stat only "> that"
    kv_transfer_lower_bounds: list[str] = field(default_factory=list)
    transfer_bytes_mean: float | None = None   # the server's bytes per transfer
    transfer_bytes_source: str | None = None
    transfer_gb_s: float | None = None         # achieved: Σ bytes ÷ Σ time (or the server's speed histogram)
    transfer_gb_s_source: str | None = None
    failed_transfers: float | None = None
    transfer_note: str | None = None           # why no transfer was measured (no answer, a gauge only...)
    # the link and the floor (core.roofline.kv_transfer.RunFloor): each request's own prompt's KV bytes ÷ the link
    link: str | None = None                    # catalog key, or "custom"
    link_name: str | None = None
    link_gb_s: float | None = None             # one direction
    link_source: str | None = None
    kv_bytes_per_token: float | None = None    # kv_bytes ÷ prompt_tokens
    prompt_tokens: float | None = None         # the completed requests' mean prompt tokens
    prompt_tokens_min: float | None = None     # their shortest and longest prompts
    prompt_tokens_max: float | None = None
    kv_bytes: float | None = None              # the requests' mean KV cache bytes
    floor_ms: float | None = None              # the mean of the requests' floors (kv_bytes ÷ link bandwidth)
    floor_ms_p50: float | None = None          # the same statistic of the requests' floors, for the transfers'
    floor_ms_p90: float | None = None
    floor_ms_p95: float | None = None
    floor_ms_p99: float | None = None
    floor_ms_max: float | None = None          # the longest prompt's
    achieved_fraction: float | None = None     # floor_ms ÷ mean transfer time (achieved GB/s ÷ link)
    floor_arithmetic: str | None = None
    floor_note: str | None = None              # why there is no floor (no model bytes, no link)
    # the TTFT split (means): [{part, ms, source}] -- queue, prefill, kv_transfer, first_decode_step, remainder
    client_ttft_ms_mean: float | None = None
    ttft_split: list[dict] = field(default_factory=list)

    def floor_for(self, stat: str) -> tuple[float, str] | None:
        """The floor a transfer's ``stat`` is compared with -- the same statistic of the requests' floors -- and
        which it is in words where the prompts differ ("" where they are all one length); None: no floor."""
        floor = self.floor_ms if stat == "mean" else getattr(self, f"floor_ms_{stat}", None)
        if floor is None:
            return None
        low, top = self.prompt_tokens_min, self.prompt_tokens_max
        if low is None or top is None or low == top:
            return floor, ""
        prompts = f"prompts {low:,.0f}-{top:,.0f} tokens"
        if stat == "max":
            return floor, f"the longest prompt's, {top:,.0f} tokens"
        if stat == "mean":
            return floor, f"the mean of the requests' floors, {prompts}"
        return floor, f"the {stat} of the requests' floors, {prompts}"
