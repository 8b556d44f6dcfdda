"""The reference target as a prefill/decode pair (``pd_link=``, ``targets/reference/disagg.py``): each pool's
vLLM ``/metrics`` on its own path, the KV crossing a FIFO link at its bandwidth (a transfer queued behind
another waits for it), and a bad link refused with did-you-mean.  Transfer times come from the server's
deadlines (modelled time), not from a wall clock."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.targets.reference.launch import parse_reference_url
from tests.reference.refclient import stream_openai, words

KV = 131072                     # Llama-3.1-8B fp16: bytes per token (catalog)


def families(http, url: str) -> dict:
    r = http.get(url)
    assert r.status_code == 200
    return {s.name: s.value for fam in text_string_to_metric_families(r.text) for s in fam.samples}


def test_each_pool_serves_its_own_metrics_and_the_proxy_none(serve, http):
    h = serve("pd_link=nvlink-4&time_scale=0&max_model_len=4096", mode="thread")
    s = stream_openai(http, h.url, {"prompt": words(100), "max_tokens": 5, "ignore_eos": True})
    assert s.done and s.tokens == 5
    assert http.get(h.url + "/metrics").status_code == 404
    pre, dec = families(http, h.url + "/prefill/metrics"), families(http, h.url + "/decode/metrics")
    assert pre["vllm:request_success_total"] == 1 and dec["vllm:request_success_total"] == 1
    assert pre["vllm:generation_tokens_total"] == 1          # the prefill pool's one token, not streamed
    assert dec["vllm:generation_tokens_total"] == 5
    assert dec["vllm:nixl_xfer_time_seconds_count"] == 1
    assert dec["vllm:nixl_bytes_transferred_sum"] == 100 * KV
    assert "vllm:nixl_xfer_time_seconds_count" not in pre    # vLLM observes transfers where it reads the KV


def test_the_link_is_fifo_at_its_bandwidth(serve, http):
    # 2000 tokens = 262.1 MB over 0.5 GB/s: 524 ms alone; two requests at once: the second waits for the first
    h = serve("pd_link=0.5&max_model_len=8192", mode="thread")
    alone = 2000 * KV / 0.5e9
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda _: stream_openai(http, h.url, {"prompt": words(2000), "max_tokens": 2,
                                                                    "ignore_eos": True}), range(2)))
    assert all(s.done for s in done)
    dec = families(http, h.url + "/decode/metrics")
    assert dec["vllm:nixl_xfer_time_seconds_count"] == 2
    total = dec["vllm:nixl_xfer_time_seconds_sum"]
    # alone + (wait + alone): 3 x alone less the gap between the two prefills' ends (one ~67 ms prefill step
    # when both arrive together); side by side (not FIFO) it would be 2 x alone
    assert 2.5 * alone <= total <= 3 * alone + 1e-6
    assert dec["vllm:nixl_bytes_transferred_sum"] == 2 * 2000 * KV


@pytest.mark.parametrize("link, said", [("ib-ndx", "did you mean ib-ndr"), ("-2", "positive number of GB/s"),
                                        ("0", "positive number of GB/s")])
def test_a_bad_link_is_refused(link, said):
    with pytest.raises(ConfigError, match=f"pd_link.*{said}"):
        parse_reference_url(f"reference://h100-sxm/llama-3.1-8b?pd_link={link}")


def test_the_link_resolves_from_the_catalog_or_gb_s():
    assert parse_reference_url("reference://h100-sxm/llama-3.1-8b?pd_link=ib-ndr").link().gb_s == 50
    assert parse_reference_url("reference://h100-sxm/llama-3.1-8b?pd_link=25").link().gb_s == 25
    assert parse_reference_url("reference://h100-sxm/llama-3.1-8b").link() is None


def test_a_slow_links_transfers_stay_inside_the_buckets():
    # a slow pd_link (1 GB/s, 12 000 tokens = 1.57 GB: 1.6 s alone, more queued) passes vLLM's last bucket, 5 s:
    # the reference's extend to 80 s, so its percentiles are interpolated, never only "> 5000 ms"
    from pytest_llm_latency.client.server.server_view import parse_sample
    from pytest_llm_latency.core.measure.kv_transfer import transfer_stats
    from pytest_llm_latency.core.measure.server_model import Sample
    from pytest_llm_latency.targets.reference.metrics import EngineMetrics

    def zero() -> float:
        return 0.0
    m = EngineMetrics("m", running=zero, waiting=zero, kv_usage=zero, prefix_queries=zero, prefix_hits=zero,
                      kv_connector=True)
    for k in range(20):
        m.transferred(6.0 + 3.0 * k, 12000 * KV)   # queued on the link: 6 .. 63 s
    st = transfer_stats({"decode": (Sample(), parse_sample(m.render().decode()))})
    assert st.transfers == 20 and st.lower_bounds == ()
    assert 40_000 < st.ms["p95"] <= 80_000 and "interpolated in the 40000-80000 ms bucket" in st.buckets["p95"]
