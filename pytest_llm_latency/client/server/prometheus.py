"""Scrape a server's Prometheus ``/metrics`` with ``prometheus_client``'s parser and
diff two scrapes.

Counters and histogram/summary ``_count``/``_sum`` series are summed over their
labels; a counter reset (value went down) yields no delta.  Gauges keep the
value of the second scrape.  Names are the server's own (``vllm:...``,
``sglang:...``, ``llamacpp:...``, ``tgi_...``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import httpx

from ...core.errors import MeasurementError
from ..transport.http import bounded_request

MAX_METRICS_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Scrape:
    counters: dict[str, float]
    gauges: dict[str, float]


def parse_metrics(text: str) -> Scrape:
    from prometheus_client.parser import text_string_to_metric_families

    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name.endswith("_created"):  # creation timestamps, not measurements
                    continue
                if fam.type == "counter" or (fam.type in ("histogram", "summary")
                                             and s.name.endswith(("_count", "_sum"))):
                    counters[s.name] = counters.get(s.name, 0.0) + s.value
                elif fam.type in ("gauge", "untyped", "unknown"):
                    gauges[s.name] = gauges.get(s.name, 0.0) + s.value
    except ValueError as exc:
        raise MeasurementError("metrics", f"/metrics is not valid Prometheus text: {exc}") from None
    return Scrape(counters, gauges)


def fetch_text(http: httpx.Client, base_url: str, timeout_s: float = 5.0) -> str | None:
    """The ``/metrics`` text, bounded in time and size; ``None`` when there is none (404,
    disabled, unreachable) -- that is normal."""
    try:
        r = bounded_request(http, "GET", base_url.rstrip("/") + "/metrics", total_s=timeout_s,
                            max_bytes=MAX_METRICS_BYTES)
    except httpx.HTTPError:
        return None
    return r.text if r.status_code == 200 else None  # a larger answer raised (max_bytes)


def scrape(http: httpx.Client, base_url: str, timeout_s: float = 5.0) -> Scrape | None:
    """``None`` when the server has no /metrics (404, disabled) -- that is normal."""
    text = fetch_text(http, base_url, timeout_s)
    return None if text is None else parse_metrics(text)


def delta(before: Scrape, after: Scrape) -> dict[str, float]:
    """Counter increases over the measurement, plus the gauges' final values."""
    out = {}
    for name, v in list(after.counters.items()) + list(after.gauges.items()):
        if not math.isfinite(v):  # NaN/Inf are legal Prometheus values but not JSON
            continue
        if name in after.gauges:
            out[name] = v
            continue
        d = v - before.counters.get(name, 0.0)
        if math.isfinite(d) and d >= 0:
            out[name] = d
    return out
