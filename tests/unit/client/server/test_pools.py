"""Issue 37: a disaggregated target's pools scraped around the samples (``client/server/pools.py``): a pool
on the target's origin with the target's client, one on another host without its credentials; what the
scrapes said recorded on ``res.disagg``, a silent pool named in a note and in the transfer note."""
from __future__ import annotations

import httpx

from pytest_llm_latency.client.server.pools import fetch_pools, record_pools
from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.measure.kv_transfer import DisaggTarget
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.rawserver import raw_server
from tests.helpers.records import record

BEFORE = """# TYPE vllm:nixl_xfer_time_seconds histogram
vllm:nixl_xfer_time_seconds_bucket{le="0.05"} 0
vllm:nixl_xfer_time_seconds_bucket{le="0.1"} 0
vllm:nixl_xfer_time_seconds_bucket{le="+Inf"} 0
vllm:nixl_xfer_time_seconds_sum 0
vllm:nixl_xfer_time_seconds_count 0
"""
AFTER = BEFORE.replace('le="0.1"} 0', 'le="0.1"} 4').replace('le="+Inf"} 0', 'le="+Inf"} 4') \
    .replace("_sum 0", "_sum 0.3").replace("_count 0", "_count 4")


class Client:
    def __init__(self, http, base_url):
        self.http, self.base_url = http, base_url


def test_a_pool_elsewhere_never_gets_the_targets_credentials():
    seen: list[bytes] = []

    def respond(req: bytes) -> bytes:
        seen.append(req)
        return b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    port, stop = raw_server(respond)
    try:
        with httpx.Client(headers={"authorization": "Bearer s3cret"}) as target_http:
            own = Client(target_http, f"http://127.0.0.1:{port}")
            other = Client(target_http, "http://proxy.invalid:8000")
            pools = DisaggTarget(f"http://127.0.0.1:{port}/prefill/metrics", None)
            assert fetch_pools(own, pools) == {"prefill": ""}
            assert fetch_pools(other, pools) == {"prefill": ""}
    finally:
        stop()
    assert b"authorization: bearer s3cret" in seen[0].lower()   # the target's own origin: its client
    assert b"s3cret" not in seen[1].lower()                      # another host's pool: no credentials
    assert fetch_pools(own, None) == {}


def res_of():
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": 3,
                            "confidence": None})
    return evaluate(w, [record(100), record(120), record(140)], [])


def test_the_pools_scrapes_become_the_disagg_part():
    res = res_of()
    pools = DisaggTarget("http://user:pw@p:8100/metrics", "http://d:8200/metrics")
    record_pools(res, pools, {"prefill": "", "decode": BEFORE}, {"prefill": "", "decode": AFTER})
    d = res.disagg
    assert d.prefill_metrics_url == "http://user:***@p:8100/metrics"   # credentials masked
    assert d.pools_scraped == ["prefill", "decode"]
    assert (d.transfers, d.kv_transfer_ms_mean) == (4.0, 75.0)
    assert d.kv_transfer_buckets["p95"] == "interpolated in the 50-100 ms bucket"
    assert d.client_ttft_ms_mean == 120.0
    assert not res.notes


def test_a_silent_pool_is_named():
    res = res_of()
    pools = DisaggTarget("http://p:8100/metrics", "http://d:8200/metrics")
    record_pools(res, pools, {"prefill": "", "decode": None}, {"prefill": "", "decode": None})
    assert res.disagg.kv_transfer_ms_mean is None
    assert "no /metrics answer from the decode pool (http://d:8200/metrics)" in res.disagg.transfer_note
    assert any("decode pool" in n for n in res.notes)


def test_a_run_that_never_got_ready_says_so_not_that_a_pool_was_silent():
    # worker processes: no worker reached its samples, so there is no scrape before them ({}): not a silent pool
    res = res_of()
    pools = DisaggTarget("http://p:8100/metrics", "http://d:8200/metrics")
    record_pools(res, pools, {}, {"prefill": "", "decode": AFTER}, never_ready=True)
    d = res.disagg
    assert d.kv_transfer_ms_mean is None and d.pools_scraped == []
    assert d.transfer_note == "the run never got ready (no worker process reached its samples), so the pools were " \
                              "not read"
    assert not res.notes and d.decode_metrics_url == "http://d:8200/metrics"
