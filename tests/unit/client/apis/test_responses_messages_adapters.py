"""The ``openai-responses`` and ``anthropic-messages`` adapters.

Real llama-server streams (``tests/unit/recordings``, one line per real ``recv()`` with its stamp;
README section "OpenAI Responses and Anthropic Messages on llama-server") replayed through each
adapter (an ``httpx.MockTransport``, each read stamped at its recorded time by the injected
clock): TTFT, per-token ITL and usage must be what the recording's own stamps and usage say.
Events the tiny model cannot produce (reasoning, tool calls, errors after the first token) are
built in the shapes of the vendored source and of each API's documentation."""
from __future__ import annotations

import json

import httpx
import pytest

from pytest_llm_latency.client.apis.messages import MessagesClient, anthropic_messages, anthropic_tools
from pytest_llm_latency.client.apis.responses import ResponsesClient, responses_input, responses_tools
from pytest_llm_latency.client.apis.target import Target, make_client
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.core.errors import ConfigError, MeasurementError
from pytest_llm_latency.core.measure import metrics as m
from pytest_llm_latency.core.measure.tool_calls import assemble
from tests.helpers.paths import RECORDINGS

MS = 1_000_000


def recorded(name: str) -> tuple[dict, list[tuple[int, bytes]]]:
    """(header, [(t_ns, the read's de-chunked body bytes)]) of a recording, empty reads left out."""
    lines = (RECORDINGS / name).read_text().splitlines()
    reads = [(x["t_ns"], x["data"].encode()) for x in map(json.loads, lines[1:]) if x["data"]]
    return json.loads(lines[0]), reads


def client_for(cls, reads: list[tuple[int, bytes]], *, status: int = 200, ctype: str = "text/event-stream",
               seen: list | None = None, api_key: str | None = None):
    """``cls`` over a MockTransport that answers ``reads``; the clock says 0 at the send, then each
    read's stamp (the first byte is stamped with the first read)."""
    stamps = iter([0] + [t for t, _ in reads] + [reads[-1][0] if reads else 0] * 4)

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        return httpx.Response(status, headers={"content-type": ctype}, content=iter([b for _, b in reads]))

    api = "responses" if cls is ResponsesClient else "messages"
    return cls(make_http_client(transport=httpx.MockTransport(handler), api_key=api_key), "http://rec", "m", api,
               clock=lambda: next(stamps))


def events(*objs: dict) -> bytes:
    return b"".join(f"event: {o.get('type', 'x')}\ndata: {json.dumps(o)}\n\n".encode() for o in objs)


def first_read_with(reads, needle: bytes) -> int:
    return next(t for t, b in reads if needle in b)


# ---------------------------------------------------------------- the real recordings
def test_responses_recording_ttft_itl_and_usage_are_the_recordings_own():
    head, reads = recorded("llamacpp-responses-stream.jsonl")
    rec = client_for(ResponsesClient, reads).stream("", "recorded", 64)
    deltas = [t for t, b in reads for _ in range(b.count(b"response.output_text.delta\n"))]
    assert len(deltas) == 64 == len(rec.chunks)
    assert m.ttft_ms(rec) == pytest.approx(deltas[0] / MS)          # the first text delta's read
    assert m.ttfo_ms(rec) == m.ttft_ms(rec)                          # no reasoning
    assert m.itl_ms(rec) == pytest.approx([(b - a) / MS for a, b in zip(deltas, deltas[1:])])
    assert m.tpot_ms(rec) == pytest.approx((deltas[-1] - deltas[0]) / 63 / MS)
    assert (rec.prompt_tokens, rec.completion_tokens) == (143, 64)   # response.completed's usage
    assert rec.server_timings["cached_tokens"] == 2 and rec.server_timings["predicted_n"] == 64
    assert rec.token_counts_exact and rec.finish_reason == "length"  # status "completed", but 64 of 64


