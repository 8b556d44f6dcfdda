"""A disaggregated deployment's KV transfer and TTFT split, from its pools' own ``/metrics`` (issue 37).

Pure: takes the prefill and decode pools' scrapes before and after the samples (``server_model.Sample``,
by the engines' names: ``server_model.KV_TRANSFER``) and gives

* the transfer's statistics over the run's delta histogram, in ms: the mean (``_sum ÷ _count``) and
  the percentiles interpolated inside the bucket that holds the rank, as Prometheus'
  ``histogram_quantile`` does (``server_model.bucket_quantile``; ``max`` is the highest bucket's upper
  bound), each with that bucket's bounds stated, since a bucketed percentile is only known that far; a
  statistic whose rank falls in the +Inf bucket is the highest finite bound and only a lower bound
  (``lower_bounds``: the check fails it where that bound is already over the budget, else cannot judge it);
* bytes per transfer and the achieved GB/s (Σ bytes ÷ Σ transfer time, or SGLang's speed histogram)
  where the server reports them;
* the TTFT split, means: queue (the pools' queue time), prefill (the prefill pool's prefill time),
  KV transfer, first decode step (the decode pool's prefill phase: scheduled → first token on the
  shipped KV) and the remainder, client TTFT − the parts (the proxy, the network, and whatever a pool
  does not report), each part naming its source.

The floor these are judged against is ``core.roofline.kv_transfer``; the budgets ``kv_transfer_<stat>``
are judged by ``core.checks.kv_transfer``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .server_model import KV_TRANSFER, KV_TRANSFER_GAUGES, Histogram, Sample, bucket_bounds, bucket_quantile, \
    counter_delta, histogram_delta, scaled_delta

#: the budgets' metric (``kv_transfer_<stat>``): a server-side histogram, judged as a point estimate from its
#: buckets, never by the per-request budget check, goodput or sampling to a confidence
METRIC = "kv_transfer"
POOLS = ("prefill", "decode")
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "max": 1.0}


@dataclass(frozen=True)
class DisaggTarget:
    """Where a disaggregated target's pools say what they did: each pool's ``/metrics`` URL (absolute),
    and the link between them (``core.roofline.kv_transfer.Link``, None: not given)."""

    prefill_metrics_url: str | None = None
    decode_metrics_url: str | None = None
    link: Any = None

    def urls(self) -> dict[str, str]:
        return {p: u for p, u in (("prefill", self.prefill_metrics_url), ("decode", self.decode_metrics_url)) if u}


@dataclass(frozen=True)
class TransferStats:
    """The run's transfers, from one engine histogram on one pool."""

    name: str                        # the engine's histogram (vllm:nixl_xfer_time_seconds)
    pool: str                        # prefill | decode
    transfers: float                 # observations in the run (vLLM: one per transfer and rank)
    ms: dict[str, float]             # stat -> ms (mean, p50, p90, p95, p99, max)
    buckets: dict[str, str]          # stat -> the bucket it was interpolated in
    lower_bounds: tuple[str, ...] = ()  # stats whose rank is in the +Inf bucket: ms is the highest bound, "> that"
    bytes_mean: float | None = None  # per transfer, where reported
    bytes_source: str | None = None
    gb_s: float | None = None        # achieved: Σ bytes ÷ Σ time, or the server's speed histogram's mean
    gb_s_source: str | None = None
    failed: float | None = None      # failed transfers the pools counted in the run

    @property
    def source(self) -> str:
        return f"{self.name} on the {self.pool} pool"


def _bucket_text(h: Histogram, q: float, scale: float) -> str:
    b = bucket_bounds(h, q)
    if b is None:
        return ""
    lo, hi = b
    if not math.isfinite(hi):
        return f"above the highest bound {lo * scale:g} ms: a lower bound"
    return f"interpolated in the {lo * scale:g}-{hi * scale:g} ms bucket"


def histogram_ms(h: Histogram, scale: float) -> tuple[dict[str, float], dict[str, str], tuple[str, ...]]:
    """The stats of a delta histogram in ms (``scale``: ms per engine unit), each one's bucket, and the
    stats whose rank falls in the +Inf bucket (their figure is the highest finite bound: a lower bound)."""
    ms: dict[str, float] = {"mean": h.sum / h.count * scale}
    buckets = {"mean": f"_sum ÷ _count over {h.count:g} observations"}
    above: list[str] = []
    for stat, q in QUANTILES.items():
        v = bucket_quantile(h, q)
        if v is not None:
            ms[stat] = v * scale
            buckets[stat] = _bucket_text(h, q, scale)
            bounds = bucket_bounds(h, q)
            if bounds is not None and not math.isfinite(bounds[1]):
                above.append(stat)
    return ms, buckets, tuple(above)


def transfer_stats(scrapes: dict[str, tuple[Sample, Sample]]) -> TransferStats | None:
    """The first transfer-time histogram (``KV_TRANSFER["time"]``, in that order) with observations on
    any pool (decode first: vLLM reads the KV there); None when no pool reports one."""
    order = [p for p in ("decode", "prefill") if p in scrapes]
    for names in ((n,) for n in KV_TRANSFER["time"]):
        for pool in order:
            found = scaled_delta(*scrapes[pool], names)
            if found is None:
                continue
            name, scale, h = found
            ms, buckets, above = histogram_ms(h, scale)
            return _with_volume(TransferStats(name=name, pool=pool, transfers=h.count, ms=ms, buckets=buckets,
                                              lower_bounds=above), scrapes, pool, h, scale)
    return None


