"""A server that fails while prompts are prepared is judged as it would be on a sample."""
import httpx
import pytest

from fakeserver import Script, VirtualTime, make_transport
from pytest_llm_latency.client.http import make_http_client
from pytest_llm_latency.client.openai import OpenAIClient
from pytest_llm_latency.client.runner import measure
from pytest_llm_latency.core.workload import make_workload


def _client(fail_after_tokenize_calls: int, status: int | None = None, exc: Exception | None = None):
    script, vt = Script(ttft_ms=50, tpot_ms=5), VirtualTime()
    inner, calls = make_transport(script, vt), []

    def handler(request):
        if request.url.path == "/tokenize":
            calls.append(1)
            if len(calls) > fail_after_tokenize_calls:
                if exc is not None:
                    raise exc
                return httpx.Response(status, text="overloaded")
        return inner.handle_request(request)

    return OpenAIClient(make_http_client(transport=httpx.MockTransport(handler)), "http://fake", "fake-model",
                        clock=vt, sleep=lambda s: None)


WORKLOAD = make_workload("w", {"class": "custom", "prompt_tokens": 64, "output_tokens": 4, "samples": 20,
                               "warmup": 0, "slo": {"ttft_p95": "1s"}})


@pytest.mark.parametrize("status, exc, kind", [
    (503, None, "http_503"),
    (None, httpx.ReadTimeout("stalled"), "idle_timeout"),
    (None, httpx.RemoteProtocolError("peer closed"), "protocol"),
])
def test_tokenize_failing_after_detection_is_a_server_fault(status, exc, kind):
    """The endpoint answered the two detection calls, then failed: the server failed (verdict
    fail, named by kind), as a 5xx or stall on the probe or a sample would be -- not 'error'."""
    res = measure(_client(2, status, exc), WORKLOAD, nonce="n")
    assert res.failures and res.failures[0].kind == kind, res.failures
    assert res.verdict == "fail", (res.verdict, res.errors, res.failed_checks)


def test_tokenize_rejecting_the_request_stays_unjudgeable():
    res = measure(_client(2, 400), WORKLOAD, nonce="n")
    assert res.failures[0].kind == "http_400" and res.verdict == "error"