def test_messages_recording_prompt_is_input_plus_cache_reads():
    head, reads = recorded("llamacpp-messages-stream.jsonl")
    rec = client_for(MessagesClient, reads).stream("", "recorded", 64)
    deltas = [t for t, b in reads for _ in range(b.count(b'"text_delta"'))]
    assert len(deltas) == 64 == len(rec.chunks)
    assert m.ttft_ms(rec) == pytest.approx(deltas[0] / MS)
    assert m.itl_ms(rec) == pytest.approx([(b - a) / MS for a, b in zip(deltas, deltas[1:])])
    count_tokens = json.loads((RECORDINGS / "count-tokens-messages-llamacpp.json").read_text())
    # message_start: input_tokens 118 + cache_read_input_tokens 19 = count_tokens' 137
    assert rec.prompt_tokens == 137 == count_tokens["response"]["input_tokens"]
    assert rec.server_timings["cached_tokens"] == 19 and rec.completion_tokens == 64
    assert rec.finish_reason == "length"                             # stop_reason max_tokens
    assert "predicted_n" not in rec.server_timings                  # no timings on this API


def test_responses_json_schema_recording_ttft_waits_for_the_first_text():
    """``response.created`` came alone at ~12 ms with the first generated token; the first text
    delta 11 ms later: TTFT is the text's.  44 deltas for 58 tokens: N comes from usage."""
    head, reads = recorded("llamacpp-responses-stream-json-schema.jsonl")
    rec = client_for(ResponsesClient, reads).stream("", "recorded", 64)
    created = first_read_with(reads, b"response.created")
    first_text = first_read_with(reads, b"response.output_text.delta")
    assert first_text > created and m.ttft_ms(rec) == pytest.approx(first_text / MS)
    assert len(rec.chunks) == 44 and rec.completion_tokens == 58 and not rec.token_counts_exact
    text = "".join(c.text for c in rec.chunks)
    assert json.loads(text)["age"] == 0                              # the constrained answer, whole
    assert rec.short_output                                          # 58 < 64: the grammar ended it


@pytest.mark.parametrize("cls, name", [(ResponsesClient, "llamacpp-responses-stream-error-too-long.jsonl"),
                                       (MessagesClient, "llamacpp-messages-stream-error-too-long.jsonl")])
def test_too_long_prompt_is_a_context_length_error_on_both_apis(cls, name):
    head, reads = recorded(name)
    body = b"".join(b for _, b in reads)
    with pytest.raises(MeasurementError) as e:
        client_for(cls, [(1 * MS, body)], status=head["status"], ctype="application/json").stream("", "x", 64)
    assert e.value.kind == "context_length" and "4584" in e.value.message and "4096" in e.value.message


def test_messages_without_messages_is_the_servers_500_with_its_message():
    head, reads = recorded("llamacpp-messages-stream-error-no-messages.jsonl")
    with pytest.raises(MeasurementError) as e:
        client_for(MessagesClient, [(1 * MS, b"".join(b for _, b in reads))], status=head["status"],
                   ctype="application/json").stream("", "x", 8)
    assert e.value.kind == "http_500" and "'messages' is required" in e.value.message


# ---------------------------------------------------------------- request bodies and headers
def test_request_bodies_force_lengths_where_the_api_can():
    seen: list = []
    body = b"".join(b for _, b in recorded("llamacpp-responses-stream.jsonl")[1])
    client_for(ResponsesClient, [(MS, body)], seen=seen).stream("SYS", "hello", 64,
                                                                extra={"reasoning": {"effort": "low"}})
    sent = json.loads(seen[-1].content)
    assert seen[-1].url.path == "/v1/responses"
    assert sent["max_output_tokens"] == 64 and sent["ignore_eos"] is True and sent["stream"] is True
    assert sent["input"] == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "hello"}]
    assert sent["reasoning"] == {"effort": "low"} and "stream_options" not in sent
    seen.clear()
    body = b"".join(b for _, b in recorded("llamacpp-messages-stream.jsonl")[1])
    client_for(MessagesClient, [(MS, body)], seen=seen, api_key="sk-test-123").stream("SYS", "hello", 64)
    req = seen[-1]
    sent = json.loads(req.content)
    assert req.url.path == "/v1/messages" and sent["max_tokens"] == 64 and sent["system"] == "SYS"
    assert sent["messages"] == [{"role": "user", "content": "hello"}] and "ignore_eos" not in sent
    assert req.headers["x-api-key"] == "sk-test-123" and req.headers["anthropic-version"] == "2023-06-01"


