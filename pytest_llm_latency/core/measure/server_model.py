"""One model of what a server says about itself in ``/metrics``, whatever the engine calls it.

Pure: takes parsed scrapes (``Sample``: gauges, counters and histogram buckets by the engine's
own names, counters without ``_total``) and gives the figures the diagnosis and the reports
use.  ``client/server/server_view.py`` scrapes and parses (``prometheus_client``).

The names, first found wins (``shared/reference/protocols.md``):
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

#: model field -> engine names (vLLM current, vLLM older, SGLang, llama.cpp, TGI)
GAUGES = {
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred", "tgi_queue_size"),
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing",
                "tgi_batch_current_size"),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                 "llamacpp:kv_cache_usage_ratio"),
    "cache_hit_rate": ("sglang:cache_hit_rate",),
}
COUNTERS = {
    "prefix_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries", "llamacpp:prompt_tokens"),
    "prefix_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits", "llamacpp:prompt_tokens_cached"),
    "preemptions": ("vllm:num_preemptions", "sglang:num_retracted_reqs"),
    "kv_transfer_failed": ("vllm:nixl_num_failed_transfers", "sglang:num_transfer_failed_reqs"),
}
HISTOGRAMS = {
    "queue_time": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds", "tgi_request_queue_duration"),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds", "tgi_request_mean_time_per_token_duration"),
}
#: KV transfer between a prefill and a decode pool (issue 37, ``core.measure.kv_transfer``): per model field,
#: (engine name, what one engine unit is in ms / bytes / GB/s).  vLLM's NIXL connector
#: (``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py``) observes one sample per transfer and
#: rank where the KV is read (the decode pool), in seconds and bytes; SGLang (``metrics_collector.py``)
#: on the prefill pool, in ms, MB (taken as 2**20 bytes [U]) and GB/s -- histograms in current SGLang,
#: gauges of the last transfer in older ones (no distribution: ``KV_TRANSFER_GAUGES``).  NVIDIA Dynamo's
#: workers export their engine's own names on their system port (``DYN_SYSTEM_PORT``).
KV_TRANSFER = {
    "time": (("vllm:nixl_xfer_time_seconds", 1000.0), ("sglang:kv_transfer_latency_ms", 1.0)),
    "bytes": (("vllm:nixl_bytes_transferred", 1.0), ("sglang:kv_transfer_total_mb", float(2 ** 20))),
    "speed": (("sglang:kv_transfer_speed_gb_s", 1.0),),
}
KV_TRANSFER_GAUGES = ("sglang:kv_transfer_latency_ms", "sglang:kv_transfer_speed_gb_s")
#: the gauges drawn over time (the JSON's ``metrics_timeline`` uses the engine's own names)
TIMELINE_FIELDS = ("waiting", "running", "kv_usage")


@dataclass
class Histogram:
    buckets: dict[float, float] = field(default_factory=dict)   # le -> cumulative count
    sum: float = 0.0
    count: float = 0.0


@dataclass
class Sample:
    """One parsed scrape, by the engine's names."""
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)


def _first(table: dict, names) -> str | None:
    return next((n for n in names if n in table), None)


def gauge(s: Sample, key: str) -> tuple[str, float] | None:
    name = _first(s.gauges, GAUGES[key])
    return None if name is None else (name, s.gauges[name])


def counter_delta(before: Sample, after: Sample, key: str) -> float | None:
    name = _first(after.counters, COUNTERS[key])
    if name is None:
        return None
    d = after.counters[name] - before.counters.get(name, 0.0)
    return d if d >= 0 else None  # a reset: no delta


def histogram_delta(before: Sample, after: Sample, key: str) -> Histogram | None:
    name = _first(after.histograms, HISTOGRAMS[key])
    if name is None:
        return None
    a, b = after.histograms[name], before.histograms.get(name, Histogram())
    out = Histogram({le: c - b.buckets.get(le, 0.0) for le, c in a.buckets.items()}, a.sum - b.sum,
                    a.count - b.count)
    return out if out.count > 0 and all(v >= 0 for v in out.buckets.values()) else None


def scaled_delta(before: Sample, after: Sample, names) -> tuple[str, float, Histogram] | None:
    """The first of ``names`` (``(engine name, unit scale)`` pairs, ``KV_TRANSFER``) with observations in
    this run: ``(name, scale, after - before)``; None when none has."""
    for name, scale in names:
        if name not in after.histograms:
            continue
        a, b = after.histograms[name], before.histograms.get(name, Histogram())
        out = Histogram({le: c - b.buckets.get(le, 0.0) for le, c in a.buckets.items()}, a.sum - b.sum,
                        a.count - b.count)
        if out.count > 0 and all(v >= 0 for v in out.buckets.values()):
            return name, scale, out
    return None


