"""A server that fails while prompts are prepared is judged as it would be on a sample."""
import httpx
import pytest

from tests.helpers.fakeserver import Script, VirtualTime, make_transport
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.client.runner import measure
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.spec.workload import make_workload


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
    res = judge(measure(_client(2, status, exc), WORKLOAD, nonce="n"))
    assert res.failures and res.failures[0].kind == kind, res.failures
    assert res.verdict == "fail", (res.verdict, res.errors, res.failed_checks)


def test_tokenize_rejecting_the_request_stays_unjudgeable():
    res = judge(measure(_client(2, 400), WORKLOAD, nonce="n"))
    assert res.failures[0].kind == "http_400" and res.verdict == "error"


def test_rejudging_a_failed_preparation_applies_no_budgets():
    """check() and a dead managed server judge the result again: a preparation failure has no
    samples, so budgets must not turn it into '1 samples cannot support a p95'."""
    from pytest_llm_latency.core.checks import judge, preparation_failed, with_workload
    from pytest_llm_latency.core.result.result import Failure

    res = preparation_failed(WORKLOAD, Failure("idle_timeout", "stall: no bytes for 60s"))
    assert res.verdict == "fail"
    again = judge(with_workload(res, WORKLOAD))
    assert again.verdict == "fail" and not again.errors and "cannot support" not in again.failure_message()
    refused = preparation_failed(WORKLOAD, Failure("connect", "cannot connect"))
    assert refused.verdict == "error"
    refused.facts.server_failed = True  # the managed server was up, then died
    died = judge(refused)
    assert died.verdict == "fail" and "cannot support" not in died.failure_message()


def test_an_empty_result_names_the_server_failure():
    from pytest_llm_latency.core.errors import EmptySampleError
    from pytest_llm_latency.core.checks import preparation_failed
    from pytest_llm_latency.core.result.result import Failure

    res = preparation_failed(WORKLOAD, Failure("http_503", "HTTP 503 from http://fake/tokenize"))
    with pytest.raises(EmptySampleError, match="HTTP 503"):
        _ = res.ttft