def test_make_client_and_target_name_the_apis():
    http = make_http_client(transport=httpx.MockTransport(lambda r: httpx.Response(404)))
    assert make_client(Target("http://x", "openai-responses", "m"), http).api_name == "openai-responses"
    assert make_client(Target("http://x", "anthropic-messages", "m"), http).api_name == "anthropic-messages"
    with pytest.raises(ConfigError, match="openai-responses, anthropic-messages"):
        Target("http://x", "anthropic")


def test_agent_transcript_translates_to_each_apis_items():
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "R"}]
    assert responses_input(msgs) == [
        {"role": "system", "content": "S"}, {"role": "user", "content": "U"},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "R"}]
    system, out = anthropic_messages(msgs)
    assert system == "S" and out == [
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "R"}]}]
    tool = {"type": "function", "function": {"name": "lookup", "description": "d", "parameters": {"type": "object"}}}
    assert responses_tools([tool]) == [{"type": "function", "name": "lookup", "description": "d",
                                        "parameters": {"type": "object"}}]
    assert anthropic_tools([tool]) == [{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}]


# ---------------------------------------------------------------- reasoning and tool calls
def test_responses_reasoning_then_answer_ttft_ttfo_and_reasoning_tokens():
    reads = [(10 * MS, events({"type": "response.created", "response": {}})),
             (20 * MS, events({"type": "response.output_item.added", "item": {"type": "reasoning", "id": "rs_1"}},
                              {"type": "response.reasoning_text.delta", "item_id": "rs_1", "delta": "hmm"})),
             (30 * MS, events({"type": "response.reasoning_text.delta", "item_id": "rs_1", "delta": " so"})),
             (45 * MS, events({"type": "response.output_text.delta", "delta": "Yes"})),
             (50 * MS, events({"type": "response.output_text.delta", "delta": "!"},
                              {"type": "response.completed", "response": {"status": "completed", "usage": {
                                  "input_tokens": 30, "output_tokens": 4, "input_tokens_details": {"cached_tokens": 0},
                                  "output_tokens_details": {"reasoning_tokens": 2}}}}))]
    rec = client_for(ResponsesClient, reads).stream("", "x", 4)
    assert m.ttft_ms(rec) == 20 and m.ttfo_ms(rec) == 45
    assert [c.reasoning for c in rec.chunks] == [True, True, False, False]
    assert rec.server_timings["reasoning_tokens"] == 2 and rec.completion_tokens == 4


def test_messages_thinking_then_text():
    reads = [(5 * MS, events({"type": "message_start", "message": {"usage": {"input_tokens": 20, "output_tokens": 0}}},
                             {"type": "ping"},
                             {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking",
                                                                                           "thinking": ""}},
                             {"type": "content_block_delta", "index": 0,
                              "delta": {"type": "thinking_delta", "thinking": "let me"}})),
             (15 * MS, events({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "signature_delta", "signature": ""}},
                              {"type": "content_block_stop", "index": 0},
                              {"type": "content_block_start", "index": 1,
                               "content_block": {"type": "text", "text": ""}},
                              {"type": "content_block_delta", "index": 1,
                               "delta": {"type": "text_delta", "text": "A"}})),
             (25 * MS, events({"type": "content_block_delta", "index": 1,
                               "delta": {"type": "text_delta", "text": "B"}},
                              {"type": "content_block_stop", "index": 1},
                              {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                               "usage": {"output_tokens": 3}},
                              {"type": "message_stop"}))]
    rec = client_for(MessagesClient, reads).stream("", "x", 3)
    assert m.ttft_ms(rec) == 5 and m.ttfo_ms(rec) == 15 and [c.reasoning for c in rec.chunks] == [True, False, False]
    assert (rec.prompt_tokens, rec.completion_tokens, rec.finish_reason) == (20, 3, "stop")