def _with_volume(st: TransferStats, scrapes: dict[str, tuple[Sample, Sample]], pool: str, time_h: Histogram,
                 time_scale: float) -> TransferStats:
    from dataclasses import replace

    before, after = scrapes[pool]
    kw: dict[str, Any] = {}
    size = scaled_delta(before, after, KV_TRANSFER["bytes"])
    if size is not None:
        name, scale, h = size
        kw.update(bytes_mean=h.sum / h.count * scale, bytes_source=f"{name} on the {pool} pool")
        seconds = time_h.sum * time_scale / 1000.0
        if seconds > 0:
            kw.update(gb_s=h.sum * scale / seconds / 1e9, gb_s_source=f"Σ {name} ÷ Σ {st.name}")
    speed = scaled_delta(before, after, KV_TRANSFER["speed"])
    if speed is not None and "gb_s" not in kw:
        name, scale, h = speed
        kw.update(gb_s=h.sum / h.count * scale, gb_s_source=f"{name} mean on the {pool} pool")
    failed = [f for p in scrapes if (f := counter_delta(*scrapes[p], "kv_transfer_failed")) is not None]
    if failed:
        kw["failed"] = sum(failed)
    return replace(st, **kw)


def gauge_only(scrapes: dict[str, tuple[Sample, Sample]]) -> str | None:
    """The name of a transfer gauge a pool exports instead of a histogram (older SGLang: the last
    transfer only, no distribution), for the error that says why nothing could be judged."""
    for pool, (_, after) in scrapes.items():
        for name in KV_TRANSFER_GAUGES:
            if name in after.gauges:
                return f"{name} (a gauge on the {pool} pool: the last transfer only, no distribution)"
    return None


def looked_for() -> str:
    """The histogram names searched, for the messages."""
    return ", ".join(n for n, _ in KV_TRANSFER["time"])


@dataclass(frozen=True)
class SplitPart:
    part: str            # queue | prefill | kv_transfer | first_decode_step | remainder
    ms: float
    source: str

    def as_json(self) -> dict[str, Any]:
        return {"part": self.part, "ms": round(self.ms, 3), "source": self.source}


def _mean_ms(scrapes: dict[str, tuple[Sample, Sample]], pool: str, key: str) -> tuple[float, str] | None:
    if pool not in scrapes:
        return None
    h = histogram_delta(*scrapes[pool], key)
    if h is None:
        return None
    from .server_model import HISTOGRAMS

    name = next(n for n in HISTOGRAMS[key] if n in scrapes[pool][1].histograms)
    return h.sum / h.count * 1000.0, f"{name} mean on the {pool} pool"


@dataclass
class TtftSplit:
    client_ttft_ms: float | None
    parts: list[SplitPart] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)   # parts no pool reported


def ttft_split(scrapes: dict[str, tuple[Sample, Sample]], transfer: TransferStats | None,
               client_ttft_mean_ms: float | None) -> TtftSplit:
    """The client's mean TTFT split into what the pools report (means) and the remainder."""
    out = TtftSplit(client_ttft_mean_ms)
    queues = [q for q in (_mean_ms(scrapes, p, "queue_time") for p in POOLS) if q is not None]
    if queues:
        out.parts.append(SplitPart("queue", sum(q[0] for q in queues), " + ".join(q[1] for q in queues)))
    else:
        out.missing.append("queue")
    for part, pool, key, how in (("prefill", "prefill", "prefill_time", ""),
                                 ("kv_transfer", "", "", ""),
                                 ("first_decode_step", "decode", "prefill_time",
                                  " (scheduled -> first token on the shipped KV)")):
        if part == "kv_transfer":
            if transfer is not None:
                out.parts.append(SplitPart(part, transfer.ms["mean"],
                                           f"{transfer.name} mean on the {transfer.pool} pool"))
            else:
                out.missing.append(part)
            continue
        got = _mean_ms(scrapes, pool, key)
        if got is None:
            out.missing.append(part)
        else:
            out.parts.append(SplitPart(part, got[0], got[1] + how))
    if client_ttft_mean_ms is not None and out.parts:
        rest = client_ttft_mean_ms - sum(p.ms for p in out.parts)
        unreported = f"; and what the pools did not report ({', '.join(out.missing)})" if out.missing else ""
        out.parts.append(SplitPart("remainder", rest, "client TTFT mean − the parts: the proxy/router and the "
                                                      f"network{unreported}"))
    return out


def as_part(transfer: TransferStats | None, split: TtftSplit) -> dict[str, Any]:
    """The ``disagg`` part's measured fields (``core.result.disagg_parts.DisaggInfo``)."""
    out: dict[str, Any] = {}
    if transfer is not None:
        out.update(transfer_source=transfer.source, transfers=round(transfer.transfers, 3),
                   kv_transfer_buckets=dict(transfer.buckets), kv_transfer_lower_bounds=list(transfer.lower_bounds),
                   **{f"kv_transfer_ms_{k}": round(v, 4) for k, v in transfer.ms.items()})
        for key in ("bytes_mean", "bytes_source", "gb_s", "gb_s_source", "failed"):
            v = getattr(transfer, key)
            if v is not None:
                out[f"transfer_{key}" if key != "failed" else "failed_transfers"] = \
                    round(v, 4) if isinstance(v, float) else v
    if split.client_ttft_ms is not None:
        out["client_ttft_ms_mean"] = round(split.client_ttft_ms, 4)
    if split.parts:
        out["ttft_split"] = [p.as_json() for p in split.parts]
    return out