def bucket_bounds(h: Histogram, q: float) -> tuple[float, float] | None:
    """The ``(lower, upper)`` bounds of the bucket holding rank ``q * count``, where ``bucket_quantile``
    interpolates (upper ``inf``: the +Inf bucket, so the answer is only a lower bound)."""
    if h.count <= 0:
        return None
    rank, prev = q * h.count, 0.0
    for le in sorted(h.buckets):
        if h.buckets[le] >= rank:
            return prev, le
        prev = le
    return prev, math.inf


def bucket_quantile(h: Histogram, q: float) -> float | None:
    """Prometheus ``histogram_quantile``: linear interpolation inside the bucket holding rank
    ``q * count``; the +Inf bucket answers with the highest finite bound."""
    if h.count <= 0:
        return None
    rank = q * h.count
    prev_le, prev_c = 0.0, 0.0
    finite = [le for le in sorted(h.buckets) if math.isfinite(le)]
    for le in sorted(h.buckets):
        c = h.buckets[le]
        if c >= rank:
            if not math.isfinite(le):
                break  # the +Inf bucket: the highest finite bound answers
            return le if c == prev_c else prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return finite[-1] if finite else None


@dataclass(frozen=True)
class ServerView:
    """The server's figures over a run.  Times in ms; None: the server does not export it."""
    waiting_max: float | None = None
    waiting_mean: float | None = None
    running_max: float | None = None
    running_mean: float | None = None
    kv_usage_max: float | None = None
    prefix_hit_rate: float | None = None
    prefix_queries: float | None = None
    preemptions: float | None = None
    queue_ms_p50: float | None = None
    queue_ms_p95: float | None = None
    queue_ms_mean: float | None = None
    prefill_ms_p50: float | None = None
    prefill_ms_p95: float | None = None
    prefill_ms_mean: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p95: float | None = None
    ttft_ms_mean: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p95: float | None = None
    scrapes: int = 0

    def as_extra(self) -> dict[str, float]:
        """``server_*`` fields of ``WorkloadResult.server`` (JSON ``server``, JUnit ``llm.server.server_*``)."""
        out = {f"server_{k}": round(float(v), 4) for k, v in self.__dict__.items() if v is not None and k != "scrapes"}
        return {**out, "server_scrapes": self.scrapes}


def view(before: Sample, after: Sample, during: Sequence[Sample] = ()) -> ServerView:
    """Gauges: max and mean over every scrape (before, during, after); counters and histograms:
    the difference after - before (only what this run did)."""
    scrapes = [before, *during, after]
    kw: dict = {"scrapes": len(scrapes)}
    for key in ("waiting", "running", "kv_usage"):
        vals = [g[1] for g in (gauge(s, key) for s in scrapes) if g is not None and math.isfinite(g[1])]
        if vals:
            kw[f"{key}_max"] = max(vals)
            if key != "kv_usage":
                kw[f"{key}_mean"] = sum(vals) / len(vals)
    q, h = counter_delta(before, after, "prefix_queries"), counter_delta(before, after, "prefix_hits")
    if q is not None and h is not None \
            and _first(after.counters, COUNTERS["prefix_queries"]) == "llamacpp:prompt_tokens":
        q += h  # llama.cpp counts prompt tokens excluding the cached ones
    if q is not None:
        kw["prefix_queries"] = q   # 0: no lookups at all (prefix caching off)
    if q and h is not None:
        kw["prefix_hit_rate"] = h / q
    elif (hit_rate := gauge(after, "cache_hit_rate")) is not None:
        kw["prefix_hit_rate"] = hit_rate[1]
    if (pre := counter_delta(before, after, "preemptions")) is not None:
        kw["preemptions"] = pre
    for key in ("queue_time", "prefill_time", "ttft", "itl"):
        if (hist := histogram_delta(before, after, key)) is None:
            continue
        short = key.replace("_time", "")
        for name, qq in (("p50", 0.5), ("p95", 0.95)):
            v = bucket_quantile(hist, qq)
            if v is not None:
                kw[f"{short}_ms_{name}"] = v * 1000.0
        if short != "itl":
            kw[f"{short}_ms_mean"] = hist.sum / hist.count * 1000.0
    return ServerView(**kw)


def timeline(samples: list[tuple[int, Sample]], t0_ns: int) -> dict[str, list[list[float]]]:
    """``{engine gauge name: [[t_ms, value], ...]}`` on the requests' axis (ms since ``t0_ns``)."""
    out: dict[str, list[list[float]]] = {}
    for t_ns, s in samples:
        for key in TIMELINE_FIELDS:
            g = gauge(s, key)
            if g is not None and math.isfinite(g[1]):
                out.setdefault(g[0], []).append([round((t_ns - t0_ns) / 1e6, 3), g[1]])
    return out