def test_tool_calls_on_both_apis_assemble_with_their_completion_time():
    args = json.dumps({"city": "Zürich", "n": 3})
    cut = [args[:7], args[7:15], args[15:]]
    responses = [(10 * MS, events({"type": "response.output_item.added",
                                   "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1",
                                            "name": "weather", "arguments": ""}}))]
    responses += [(20 * MS + i * 10 * MS, events({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                                                  "delta": c})) for i, c in enumerate(cut)]
    responses.append((50 * MS, events({"type": "response.completed", "response": {"usage": {
        "input_tokens": 9, "output_tokens": 4}}})))
    messages = [(10 * MS, events({"type": "message_start", "message": {"usage": {"input_tokens": 9}}},
                                 {"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather",
                                                    "input": {}}}))]
    messages += [(20 * MS + i * 10 * MS, events({"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "input_json_delta", "partial_json": c}}))
                 for i, c in enumerate(cut)]
    messages.append((50 * MS, events({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                      "usage": {"output_tokens": 4}}, {"type": "message_stop"})))
    for cls, reads, call_id in [(ResponsesClient, responses, "call_1"), (MessagesClient, messages, "toolu_1")]:
        rec = client_for(cls, reads).stream_messages([{"role": "user", "content": "go"}], 4)
        calls = assemble(rec.tool_deltas)
        (call,) = calls.ordered()
        assert (call.id, call.name, json.loads(call.arguments)) == (call_id, "weather", {"city": "Zürich", "n": 3})
        assert calls.t_first_ns == 10 * MS and calls.t_complete_ns == 40 * MS
        assert m.ttft_ms(rec) == 10 and len(rec.chunks) == 4 and rec.finish_reason == "tool_calls"


# ---------------------------------------------------------------- faults
@pytest.mark.parametrize("cls, obj, said", [
    (MessagesClient, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     "overloaded_error: Overloaded"),
    (MessagesClient, {"code": 500, "message": "slot died", "type": "server_error"}, "server_error: slot died"),
    (ResponsesClient, {"type": "error", "code": "server_error", "message": "boom"}, "server_error: boom"),
    (ResponsesClient, {"error": {"code": 500, "message": "slot died", "type": "server_error"}},
     "server_error: slot died"),
    (ResponsesClient, {"type": "response.failed", "response": {"status": "failed", "error": {
        "code": "server_error", "message": "ran out"}}}, "response.failed inside a 200 stream: server_error: ran out"),
])
def test_error_events_after_the_first_token_are_server_faults(cls, obj, said):
    first = {"type": "response.output_text.delta", "delta": "a"} if cls is ResponsesClient else \
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}}
    name = "error" if cls is MessagesClient and "code" in obj else obj.get("type", "")
    raw = f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode() if name else f"data: {json.dumps(obj)}\n\n".encode()
    with pytest.raises(MeasurementError) as e:
        client_for(cls, [(5 * MS, events(first)), (9 * MS, raw)]).stream("", "x", 8)
    assert e.value.kind == "stream_error" and said in e.value.message
    assert e.value.partial is not None and len(e.value.partial.chunks) == 1   # what came before is kept


@pytest.mark.parametrize("cls, closing", [(ResponsesClient, "response.completed"), (MessagesClient, "message_stop")])
def test_a_stream_cut_before_its_closing_event_is_a_failed_request(cls, closing):
    first = {"type": "response.output_text.delta", "delta": "a"} if cls is ResponsesClient else \
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}}
    with pytest.raises(MeasurementError) as e:
        client_for(cls, [(5 * MS, events(first, first))]).stream("", "x", 8)
    assert e.value.kind == "no_done" and repr(closing) in e.value.message and "after 2 token chunks" in e.value.message


