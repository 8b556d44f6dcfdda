"""Issue 36 on the pinned real ``llama-server``: ``/v1/responses`` and ``/v1/messages`` through the
plugin's ``openai-responses`` and ``anthropic-messages`` adapters.

* plain: prompts exact by the API's own counter (``/v1/responses/input_tokens``,
  ``/v1/messages/count_tokens``), lengths forced (Messages has no ignore-EOS field and llama.cpp drops
  the one we could send: the server runs with ``--ignore-eos``), and the plugin's TPOT within 5 % of
  the server's own figures: the ``/metrics`` counters around each request on both APIs (Messages
  carries no timings) and ``timings.predicted_per_token_ms`` on Responses;
* a thinking-style template (``templates/think_tools.jinja``, Qwen3-style: the generation prompt
  opens ``<think>``): llama.cpp streams ``response.reasoning_text.delta`` / ``thinking_delta``,
  which the plugin counts as reasoning (TTFT yes, TTFO none: the random-weight model never closes
  ``</think>``);
* tools: an agent session sends its tools in each API's shape; the template renders them (the
  tools add prompt tokens, counted by the API's own counter); the model emits no parsable call
  (a note says so), as on chat (``test_agent_llama.py``);
* a JSON schema: Responses honours llama.cpp's ``response_format`` (the answer validates),
  Messages drops every schema field in this build (the answer is free text).
"""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llm_latency.client.drivers.agent_session import measure_sessions
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.measure import metrics
from pytest_llm_latency.core.measure.reasoning import split
from pytest_llm_latency.core.spec.workload import make_workload

pytestmark = pytest.mark.integration

APIS = ["openai-responses", "anthropic-messages"]
COUNTERS = {"openai-responses": "/v1/responses/input_tokens", "anthropic-messages": "/v1/messages/count_tokens"}
THINK = Path(__file__).resolve().parent / "templates" / "think_tools.jinja"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["name", "age"], "additionalProperties": False}


def server(pool, command, binary, model, *extra):
    return pool.get(command(binary, model, *extra), ready_path="/health", startup_timeout_s=120.0)


def predicted(http: httpx.Client, url: str) -> tuple[float, float]:
    fams = {f.name: f for f in text_string_to_metric_families(http.get(url + "/metrics").text)}
    tokens, seconds = fams["llamacpp:tokens_predicted"], fams["llamacpp:tokens_predicted_seconds"]
    return tokens.samples[0].value, seconds.samples[0].value


def settled(http: httpx.Client, url: str, tokens: float = 0) -> tuple[float, float]:
    """The counters once they count ``tokens`` and stopped moving: a slot's figures land as it is
    released, a little after its stream ended (bounded wait)."""
    deadline = time.monotonic() + 5.0
    last = predicted(http, url)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = predicted(http, url)
        if now == last and now[0] >= tokens:
            return now
        last = now
    return last


@pytest.mark.parametrize("api", APIS)
def test_exact_prompts_and_forced_lengths(api, llama_pool, llama_server_command, llama_server_binary, gguf_models):
    t = server(llama_pool, llama_server_command, llama_server_binary, gguf_models["tiny"], "--ignore-eos")
    w = make_workload("w", {"prompt_tokens": 1024, "system_prompt_tokens": 300, "output_tokens": 48, "samples": 3,
                            "warmup": 1, "confidence": None, "slo": {"ttft_max": "60s", "tpot_max": "10s"}})
    with make_http_client() as http:
        res = judge(measure(make_client(Target(t.url, api), http), w, seed=36))
    assert res.verdict == "pass", res.failure_message()
    assert res.measurement.prompt_counter.startswith(COUNTERS[api])
    for rec in res.records:
        assert rec.prompt_tokens == 1024 == rec.expected_prompt_tokens       # as the server counts, template included
        assert rec.completion_tokens == 48 == len(rec.chunks) and rec.token_counts_exact
        assert ("predicted_per_token_ms" in rec.server_timings) == (api == "openai-responses")  # none on Messages


@pytest.mark.parametrize("api", APIS)
def test_tpot_within_5_percent_of_the_servers_own(api, llama_pool, llama_server_command, llama_server_binary,
                                                  gguf_models):
    """On the memory-bound model (a token takes milliseconds, so a late read is a small share of
    the span), median over 5 requests: the server's decode time per token from its ``/metrics``
    counters around each request (both APIs), and its ``timings`` (Responses)."""
    t = server(llama_pool, llama_server_command, llama_server_binary, gguf_models["membound"], "--ignore-eos")
    by_metrics, by_timings = [], []
    with make_http_client() as http:
        client = make_client(Target(t.url, api), http)
        client.stream("", "[36 warm-up] hello", 4)
        for i in range(5):
            before = settled(http, t.url)
            rec = client.stream("", f"[36 tpot {api} {i}] tell me more about it", 48)
            after = settled(http, t.url, before[0] + 48)
            assert after[0] - before[0] == 48 == rec.completion_tokens == len(rec.chunks)
            # llama.cpp divides its generation time by N, the plugin the first-to-last span by N - 1
            server_ms = (after[1] - before[1]) / 47 * 1e3
            by_metrics.append(metrics.tpot_ms(rec) / server_ms)
            if api == "openai-responses":
                by_timings.append(metrics.tpot_ms(rec) / rec.server_timings["predicted_per_token_ms"])
    print(f"{api}: plugin TPOT / server's, by /metrics {sorted(by_metrics)}, by timings {sorted(by_timings)}")
    assert statistics.median(by_metrics) == pytest.approx(1, abs=0.05)
    if api == "openai-responses":
        assert statistics.median(by_timings) == pytest.approx(1, abs=0.05)


