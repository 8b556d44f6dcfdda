"""Issue 36 end to end on the reference target: the ``openai-responses`` and ``anthropic-messages``
adapters through the plugin's own pipeline (prompt preparation, warm-up, samples, judging).

* a plain workload: prompts exact by the API's own counter (``input_tokens`` / ``count_tokens``),
  lengths forced, one token per delta, the same TTFT/TPOT/ITL records as chat;
* agent sessions with tools: the transcript goes back in each API's shape, and a budget on the
  time to a complete tool call fails while the turn TTFT budget passes.
"""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.drivers.agent_session import measure_sessions
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.measure import metrics
from pytest_llm_latency.core.spec.workload import make_workload

APIS = ["openai-responses", "anthropic-messages"]
COUNTERS = {"openai-responses": "/v1/responses/input_tokens", "anthropic-messages": "/v1/messages/count_tokens"}


@pytest.mark.parametrize("api", APIS)
def test_plain_workload_is_exact_forced_and_measured(serve, api):
    # ignore_eos: Messages has no field for it, so the server forces the lengths (llama-server --ignore-eos)
    h = serve("time_scale=0&max_model_len=4096&ignore_eos=1", mode="thread")
    w = make_workload("w", {"prompt_tokens": 300, "system_prompt_tokens": 40, "output_tokens": 24, "samples": 4,
                            "warmup": 1, "confidence": None, "slo": {"ttft_max": "60s", "tpot_max": "10s"}})
    with make_http_client() as http:
        res = judge(measure(make_client(Target(h.url, api), http), w, seed=3))
    assert res.verdict == "pass", res.failure_message()
    assert COUNTERS[api] in res.measurement.prompt_counter
    assert len(res.records) == 4
    for rec in res.records:
        assert rec.prompt_tokens == 300 == rec.expected_prompt_tokens          # exact, as the server counts
        assert rec.completion_tokens == 24 == len(rec.chunks) and rec.token_counts_exact
        assert metrics.ttft_ms(rec) is not None and len(metrics.itl_ms(rec)) == 23
        assert rec.server_timings.get("cached_tokens", 0) < 40               # salted: no cross-request prefix


SESSION = {"steps": 3, "prompt_tokens": 1024, "output_tokens": 16, "tool_result_tokens": 32, "tool_time": 0,
           "samples": 2, "warmup": 0}


@pytest.mark.parametrize("api", APIS)
def test_tool_call_budget_fails_while_turn_ttft_passes(serve, api):
    """16 forced tokens make the call: the name with the first token, the arguments complete at the
    last, 15 modelled decode steps (~7 ms each at time_scale 1) after a TTFT of one prefill (~40 ms
    for 1024 tokens): ~145 ms > the 60 ms budget, however loaded the machine."""
    h = serve("time_scale=1&ignore_eos=1", mode="thread")
    slo = {"turn_ttft_p95": None, "turn_ttft_p50": "20s", "session_e2e_p95": None, "prefix_reuse_min": None,
           "tool_call_complete_p50": "60ms"}
    w = make_workload("session", {**SESSION, "slo": slo})
    with make_http_client() as http:
        res = judge(measure_sessions(make_client(Target(h.url, api), http), w, seed=0, nonce="n36"))
    assert res.prepared and len(res.records) == 6, res.failure_message()
    assert res.verdict == "fail"
    message = res.failure_message()
    assert "tool call complete p50" in message and "60" in message and "TTFT" not in message, message
    assert res.agent.tool_call_complete_ms_p50 > 60 > 0 < res.agent.turn_ttft_ms_p50 < 20_000
    for rec in res.records:  # each turn answered with one complete call, whatever the API's shape
        from pytest_llm_latency.core.measure.tool_calls import assemble

        calls = assemble(rec.tool_deltas)
        assert calls.t_complete_ns == rec.t_last_token_ns and len(calls.ordered()) == 1


def test_server_wide_ignore_eos_forces_lengths_the_messages_api_cannot_ask_for(serve):
    """Messages sends no ignore-EOS field: without the server's switch most answers stop at their
    natural EOS; with ``ignore_eos`` (llama-server ``--ignore-eos``) every one runs to ``max_tokens``."""
    lengths = {}
    for flag in ("0", "1"):
        h = serve(f"time_scale=0&ignore_eos={flag}", mode="thread")
        with make_http_client() as http:
            client = make_client(Target(h.url, "anthropic-messages"), http)
            lengths[flag] = [client.stream("", f"question {i} about ferries", 200).completion_tokens for i in range(8)]
    assert lengths["1"] == [200] * 8
    assert min(lengths["0"]) < 200 and all(0 < n <= 200 for n in lengths["0"])
