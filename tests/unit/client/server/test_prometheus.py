"""/metrics scraping with prometheus_client's parser: counters, histograms, gauges, deltas."""
import httpx
import pytest

from pytest_llm_latency.client.server.prometheus import delta, parse_metrics, scrape
from pytest_llm_latency.core.errors import MeasurementError


def text(prompt_total, hist_count, waiting):
    return f"""# HELP vllm:prompt_tokens_total Prompt tokens.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{model_name="m"}} {prompt_total}
# HELP vllm:time_to_first_token_seconds TTFT.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} {hist_count}
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {hist_count}
vllm:time_to_first_token_seconds_count{{model_name="m"}} {hist_count}
vllm:time_to_first_token_seconds_sum{{model_name="m"}} {hist_count * 0.05}
# HELP vllm:num_requests_waiting Waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="m"}} {waiting}
"""


def test_delta_of_counters_and_histograms_and_final_gauges():
    d = delta(parse_metrics(text(100, 2, 5)), parse_metrics(text(612, 22, 0)))
    assert d["vllm:prompt_tokens_total"] == 512
    assert d["vllm:time_to_first_token_seconds_count"] == 20
    assert d["vllm:time_to_first_token_seconds_sum"] == pytest.approx(1.0)
    assert d["vllm:num_requests_waiting"] == 0
    assert not any(k.endswith("_bucket") for k in d)


def test_counter_reset_gives_no_delta():
    assert "vllm:prompt_tokens_total" not in delta(parse_metrics(text(100, 2, 0)), parse_metrics(text(5, 3, 0)))


def test_scrape_absent_metrics_is_none_and_garbage_is_an_error():
    http = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(404)))
    assert scrape(http, "http://x") is None
    with pytest.raises(MeasurementError):
        parse_metrics("this is { not prometheus\n")
