"""Issue 15 on a real llama-server: a 4-turn agent session with a real ``tools`` array, started
with ``--jinja``, and the prefix reuse the plugin reports against llama.cpp's own ``timings.cache_n``.

What the generated test models accept: they carry no chat template, so llama-server (with
``--jinja``) falls back to ChatML, which accepts a ``tools`` array but renders nothing of it
(the same prompt_tokens with and without tools) and renders an assistant ``tool_calls`` turn
as empty.  ``test_the_generated_models_fallback_template_ignores_tools`` pins that down.  The
session test therefore gives the server a Hermes/Qwen2.5-style tool template
(``templates/hermes_tools.jinja``, ``--chat-template-file``): llama.cpp then renders the tools
array into the system turn and tool results as ``<tool_response>``.  The random-weight model
never emits a parsable ``<tool_call>``, so its turns come back as text; the session sends that
text back as the assistant turn and the tool result as a user turn (a note says so).  Tool-call
streaming times are covered against the reference target (``tests/reference/test_ref_agent.py``).
"""
from pathlib import Path

import pytest

from pytest_llm_latency.client.drivers.agent_session import measure_sessions, tools_overhead
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client
from pytest_llm_latency.core.spec.agent_spec import tool_schemas
from pytest_llm_latency.core.spec.workload import make_workload

pytestmark = pytest.mark.integration

TEMPLATE = Path(__file__).resolve().parent / "templates" / "hermes_tools.jinja"
STEPS = 4


def server(pool, command, binary, model, *extra):
    return pool.get(command(binary, model, "--jinja", *extra), ready_path="/health", startup_timeout_s=120.0)


def test_the_generated_models_fallback_template_ignores_tools(llama_pool, llama_server_command, llama_server_binary,
                                                              gguf_models):
    t = server(llama_pool, llama_server_command, llama_server_binary, gguf_models["tiny"])
    with make_http_client() as http:
        c = make_client(Target(t.url, "openai-chat"), http)
        assert tools_overhead(c, tool_schemas(0, 4), 0, "fallback") == 0  # ChatML: tools accepted, not rendered


def test_four_turn_session_with_tools_reports_llamacpp_cache_n(llama_pool, llama_server_command,
                                                               llama_server_binary, gguf_models):
    t = server(llama_pool, llama_server_command, llama_server_binary, gguf_models["tiny"],
               "--chat-template-file", str(TEMPLATE))
    w = make_workload("tools", {"steps": STEPS, "prompt_tokens": 2048, "output_tokens": 8, "tool_result_tokens": 24,
                                "tools": 2, "tool_time": "10ms", "samples": 2, "warmup": 1,
                                "slo": {"prefix_reuse_min": 0.8, "turn_ttft_p95": None, "session_e2e_p95": None,
                                        "turn_ttft_max": "30s"}})
    with make_http_client() as http:
        c = make_client(Target(t.url, "openai-chat"), http)
        res = judge(measure_sessions(c, w, seed=0))
    assert res.prepared, res.failure_message()
    print(f"verdict {res.verdict}; tools add {res.agent.tools_overhead_tokens} tokens; per turn: " +
          "; ".join(f"t{k} {res.agent.turn(k).get('prompt_tokens_p50')} prompt, "
                    f"{res.agent.turn(k).get('cached_tokens_p50')} cached, "
                    f"TTFT {res.agent.turn(k).get('ttft_ms_p50')} ms" for k in range(1, STEPS + 1)))
    assert res.verdict == "pass", res.failure_message()
    assert res.agent.tools_overhead_tokens > 100  # the template rendered the tools array
    assert len(res.records) == 2 * STEPS
    assert all(r.prompt_tokens == 2048 for r in res.records[::STEPS])  # turn 1, as the server counts it
    # the plugin's per-turn cached tokens are llama.cpp's own timings.cache_n, turn by turn
    for r in res.records:
        assert r.server_timings["cached_tokens"] == r.server_timings["cache_n"]
        assert r.server_timings["prompt_n"] == r.prompt_tokens - r.server_timings["cache_n"]
    later = [r for i, r in enumerate(res.records) if i % STEPS]
    reuse = sum(r.server_timings["cache_n"] for r in later) / sum(r.prompt_tokens for r in later)
    assert res.agent.prefix_reuse == pytest.approx(reuse, abs=1e-4)
    assert reuse >= 0.8
    # turn 1 shares only the template's header with the previous session (the salt follows it)
    assert res.agent.turn1_cached_tokens_max < 40
    assert any("produced no tool call" in n for n in res.shown_notes)
