"""A disaggregated target's pools (issue 37): each pool's ``/metrics`` scraped before and after the samples
(text only; parsed afterwards, off the streams' timing path), and what they said recorded on ``res.disagg``
(``core.measure.kv_transfer``: the transfer's statistics and the TTFT split).

A pool on the target's own origin is scraped with the target's client (its headers); a pool elsewhere with
a client of its own that carries no credentials, so the target's API key never goes to another host.
"""
from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from ...core.errors import MeasurementError
from ...core.measure import kv_transfer as kt
from ...core.redact import redact_url
from ..transport.http import bounded_request
from .prometheus import MAX_METRICS_BYTES


def _origin(url: str | None) -> tuple[str, str]:
    parts = urlsplit(url or "")
    return parts.scheme.lower(), parts.netloc.rpartition("@")[2].lower()


def fetch_pools(client, disagg: kt.DisaggTarget | None, timeout_s: float = 5.0) -> dict[str, str | None]:
    """Each pool's ``/metrics`` text (None: no answer); {} for a target that is not disaggregated."""
    if disagg is None:
        return {}
    own = getattr(client, "http", None)
    base = getattr(client, "base_url", None)
    out: dict[str, str | None] = {}
    with httpx.Client(timeout=timeout_s) as plain:
        for pool, url in disagg.urls().items():
            http = own if isinstance(own, httpx.Client) and _origin(url) == _origin(base) else plain
            try:
                r = bounded_request(http, "GET", url, total_s=timeout_s, max_bytes=MAX_METRICS_BYTES)
                out[pool] = r.text if r.status_code == 200 else None
            except (httpx.HTTPError, MeasurementError):
                out[pool] = None
    return out


#: why the pools were not read when worker processes sent the samples and none got ready (no "before" scrape)
NEVER_READY = "the run never got ready (no worker process reached its samples), so the pools were not read"


def record_pools(res, disagg: kt.DisaggTarget | None, before: dict[str, str | None],
                 after: dict[str, str | None], *, never_ready: bool = False) -> None:
    """The pools' transfer and TTFT split on ``res.disagg`` (figures: ``core.checks.kv_transfer`` judges).
    ``never_ready``: worker processes sent the samples and none got ready, so there is no scrape before them:
    the transfer note says so, and no pool is named as silent (the run is an error naming the workers)."""
    if disagg is None:
        return
    from .server_view import parse_sample

    d = res.disagg
    d.set(prefill_metrics_url=redact_url(disagg.prefill_metrics_url) if disagg.prefill_metrics_url else None,
          decode_metrics_url=redact_url(disagg.decode_metrics_url) if disagg.decode_metrics_url else None)
    if never_ready:
        d.transfer_note = NEVER_READY
        return
    scrapes = {}
    silent = []
    for pool, url in disagg.urls().items():
        texts = before.get(pool), after.get(pool)
        try:
            pair = (parse_sample(texts[0]), parse_sample(texts[1])) \
                if texts[0] is not None and texts[1] is not None else None
        except MeasurementError:
            pair = None
        if pair is None:
            silent.append(f"no /metrics answer from the {pool} pool ({redact_url(url)}) before and after the samples")
        else:
            scrapes[pool] = pair
    d.pools_scraped = list(scrapes)
    transfer = kt.transfer_stats(scrapes)
    ttft = res.completed.get("ttft")
    split = kt.ttft_split(scrapes, transfer, ttft.mean if ttft is not None else None)
    d.set(**kt.as_part(transfer, split))
    if transfer is None:
        d.transfer_note = "; ".join(x for x in (*silent, kt.gauge_only(scrapes)) if x) or None
    for why in silent:
        res.notes.append(f"disaggregated target: {why}")
