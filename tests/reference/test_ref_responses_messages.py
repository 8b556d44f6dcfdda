"""The reference target's OpenAI Responses and Anthropic Messages APIs on the wire: event sequences,
usage, reasoning (and on chat completions), tool calls, structured output, faults, token counts."""
from __future__ import annotations

import json

import jsonschema
import pytest

from pytest_llm_latency.targets.reference.launch import start_reference
from tests.helpers.paths import RECORDINGS
from tests.reference.refclient import named_events, stream_openai, words

MODEL = "llama-3.1-8b"
THINK = 8                   # the server's thinking_tokens
FAULT = "x-reference-fault"
SCHEMA = {"type": "object", "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 18},
                         "tags": {"type": "array", "items": {"enum": ["a", "b"]}}, "ok": {"type": "boolean"}}}
TOOL = {"name": "get_weather", "description": "the weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture(scope="module")
def srv():
    with start_reference(f"reference://h100-sxm/llama-3.1-8b?time_scale=0&max_model_len=4096&thinking_tokens={THINK}",
                         mode="thread") as handle:
        yield handle


def responses(http, srv, n=9, *, headers=None, **body):
    return named_events(http, srv.url, "/v1/responses",
                        {"input": words(12, body.pop("salt", "r")), "max_output_tokens": n, "ignore_eos": True, **body},
                        headers=headers)


def messages(http, srv, n=9, *, headers=None, **body):
    msgs = [{"role": "user", "content": words(12, body.pop("salt", "m"))}]
    return named_events(http, srv.url, "/v1/messages", {"messages": msgs, "max_tokens": n, "ignore_eos": True, **body},
                        headers=headers)


def kinds(events):
    return [k for k, _ in events]


def of(events, kind):
    return [o for k, o in events if k == kind]


# -- event sequences and usage -----------------------------------------------------------------
def test_responses_stream_events_usage_and_length_cut(srv, http):
    status, ev, raw = responses(http, srv, 9)
    assert status == 200 and b"[DONE]" not in raw
    assert kinds(ev) == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"] + ["response.output_text.delta"] * 9 + [
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.incomplete"]
    assert [o["sequence_number"] for _, o in ev] == list(range(len(ev)))
    text = "".join(o["delta"] for o in of(ev, "response.output_text.delta"))
    assert len(text.split()) == 9 and of(ev, "response.output_text.done")[0]["text"] == text
    final = ev[-1][1]["response"]
    assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["usage"] == {"input_tokens": 15, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 9,
                              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 24}
    assert final["output"][0]["content"][0]["text"] == text and final["model"] == MODEL
    natural = responses(http, srv, 4000, ignore_eos=False)[1][-1]   # the natural EOS: completed
    assert natural[0] == "response.completed" and natural[1]["response"]["status"] == "completed"
    assert natural[1]["response"]["incomplete_details"] is None


def test_messages_stream_events_usage_and_stop_reasons(srv, http):
    status, ev, raw = messages(http, srv, 7, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"})
    assert status == 200 and b"[DONE]" not in raw
    assert kinds(ev) == ["message_start", "ping", "content_block_start"] + ["content_block_delta"] * 7 + [
        "content_block_stop", "message_delta", "message_stop"]
    start = ev[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["model"] == MODEL
    assert start["usage"] == {"input_tokens": 15, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                              "output_tokens": 0}
    assert ev[2][1]["content_block"] == {"type": "text", "text": ""}
    assert all(o["delta"]["type"] == "text_delta" and o["index"] == 0 for o in of(ev, "content_block_delta"))
    assert ev[-2][1]["delta"]["stop_reason"] == "max_tokens" and ev[-2][1]["usage"] == {"output_tokens": 7}
    assert messages(http, srv, 4000, ignore_eos=False)[1][-2][1]["delta"]["stop_reason"] == "end_turn"


def test_non_streamed_objects(srv, http):
    r = http.post(srv.url + "/v1/responses", json={"input": "a b c", "max_output_tokens": 5, "ignore_eos": True,
                                                   "reasoning": {"effort": "low"}}).json()
    assert r["object"] == "response" and r["status"] == "incomplete"
    assert [i["type"] for i in r["output"]] == ["reasoning", "message"]
    assert len(r["output"][0]["content"][0]["text"].split()) == THINK // 2
    assert r["usage"]["output_tokens"] == 5 and r["usage"]["output_tokens_details"]["reasoning_tokens"] == 4
    m = http.post(srv.url + "/v1/messages", json={"messages": [{"role": "user", "content": "a b c"}], "max_tokens": 12,
                                                  "ignore_eos": True, "thinking": {"type": "enabled",
                                                                                   "budget_tokens": 3}}).json()
    assert m["type"] == "message" and [b["type"] for b in m["content"]] == ["thinking", "text"]
    assert len(m["content"][0]["thinking"].split()) == 3 and len(m["content"][1]["text"].split()) == 9
    assert m["stop_reason"] == "max_tokens" and m["usage"]["output_tokens"] == 12


# -- reasoning ---------------------------------------------------------------------------------
@pytest.mark.parametrize("effort,expected", [("low", THINK // 2), ("medium", THINK), ("high", 2 * THINK),
                                             (None, THINK), ("none", 0)])
def test_responses_reasoning_effort(srv, http, effort, expected):
    _, ev, _ = responses(http, srv, 30, reasoning={"effort": effort}, salt=f"e{effort}")
    deltas = of(ev, "response.reasoning_text.delta")
    assert len(deltas) == expected and len(of(ev, "response.output_text.delta")) == 30 - expected
    usage = ev[-1][1]["response"]["usage"]
    assert usage["output_tokens"] == 30 and usage["output_tokens_details"]["reasoning_tokens"] == expected
    if expected:  # the reasoning item comes first and is done before the message item starts
        k = kinds(ev)
        assert k[2] == "response.output_item.added" and ev[2][1]["item"]["type"] == "reasoning"
        assert k.index("response.reasoning_text.done") < k.index("response.content_part.added")
        assert [i["type"] for i in ev[-1][1]["response"]["output"]] == ["reasoning", "message"]


@pytest.mark.parametrize("thinking,expected", [({"type": "enabled", "budget_tokens": 5}, 5),
                                               ({"type": "enabled", "budget_tokens": 1000}, THINK),
                                               ({"type": "disabled"}, 0)])
def test_messages_thinking_is_capped_by_budget_tokens(srv, http, thinking, expected):
    _, ev, _ = messages(http, srv, 20, thinking=thinking, salt=f"t{expected}")
    deltas = [o["delta"] for o in of(ev, "content_block_delta")]
    assert [d["type"] for d in deltas] == ["thinking_delta"] * expected + (["signature_delta"] if expected else []) \
        + ["text_delta"] * (20 - expected)
    blocks = [o["content_block"]["type"] for o in of(ev, "content_block_start")]
    assert blocks == (["thinking"] if expected else []) + ["text"]
    assert ev[-2][1]["usage"]["output_tokens"] == 20


def test_chat_completions_reasoning(srv, http):
    msgs = [{"role": "user", "content": words(10, "cr")}]
    base = {"messages": msgs, "max_tokens": 25, "ignore_eos": True, "stream_options": {"include_usage": True}}
    for extra, expected in (({"reasoning_effort": "high"}, 2 * THINK),
                            ({"chat_template_kwargs": {"enable_thinking": True}}, THINK)):
        s = stream_openai(http, srv.url, {**base, **extra}, path="/v1/chat/completions")
        deltas = [o["choices"][0]["delta"] for _, o in s.events if o.get("choices")][1:]
        assert sum("reasoning_content" in d for d in deltas) == expected
        assert [bool(d.get("reasoning_content")) for d in deltas] == [True] * expected + [False] * (25 - expected)
        assert s.usage["completion_tokens"] == 25
        assert s.usage["completion_tokens_details"] == {"reasoning_tokens": expected}
    plain = stream_openai(http, srv.url, base, path="/v1/chat/completions")
    assert "completion_tokens_details" not in plain.usage and plain.tokens == 25
    # without ignore_eos the natural EOS falls in the answer, after the reasoning
    r = http.post(srv.url + "/v1/chat/completions", json={"messages": msgs, "reasoning_effort": "high"}).json()
    assert r["usage"]["completion_tokens"] > 2 * THINK and r["choices"][0]["message"]["content"]
    bad = http.post(srv.url + "/v1/chat/completions", json={"messages": msgs, "reasoning_effort": "extreme"})
    assert bad.status_code == 400 and "reasoning effort" in bad.json()["error"]["message"]


# -- tool calls --------------------------------------------------------------------------------
def test_responses_tool_call(srv, http):
    _, ev, _ = responses(http, srv, 10, tools=[{"type": "function", **TOOL}])
    added = of(ev, "response.output_item.added")[0]["item"]
    assert added["type"] == "function_call" and added["name"] == "get_weather" and added["call_id"].startswith("call_")
    deltas = [o["delta"] for o in of(ev, "response.function_call_arguments.delta")]
    args = of(ev, "response.function_call_arguments.done")[0]["arguments"]
    assert len(deltas) == 9 and "".join(deltas) == args and json.loads(args)   # name first, then 9 fragments
    assert ev[-1][1]["response"]["output"][0]["arguments"] == args


def test_messages_tool_use(srv, http):
    tools = [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["parameters"]}]
    _, ev, _ = messages(http, srv, 10, tools=tools)
    block = of(ev, "content_block_start")[0]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "get_weather" and block["input"] == {}
    parts = [o["delta"]["partial_json"] for o in of(ev, "content_block_delta")]
    assert len(parts) == 9 and isinstance(json.loads("".join(parts)), dict)
    natural = messages(http, srv, 4000, tools=tools, ignore_eos=False)[1]
    assert natural[-2][1]["delta"]["stop_reason"] == "tool_use"
    none = messages(http, srv, 3, tools=tools, tool_choice={"type": "none"})[1]
    assert of(none, "content_block_start")[0]["content_block"]["type"] == "text"


# -- structured output -------------------------------------------------------------------------
def _structured(http, srv, api, n, headers=None):
    """The answer text and the per-token pieces of a structured request on ``api``."""
    if api == "chat":
        body = {"messages": [{"role": "user", "content": words(8, "sc")}], "max_tokens": n, "ignore_eos": True,
                "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}}
        s = stream_openai(http, srv.url, body, path="/v1/chat/completions", headers=headers)
        return [o["choices"][0]["delta"]["content"] for _, o in s.events if o.get("choices")][1:]
    if api.startswith("responses"):
        fmt = {"text": {"format": {"type": "json_schema", "name": "p", "schema": SCHEMA}}} if api == "responses" \
            else {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}}
        ev = responses(http, srv, n, headers=headers, **fmt)[1]
        return [o["delta"] for o in of(ev, "response.output_text.delta")]
    ev = messages(http, srv, n, headers=headers, output_format={"type": "json_schema", "schema": SCHEMA})[1]
    return [o["delta"]["text"] for o in of(ev, "content_block_delta")]


@pytest.mark.parametrize("api", ["chat", "responses", "responses-response_format", "messages"])
def test_structured_answer_is_valid_and_parses_only_when_complete(srv, http, api):
    pieces = _structured(http, srv, api, 16)
    assert len(pieces) == 16 and all(pieces)                 # every token carries text
    text = "".join(pieces)
    jsonschema.validate(json.loads(text), SCHEMA)
    for k in range(1, 16):
        with pytest.raises(ValueError):
            json.loads("".join(pieces[:k]))
    bad = json.loads("".join(_structured(http, srv, api, 16, headers={FAULT: "schema_violation"})))
    with pytest.raises(jsonschema.ValidationError, match="required property"):
        jsonschema.validate(bad, SCHEMA)


# -- faults ------------------------------------------------------------------------------------
def test_error_event_mid_stream(srv, http):
    _, ev, _ = responses(http, srv, 9, headers={FAULT: "error_event;after=2"})
    assert kinds(ev)[-2:] == ["error", "response.failed"] and len(of(ev, "response.output_text.delta")) == 2
    assert {"code", "message"} <= set(ev[-2][1]) and ev[-1][1]["response"]["status"] == "failed"
    assert ev[-1][1]["response"]["error"]["code"] == "server_error"
    _, ev, _ = messages(http, srv, 9, headers={FAULT: "error_event;after=2"})
    assert kinds(ev)[-1] == "error" and "message_stop" not in kinds(ev)
    assert ev[-1][1]["error"]["type"] == "api_error" and ev[-1][1]["error"]["message"]
    assert kinds(responses(http, srv, 3, headers={FAULT: "no_done"})[1])[-1] == "response.output_item.done"
    assert kinds(messages(http, srv, 3, headers={FAULT: "no_done"})[1])[-1] == "message_delta"


# -- token counts ------------------------------------------------------------------------------
def test_input_tokens_match_usage_and_chat_completions(srv, http):
    system, user = words(7, "sys"), words(21, "usr")
    chat_tools = [{"type": "function", "function": TOOL}]
    chat_msgs = [{"role": "system", "content": system}, {"role": "user", "content": user},
                 {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                     "name": "get_weather", "arguments": '{"city": "x"}'}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "sunny and warm"}]
    chat = http.post(srv.url + "/v1/chat/completions", json={"messages": chat_msgs, "tools": chat_tools,
                                                             "max_tokens": 1}).json()["usage"]["prompt_tokens"]
    resp_body = {"instructions": system, "tools": [{"type": "function", **TOOL}], "input": [
        {"role": "user", "content": [{"type": "input_text", "text": user}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "x"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny and warm"}]}
    counted = http.post(srv.url + "/v1/responses/input_tokens", json=resp_body).json()
    assert counted == {"object": "response.input_tokens", "input_tokens": chat}
    ev = named_events(http, srv.url, "/v1/responses", {**resp_body, "max_output_tokens": 2})[1]
    assert ev[-1][1]["response"]["usage"]["input_tokens"] == chat
    msg_body = {"system": [{"type": "text", "text": system}], "messages": [
        {"role": "user", "content": user},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get_weather",
                                           "input": {"city": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "sunny and warm"}]}],
        "tools": [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["parameters"]}]}
    assert http.post(srv.url + "/v1/messages/count_tokens", json=msg_body).json() == {"input_tokens": chat}
    start = named_events(http, srv.url, "/v1/messages", {**msg_body, "max_tokens": 2})[1][0][1]["message"]["usage"]
    assert start["input_tokens"] + start["cache_read_input_tokens"] == chat
    plain = words(30, "plain")          # a plain string prompt: 30 words + 2 + 1 on every API
    assert http.post(srv.url + "/v1/responses/input_tokens", json={"input": plain}).json()["input_tokens"] == 33
    assert http.post(srv.url + "/v1/messages/count_tokens", json={"messages": [
        {"role": "user", "content": plain}]}).json()["input_tokens"] == 33


def test_messages_usage_excludes_cached_tokens(serve, http):
    h = serve("time_scale=0&prefix_caching", mode="thread")
    body = {"messages": [{"role": "user", "content": words(100, "pc")}], "max_tokens": 2}
    named_events(http, h.url, "/v1/messages", body)
    usage = named_events(http, h.url, "/v1/messages", body)[1][0][1]["message"]["usage"]
    assert usage["cache_read_input_tokens"] == 96 and usage["input_tokens"] == 103 - 96
    r = named_events(http, h.url, "/v1/responses", {"input": words(100, "pc2"), "max_output_tokens": 2})[1]
    r = named_events(http, h.url, "/v1/responses", {"input": words(100, "pc2"), "max_output_tokens": 2})[1]
    assert r[-1][1]["response"]["usage"]["input_tokens_details"] == {"cached_tokens": 96}


# -- request errors ----------------------------------------------------------------------------
def test_request_errors(srv, http):
    r = http.post(srv.url + "/v1/responses", json={"max_output_tokens": 4})
    assert r.status_code == 400 and r.json()["error"]["message"] == "'input' is required"
    for body, fragment in (({"messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
                           ({"max_tokens": 3}, "messages"),
                           ({"max_tokens": 3, "messages": [{"role": "user", "content": "x"}],
                             "thinking": {"type": "enabled", "budget_tokens": 0}}, "budget_tokens")):
        r = http.post(srv.url + "/v1/messages", json=body)
        assert r.status_code == 400 and r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "invalid_request_error" and fragment in r.json()["error"]["message"]
    r = http.post(srv.url + "/v1/messages", json={"model": "claude", "max_tokens": 3,
                                                  "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    r = http.post(srv.url + "/v1/responses", json={"input": "x", "reasoning": {"effort": "extreme"}})
    assert r.status_code == 400 and "effort" in r.json()["error"]["message"]
    r = http.post(srv.url + "/v1/responses", json={"input": "x", "max_output_tokens": 0})
    assert r.status_code == 400 and "max_output_tokens" in r.json()["error"]["message"]
    r = http.post(srv.url + "/v1/responses", json={"input": words(100), "max_output_tokens": 4000})
    assert r.status_code == 400 and "maximum context length" in r.json()["error"]["message"]


# -- the shapes of real llama-server streams (tests/unit/recordings, issue 36) ------------------------
def _recorded_shapes(name: str) -> dict[str, dict[str, set]]:
    """event type -> {"": its keys, sub-object key: that object's keys} in a llama-server recording."""
    lines = [json.loads(line) for line in (RECORDINGS / name).read_text().splitlines()[1:]]
    body = "".join(line["data"] for line in lines)
    shapes: dict[str, dict[str, set]] = {}
    for block in filter(None, body.split("\n\n")):
        obj = json.loads(block.split("\ndata: ", 1)[1])
        shape = shapes.setdefault(obj["type"], {"": set()})
        shape[""] |= set(obj)
        for key, value in obj.items():
            if isinstance(value, dict):
                shape.setdefault(key, set()).update(value)
    return shapes


@pytest.mark.parametrize("recording,api", [("llamacpp-responses-stream.jsonl", responses),
                                           ("llamacpp-messages-stream.jsonl", messages)])
def test_streams_carry_every_field_of_the_real_llama_server_events(srv, http, recording, api):
    ours: dict[str, dict[str, set]] = {}
    for kind, obj in api(http, srv, 5)[1] + api(http, srv, 4000, ignore_eos=False)[1]:
        shape = ours.setdefault(kind, {"": set()})
        shape[""] |= set(obj)
        for key, value in obj.items():
            if isinstance(value, dict):
                shape.setdefault(key, set()).update(value)
    for kind, shape in _recorded_shapes(recording).items():
        assert kind in ours, kind
        for key, fields in shape.items():
            if key == "timings":                                  # llama.cpp's own timings object
                continue
            missing = fields - ours[kind].get(key, set()) - {"timings"}
            assert not missing, (kind, key or "event", missing)


def test_several_tokens_per_event_keep_the_reasoning_split(serve, http):
    h = serve(f"time_scale=0&stream_interval=4&thinking_tokens={THINK}", mode="thread")
    _, ev, _ = responses(http, h, 15, reasoning={"effort": "medium"})   # 8 reasoning + 7 answer tokens
    reasoning = [len(o["delta"].split()) for o in of(ev, "response.reasoning_text.delta")]
    answer = [len(o["delta"].split()) for o in of(ev, "response.output_text.delta")]
    assert reasoning == [4, 4] and answer == [4, 3]
    _, ev, _ = messages(http, h, 10, thinking={"type": "enabled", "budget_tokens": 6})   # 6 + 4: chunks 4, 4, 2
    deltas = [(o["delta"]["type"], len((o["delta"].get("thinking") or o["delta"].get("text") or "").split()))
              for o in of(ev, "content_block_delta")]
    assert deltas == [("thinking_delta", 4), ("thinking_delta", 2), ("signature_delta", 0), ("text_delta", 2),
                      ("text_delta", 2)]