@pytest.mark.parametrize("api, ask", [("openai-responses", {"reasoning": {"effort": "medium"}}),
                                      ("anthropic-messages", {"thinking": {"type": "enabled", "budget_tokens": 1024}})])
def test_thinking_template_streams_reasoning(api, ask, llama_pool, llama_server_command, llama_server_binary,
                                             gguf_models):
    t = server(llama_pool, llama_server_command, llama_server_binary, gguf_models["tiny"], "--jinja",
               "--chat-template-file", str(THINK), "--ignore-eos")
    w = make_workload("think", {"prompt_tokens": 1024, "output_tokens": 24, "samples": 3, "warmup": 0,
                                "confidence": None, "slo": {"ttft_max": "60s"}})
    with make_http_client() as http:
        res = judge(measure(make_client(Target(t.url, api), http), w, seed=36, extra=ask))
    assert res.verdict == "pass" and res.n == 3, res.failure_message()
    for rec in res.records:
        assert rec.prompt_tokens == 1024 and rec.completion_tokens == 24
        assert all(c.reasoning for c in rec.chunks)                   # <think> was opened by the template
        # one character per token on this model: every reasoning token arrived, though llama.cpp's parser
        # holds a '<' back (it may start </think>) and sends it with the next one
        assert sum(len(c.text or "") for c in rec.chunks) == 24 and sum(c.tokens for c in rec.chunks) == 24
        assert metrics.ttft_ms(rec) is not None and metrics.ttfo_ms(rec) is None
        s = split(rec)
        assert s is not None and (s.reasoning_tokens, s.answer_tokens) == (24, 0)
    assert res.measurement.reasoning_tokens == 72 and res.measurement.answer_tokens == 0


@pytest.mark.parametrize("api", APIS)
def test_tools_go_in_each_apis_shape_and_are_rendered(api, llama_pool, llama_server_command, llama_server_binary,
                                                      gguf_models):
    t = server(llama_pool, llama_server_command, llama_server_binary, gguf_models["tiny"], "--jinja",
               "--chat-template-file", str(THINK))
    w = make_workload("tools", {"steps": 2, "prompt_tokens": 2048, "output_tokens": 8, "tool_result_tokens": 24,
                                "tools": 2, "tool_time": "10ms", "samples": 2, "warmup": 1,
                                "slo": {"prefix_reuse_min": None, "turn_ttft_p95": None, "session_e2e_p95": None,
                                        "turn_ttft_max": "60s"}})
    with make_http_client() as http:
        res = judge(measure_sessions(make_client(Target(t.url, api), http), w, seed=0))
    assert res.prepared and res.verdict == "pass", res.failure_message()
    assert res.agent.tools_overhead_tokens > 100                         # the template rendered the tools
    assert len(res.records) == 4 and all(r.prompt_tokens == 2048 for r in res.records[::2])  # turn 1, exact
    assert all(r.prompt_tokens > 2048 for r in res.records[1::2])       # turn 2 re-sends the transcript
    assert any("produced no tool call" in n for n in res.shown_notes)


def test_json_schema_honoured_on_responses_dropped_on_messages(llama_pool, llama_server_command, llama_server_binary,
                                                               gguf_models):
    jsonschema = pytest.importorskip("jsonschema")
    t = server(llama_pool, llama_server_command, llama_server_binary, gguf_models["tiny"])
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
    with make_http_client() as http:
        responses = make_client(Target(t.url, "openai-responses"), http)
        rec = responses.stream("", "[36 schema] a person, as JSON", 64,
                               extra={"response_format": fmt, "ignore_eos": False, "min_tokens": 0})
        answer = "".join(c.text or "" for c in rec.chunks)
        jsonschema.validate(json.loads(answer), SCHEMA)                # the grammar held it to the schema
        assert rec.completion_tokens is not None and rec.completion_tokens >= len(rec.chunks)
        assert metrics.ttft_ms(rec) == pytest.approx((rec.chunks[0].t_ns - rec.t_send_ns) / 1e6)
        messages = make_client(Target(t.url, "anthropic-messages"), http)
        rec = messages.stream("", "[36 schema] a person, as JSON", 24,
                              extra={"output_format": {"type": "json_schema", "schema": SCHEMA}})
        text = "".join(c.text or "" for c in rec.chunks)
        with pytest.raises((ValueError, jsonschema.ValidationError)):   # free text: the field was dropped
            jsonschema.validate(json.loads(text), SCHEMA)


@pytest.mark.parametrize("api", APIS)
def test_structured_workload_validates_every_answer(api, llama_pool, llama_server_command, llama_server_binary,
                                                    gguf_models):
    """The plugin's ``structured:`` workload: Responses answers are valid (llama.cpp's grammar from
    ``response_format``), Messages answers are free text (the field is dropped): every one a
    ``schema_violation``, and the run an error that says the server may drop the schema."""
    import dataclasses

    t = server(llama_pool, llama_server_command, llama_server_binary, gguf_models["tiny"])
    w = make_workload("s", {"prompt_tokens": 1024, "output_tokens": 64, "samples": 3, "warmup": 0,
                            "confidence": None, "structured": {"json_schema": "person.json"},
                            "slo": {"ttft_max": "60s"}})
    w = dataclasses.replace(w, structured=dataclasses.replace(w.structured, schema=SCHEMA))
    with make_http_client() as http:
        res = judge(measure(make_client(Target(t.url, api), http), w, seed=36))
    if api == "openai-responses":
        assert res.verdict == "pass" and res.n == 3, res.failure_message()
        assert all(r.completion_tokens and r.completion_tokens <= 64 for r in res.records)
    else:
        assert res.verdict == "error" and res.n == 0
        assert {f.kind for f in res.failures} == {"schema_violation"}, res.failures
        assert "schema_violation" in res.failure_message()
