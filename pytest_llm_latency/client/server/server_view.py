"""The server's own view of a run (docs/load.md#the-servers-view-over-time): ``/metrics`` scraped
before, every ``INTERVAL_S`` during and after the samples, attached to ``res.server``.

The scrapes during the run use their own ``httpx.Client`` (the target's headers), so they never
take a connection from the measured requests' pool, and only fetch the text: parsing (milliseconds
of Python for vLLM's ~700 lines, holding the GIL that the streams' threads need to stamp their
tokens) waits until the samples are in.
"""
from __future__ import annotations

import threading

import httpx

from ...core.errors import MeasurementError
from ...core.measure.server_model import Histogram, Sample, timeline, view
from .prometheus import fetch_text
from ..transport.clock import MEASUREMENT_CLOCK

INTERVAL_S = 0.5


def parse_sample(text: str) -> Sample:
    """Gauges, counters (``_total`` dropped) and histograms (cumulative buckets by ``le``)."""
    from prometheus_client.parser import text_string_to_metric_families

    s = Sample()
    try:
        for fam in text_string_to_metric_families(text):
            for smp in fam.samples:
                name, v = smp.name, float(smp.value)
                if name.endswith("_created"):
                    continue
                if fam.type == "counter":
                    key = name[:-6] if name.endswith("_total") else name
                    s.counters[key] = s.counters.get(key, 0.0) + v
                elif fam.type == "histogram":
                    h = s.histograms.setdefault(fam.name, Histogram())
                    if name.endswith("_bucket"):
                        le = float(smp.labels.get("le", "inf"))
                        h.buckets[le] = h.buckets.get(le, 0.0) + v
                    elif name.endswith("_sum"):
                        h.sum += v
                    elif name.endswith("_count"):
                        h.count += v
                elif fam.type in ("gauge", "untyped", "unknown"):
                    s.gauges[name] = s.gauges.get(name, 0.0) + v
    except ValueError as exc:
        raise MeasurementError("metrics", f"/metrics is not valid Prometheus text: {exc}") from None
    return s


def fetch_sample(http: httpx.Client, base_url: str, timeout_s: float = 5.0) -> Sample | None:
    text = fetch_text(http, base_url, timeout_s)
    try:
        return None if text is None else parse_sample(text)
    except MeasurementError:
        return None


class ServerTimeline:
    """Context manager around the samples.  ``before``: the runner's scrape (None: the target
    has no /metrics, and nothing is scraped)."""

    def __init__(self, client, before):
        self.clock = getattr(client, "clock", None) or MEASUREMENT_CLOCK  # the records' clock
        self.base_url = getattr(client, "base_url", None)
        http = getattr(client, "http", None)
        self.enabled = before is not None and self.base_url is not None and isinstance(http, httpx.Client)
        self.headers = dict(http.headers) if self.enabled and isinstance(http, httpx.Client) else {}
        self.interval_s = INTERVAL_S
        self.texts: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._http: httpx.Client | None = None

    def _scrape(self) -> None:
        assert self._http is not None and self.base_url is not None  # started: enabled
        text = fetch_text(self._http, self.base_url, timeout_s=max(self.interval_s * 4, 2.0))
        if text is not None:
            self.texts.append((self.clock(), text))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._scrape()

    def __enter__(self) -> "ServerTimeline":
        if self.enabled:
            self._http = httpx.Client(headers=self.headers, timeout=5.0)
            self._scrape()
            self._thread = threading.Thread(target=self._run, name="llm-latency-metrics", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=10.0)
            self._scrape()
        if self._http is not None:
            self._http.close()

    def _samples(self) -> list[tuple[int, Sample]]:
        """Each scrape parsed, in order; one that does not parse is left out."""
        out = []
        for t, text in self.texts:
            try:
                out.append((t, parse_sample(text)))
            except MeasurementError:
                continue
        return out

    def gauges(self) -> list[dict[str, float]]:
        """Each scrape's gauges (by the engine's names), in order: the windowed figures a server
        reports as gauges (SGLang's ``spec_accept_length``) are read over the run."""
        return [s.gauges for _, s in self._samples()]

    def attach(self, res, records, failures) -> None:
        """``server_*`` figures and ``metrics_timeline`` on ``res.server``."""
        samples = self._samples()
        if len(samples) < 2:
            return
        v = view(samples[0][1], samples[-1][1], [s for _, s in samples[1:-1]])
        res.server.set(**v.as_extra())
        sends = [r.t_send_ns for r in records] + [f.t_send_ns for f in failures if f.t_send_ns is not None]
        if sends:  # the requests' axis: ms since the first measured send (plugin/report/detail.py)
            res.server.metrics_timeline = timeline(samples, min(sends))
