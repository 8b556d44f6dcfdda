"""The real-server tier through a real nginx: llama.cpp's llama-server behind nginx's
defaults and behind the README's recommended block (tests/proxy does the same with the
reference target and every setup).

The ground truth is llama-server's own per-request timings, which travel through the proxy
in the stream: a proxy that delayed or bunched tokens would part the client's TPOT from the
server's.  Figures are printed (run with -s).
"""
import statistics

import pytest

from tests.helpers.nginxproxy import Nginx, NginxError, Site, find_nginx, readme_recommended
from pytest_llm_latency.core.measure import metrics

pytestmark = pytest.mark.integration
WORKLOAD = {"class": "custom", "prompt_tokens": 64, "output_tokens": 16, "samples": 5, "warmup": 1}


@pytest.fixture(scope="module")
def llama_proxy(llama_membound):
    binary = find_nginx()
    if binary is None:
        pytest.skip("nginx is not installed (.ci/run installs Debian's nginx-light)")
    upstream = llama_membound.url.split("://", 1)[1].rstrip("/")
    nginx = Nginx(binary, [Site("default", upstream), Site("sse", upstream, tuple(readme_recommended()))])
    try:
        nginx.start()
    except NginxError as exc:
        nginx.remove()
        pytest.fail(f"nginx is installed but did not start: {exc}", pytrace=False)
    yield nginx
    nginx.stop()
    nginx.remove()


@pytest.mark.parametrize("setup", ["default", "sse"])
def test_llama_server_through_nginx_agrees_with_its_own_timings(llm_latency, llama_proxy, setup):
    res = llm_latency.measure(url=llama_proxy.url(setup), **WORKLOAD)
    assert res.verdict == "pass" and len(res.records) == WORKLOAD["samples"], res.failure_message()
    tpot_client = statistics.median(metrics.tpot_ms(r) for r in res.records)
    tpot_server = statistics.median(r.server_timings["predicted_per_token_ms"] for r in res.records)
    gap = statistics.median(metrics.ttft_ms(r) - r.server_timings["prefill_ms"] for r in res.records)
    bunched = sum(metrics.burst_chunks(r) for r in res.records)
    print(f"nginx {setup} -> llama-server: TPOT client {tpot_client:.2f} ms / server {tpot_server:.2f} ms, "
          f"TTFT - server prompt_ms {gap:.1f} ms, bunched chunks {bunched}, notes {res.notes}")
    assert abs(tpot_client / tpot_server - 1) <= 0.10  # the same bound as direct (test_integration_plugin)
    assert 0 <= gap <= 20  # direct: <= 15 ms; one loopback proxy hop more
    assert not any("bunching" in n for n in res.notes), res.notes
    # llama-server answers nginx's HTTP/1.0 upstream requests with chunked encoding (and sends
    # X-Accel-Buffering: no), so nginx's default buffering passes each token on
    streams = llama_proxy.access_lines(setup, "POST /v1/completions")
    assert streams and all("upstream_te=chunked" in ln for ln in streams), streams[:3]
