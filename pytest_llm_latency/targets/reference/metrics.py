"""``/metrics``: vLLM's Prometheus names and types, rendered by ``prometheus_client``.

Every duration observed here is *modelled* time x ``time_scale`` (the scheduler's
deadlines), i.e. what a wall clock would read if the server met every deadline exactly;
it never includes the server's own Python overhead.  Labels: ``model_name``.

With speculative decoding on (``spec_tokens`` > 0) vLLM's spec-decode counters are added,
counted as vLLM counts them: ``vllm:spec_decode_num_drafts_total`` one per sequence per step
that drafted, ``..._num_draft_tokens_total`` the tokens drafted (k, fewer on a request's last
steps), ``..._num_accepted_tokens_total`` the accepted ones, and
``..._num_accepted_tokens_per_pos_total{position="i"}`` the accepted ones at draft position i.
"""
from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# vLLM's bucket boundaries (vllm/v1/metrics/loggers.py)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)

# vLLM's NIXL connector (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py): transfer time in
# seconds (its bucket list without the first, 0.001), bytes per transfer 2**11 .. 2**33 every other power of two.
# vLLM's time buckets stop at 5 s; a slow pd_link (a few GB/s, a long prompt, transfers queued on the link) takes
# longer, so the reference adds buckets up to 80 s: its percentiles stay interpolated rather than only "> 5 s"
# (a real vLLM's above 5 s is only a lower bound: core.checks.kv_transfer fails or cannot judge it, never passes)
NIXL_TIME_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0, 10.0, 20.0, 40.0, 80.0)
NIXL_BYTES_BUCKETS = tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))

CONTENT_TYPE = CONTENT_TYPE_LATEST


class EngineMetrics:
    """One registry per server, so several servers in one process never share numbers."""

    def __init__(self, model_name: str, *, running: Callable[[], float],
                 waiting: Callable[[], float], kv_usage: Callable[[], float],
                 prefix_queries: Callable[[], float], prefix_hits: Callable[[], float],
                 spec_tokens: int = 0, kv_connector: bool = False):
        self.registry = CollectorRegistry(auto_describe=True)
        r, labels = self.registry, ["model_name"]

        def hist(name, doc, buckets):
            return Histogram(name, doc, labels, registry=r, buckets=buckets).labels(model_name)

        self.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                         TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                        ITL_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds",
                        "Histogram of e2e request latency in seconds.", REQUEST_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds",
                          "Histogram of time spent in WAITING phase for request.", REQUEST_BUCKETS)
        self.prefill = hist("vllm:request_prefill_time_seconds",
                            "Histogram of time spent in PREFILL phase for request.", REQUEST_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds",
                           "Histogram of time spent in DECODE phase for request.", REQUEST_BUCKETS)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                                     labels, registry=r).labels(model_name)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.",
                                         labels, registry=r).labels(model_name)
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               labels + ["finished_reason"], registry=r)
        self._model = model_name
        for name, doc, fn in (
                ("vllm:num_requests_running", "Number of requests in model execution batches.", running),
                ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting),
                ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv_usage)):
            Gauge(name, doc, labels, registry=r).labels(model_name).set_function(fn)
        _FnCounter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                   model_name, prefix_queries, r)
        _FnCounter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                   model_name, prefix_hits, r)
        self.kv_transfer: tuple | None = None   # (time, bytes): a P/D pair's decode pool, where vLLM reads the KV
        if kv_connector:
            self.kv_transfer = (
                hist("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.",
                     NIXL_TIME_BUCKETS),
                hist("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.",
                     NIXL_BYTES_BUCKETS))
            Counter("vllm:nixl_num_failed_transfers", "Number of failed NIXL KV Cache transfers.", labels,
                    registry=r).labels(model_name)
        self._spec: tuple | None = None
        if spec_tokens > 0:
            def counter(name, doc, extra=()):
                return Counter(name, doc, labels + list(extra), registry=r)

            per_pos = counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                              "Accepted tokens per draft position.", ["position"])
            self._spec = (
                counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.").labels(model_name),
                counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.").labels(model_name),
                counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.").labels(model_name),
                [per_pos.labels(model_name, str(i)) for i in range(spec_tokens)])

    def spec_decode(self, drafted: int, accepted: int) -> None:
        """One sequence's draft in one step: ``drafted`` tokens, the first ``accepted`` accepted."""
        if self._spec is None or drafted <= 0:
            return
        drafts, draft_tokens, accepted_tokens, per_pos = self._spec
        drafts.inc()
        draft_tokens.inc(drafted)
        accepted_tokens.inc(accepted)
        for i in range(accepted):
            per_pos[i].inc()

    def transferred(self, seconds: float, nbytes: float) -> None:
        """One KV transfer into this pool (``kv_connector``): its time (queued behind others on the link
        included, as a NIXL transfer's post-to-completion time) and its bytes."""
        if self.kv_transfer is not None:
            self.kv_transfer[0].observe(seconds)
            self.kv_transfer[1].observe(nbytes)

    def finished(self, reason: str) -> None:
        self.success.labels(self._model, reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _FnCounter:
    """A counter whose value is read from the engine at scrape time."""

    def __init__(self, name: str, doc: str, model_name: str, fn: Callable[[], float], registry):
        self.name, self.doc, self.model_name, self.fn = name, doc, model_name, fn
        registry.register(self)

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        fam = CounterMetricFamily(self.name, self.doc, labels=["model_name"])
        fam.add_metric([self.model_name], float(self.fn()))
        yield fam