def test_chat_style_done_is_not_a_closing_event():
    """``data: [DONE]`` (a proxy that rewrote the stream?) is not JSON on these APIs: a protocol error."""
    with pytest.raises(MeasurementError) as e:
        client_for(ResponsesClient, [(5 * MS, b"data: [DONE]\n\n")]).stream("", "x", 8)
    assert "[DONE]" in e.value.message


# ---------------------------------------------------------------- exact prompts
@pytest.mark.parametrize("cls, path, key", [(MessagesClient, "/v1/messages/count_tokens", "messages"),
                                            (ResponsesClient, "/v1/responses/input_tokens", "input")])
def test_the_apis_own_counter_makes_prompts_exact_before_tokenize(cls, path, key):
    """The counting endpoint of the API (the rendered prompt with specials, what usage will say) is
    tried before ``/tokenize``; output text (``add_special=False``) still goes to ``/tokenize``."""
    from pytest_llm_latency.client.prepare.tokens import tokenize_endpoint

    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path == path:
            body = json.loads(request.content)
            text = body[key] if key == "input" else body[key][0]["content"]
            return httpx.Response(200, json={"input_tokens": len(text.split()) + 7})
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": json.loads(request.content).get("content", "").split()})
        return httpx.Response(404, json={"error": "not found"})

    client = cls(make_http_client(transport=httpx.MockTransport(handler)), "http://x", "m",
                 "responses" if cls is ResponsesClient else "messages")
    count = tokenize_endpoint(client)
    assert count is not None and count.source == f"{path} endpoint" and count("a b c") == 10  # type: ignore
    assert set(asked) == {path}
    plain = tokenize_endpoint(client, add_special=False)
    assert plain is not None and plain("a b c") == 3 and asked[-1] == "/tokenize"


@pytest.mark.parametrize("api, path", [("openai-responses", "/v1/responses"), ("anthropic-messages", "/v1/messages"),
                                       ("openai-chat", "/v1/chat/completions")])
@pytest.mark.parametrize("body", [b'{"detail":"Not Found"}',
                                  b'{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}'])
def test_an_api_the_server_does_not_serve_names_the_key_and_the_fix(api, path, body):
    """vLLM's and llama.cpp's 404 for a route they do not have: not a model problem."""
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, headers={"content-type": "application/json"}, content=body)

    client = make_client(Target("http://x", api, "m"), make_http_client(transport=httpx.MockTransport(handler)))
    with pytest.raises(MeasurementError) as e:
        client.stream("", "hello", 4)
    msg = e.value.message
    assert e.value.kind == "http_404" and f"http://x{path}" in msg and f"does not serve the {api} API" in msg
    from pytest_llm_latency.client import APIS

    others = msg.split("to one it serves")[1]
    assert "--llm-latency-api" in msg and all(a in others for a in APIS if a != api) and api not in others


