"""The llama.cpp case of the server model (core.measure.server_model), live: a run of the load engine
against the real ``llama-server --metrics`` maps its ``llamacpp:*`` names onto the same
``server_*`` figures as vLLM's, and the timeline uses llama.cpp's own gauge names."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.spec.workload import make_workload

pytestmark = pytest.mark.integration


def test_llamacpp_metrics_map_onto_the_server_model(llama_tiny):
    client = make_client(Target(llama_tiny.url, "openai-completions"), make_http_client())
    # concurrency 2 on a one-slot server: one request waits (llama.cpp's requests_deferred); 1000
    # tokens a request (~0.2 s on the tiny model) so that the 0.5 s scrapes see the run
    w = make_workload("w", {"prompt_tokens": 32, "output_tokens": 1000, "concurrency": 2, "samples": 6,
                            "warmup": 1, "shared_prefix_tokens": 16, "slo": {"ttft_p50": "10s"}})
    res = judge(measure(client, w))
    x = {**res.server.to_json(), "metrics_timeline": res.server.metrics_timeline}
    assert x["server_scrapes"] >= 2
    assert x["server_running_max"] >= 1 and "server_waiting_max" in x
    # llama.cpp counts prompt tokens without the cached ones: hit rate = cached / (prompt + cached)
    assert 0 <= x["server_prefix_hit_rate"] <= 1 and x["server_prefix_queries"] > 0
    tl = x["metrics_timeline"]
    assert set(tl) >= {"llamacpp:requests_processing", "llamacpp:requests_deferred"}