# ---------------------------------------------------------------- llama.cpp's final events
def test_responses_tail_held_back_by_the_partial_parser_comes_from_the_done_events():
    """llama.cpp's final Responses event streams no last diff: what its partial parser held back (a
    call's closing brace, the answer's last characters) is only in the ``.done`` events' whole text."""
    args = '{"city": "Oslo"}'
    reads = [(10 * MS, events({"type": "response.output_item.added",
                               "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "w"}},
                              {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                               "delta": args[:8]})),
             (20 * MS, events({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                               "delta": args[8:-1]})),
             (30 * MS, events({"type": "response.output_item.done", "item": {
                 "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "w", "arguments": args}},
                              {"type": "response.completed", "response": {"usage": {"input_tokens": 5,
                                                                                    "output_tokens": 4}}}))]
    rec = client_for(ResponsesClient, reads).stream_messages([{"role": "user", "content": "go"}], 4)
    calls = assemble(rec.tool_deltas)
    assert calls.ordered()[0].arguments == args and calls.t_complete_ns == 30 * MS
    assert len(rec.chunks) == 4 == rec.completion_tokens and rec.token_counts_exact   # name, 2 deltas, the tail
    text = [(5 * MS, events({"type": "response.output_text.delta", "item_id": "m", "delta": "Hel"})),
            (9 * MS, events({"type": "response.output_text.done", "item_id": "m", "text": "Hello"},
                            {"type": "response.completed", "response": {"usage": {"output_tokens": 2}}}))]
    rec = client_for(ResponsesClient, text).stream("", "x", 2)
    assert [c.text for c in rec.chunks] == ["Hel", "lo"] and m.tpot_ms(rec) == 4
    said = [(5 * MS, events({"type": "response.output_text.delta", "item_id": "m", "delta": "Hello"})),
            (9 * MS, events({"type": "response.output_text.done", "item_id": "m", "text": "Hello"},
                            {"type": "response.completed", "response": {"usage": {"output_tokens": 1}}}))]
    assert len(client_for(ResponsesClient, said).stream("", "x", 1).chunks) == 1   # nothing held back: no chunk


def test_a_call_cut_by_the_limit_finishes_length_and_a_refusal_is_answer_text():
    reads = [(5 * MS, events({"type": "response.output_item.added",
                              "item": {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "w"}},
                             {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"a'},
                             {"type": "response.incomplete", "response": {
                                 "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                                 "usage": {"input_tokens": 3, "output_tokens": 2}}}))]
    assert client_for(ResponsesClient, reads).stream("", "x", 2).finish_reason == "length"
    refusal = [(7 * MS, events({"type": "response.refusal.delta", "delta": "I can't"},
                               {"type": "response.completed", "response": {"usage": {"output_tokens": 1}}}))]
    rec = client_for(ResponsesClient, refusal).stream("", "x", 1)
    assert m.ttft_ms(rec) == 7 == m.ttfo_ms(rec) and rec.chunks[0].text == "I can't"


def test_messages_repeated_tool_start_in_the_final_event_is_no_token():
    """llama.cpp's final Messages event starts again every call whose arguments it still sends."""
    start = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "toolu_1", "name": "w"}}
    reads = [(5 * MS, events({"type": "message_start", "message": {"usage": {"input_tokens": 4}}}, start,
                             {"type": "content_block_delta", "index": 0,
                              "delta": {"type": "input_json_delta", "partial_json": '{"a": '}})),
             (9 * MS, events(start, {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "input_json_delta", "partial_json": "1}"}},
                             {"type": "content_block_stop", "index": 0},
                             {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                              "usage": {"output_tokens": 3}}, {"type": "message_stop"}))]
    rec = client_for(MessagesClient, reads).stream_messages([{"role": "user", "content": "go"}], 3)
    assert len(rec.chunks) == 3 == rec.completion_tokens and rec.token_counts_exact
    (call,) = assemble(rec.tool_deltas).ordered()
    assert call.arguments == '{"a": 1}' and call.t_complete_ns == 9 * MS


def test_thinking_requests_send_no_temperature():
    seen: list = []
    body = b"".join(b for _, b in recorded("llamacpp-messages-stream.jsonl")[1])
    client_for(MessagesClient, [(MS, body)], seen=seen).stream(
        "", "hello", 64, extra={"thinking": {"type": "enabled", "budget_tokens": 32}})
    sent = json.loads(seen[-1].content)
    assert sent["thinking"]["budget_tokens"] == 32 and "temperature" not in sent
