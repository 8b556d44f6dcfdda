"""Incremental tool-call assembly (core.measure.tool_calls): JSON completeness across fragments cut
anywhere -- mid-key, mid-string, mid-escape, mid-UTF-8 -- and the times it reports."""
import json

import pytest

from pytest_llm_latency.core.measure.tool_calls import JsonCompleteness, ToolCallStream, assemble

ARGS = json.dumps({"city": "Zürich – 東京", "note": 'say "hi" \\ then {braces} [x]', "n": [1, {"k": "}"}]},
                  ensure_ascii=False)


@pytest.mark.parametrize("cut", range(1, len(ARGS)))
def test_two_fragments_complete_only_at_the_end_at_every_character_cut(cut):
    s = JsonCompleteness()
    assert s.feed(ARGS[:cut]) is False  # a prefix of one object is never a complete value
    assert s.feed(ARGS[cut:]) is True
    assert json.loads(s.text) == json.loads(ARGS)


def test_every_byte_cut_of_the_utf8_text_including_inside_multibyte_characters():
    raw = ARGS.encode()
    multibyte_cuts = [i for i in range(1, len(raw)) if (raw[i] & 0xC0) == 0x80]  # inside a character
    assert multibyte_cuts  # the text has characters of 2 and 3 bytes
    for cut in range(1, len(raw)):
        s = JsonCompleteness()
        assert s.feed(raw[:cut]) is False, cut
        assert s.feed(raw[cut:]) is True, cut
        assert s.text == ARGS


def test_one_character_at_a_time_and_escapes_split_across_fragments():
    s = JsonCompleteness()
    states = [s.feed(ch) for ch in ARGS]
    assert states[-1] is True and not any(states[:-1])
    # an escaped quote cut between its backslash and the quote does not end the string
    t = JsonCompleteness()
    assert t.feed('{"a": "x\\') is False
    assert t.feed('"}') is False          # still inside the string: \" is a quote character
    assert t.feed('"}') is True
    assert json.loads(t.text) == {"a": 'x"}'}


def test_unicode_escape_split_and_invalid_json_never_complete():
    s = JsonCompleteness()
    assert s.feed('{"c": "caf\\u00') is False
    assert s.feed('e9"}') is True
    assert json.loads(s.text) == {"c": "café"}
    bad = JsonCompleteness()
    assert bad.feed('{"a": 1,}') is False  # balanced but not JSON: never complete
    assert bad.feed("") is False


def test_vllm_shaped_stream_name_first_then_fragments_with_times():
    frags = [ARGS[i:i + 7] for i in range(0, len(ARGS), 7)]
    deltas = [(1000, [{"index": 0, "id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": ""}}])]
    deltas += [(2000 + i, [{"index": 0, "function": {"arguments": f}}]) for i, f in enumerate(frags)]
    s = assemble(deltas)
    (call,) = s.ordered()
    assert (call.id, call.name, call.arguments) == ("call_1", "get_weather", ARGS)
    assert s.t_first_ns == 1000
    assert s.t_complete_ns == 2000 + len(frags) - 1  # the last fragment, not the first token


def test_parallel_calls_complete_when_the_last_one_is_and_incomplete_is_none():
    s = ToolCallStream()
    s.feed(1, [{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x": 1'}},
               {"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y": 2}'}}])
    assert s.t_complete_ns is None  # call 0 still open
    s.feed(5, [{"index": 0, "function": {"arguments": "}"}}])
    assert s.t_complete_ns == 5
    assert [c.name for c in s.ordered()] == ["f", "g"]
    cut = assemble([(1, [{"index": 0, "function": {"name": "f", "arguments": '{"x": "unterminated'}}])])
    assert cut.t_first_ns == 1 and cut.t_complete_ns is None


def test_ollama_arguments_as_an_object_are_complete_at_once():
    s = assemble([(7, [{"function": {"name": "f", "arguments": {"city": "Paris"}}}])])
    assert s.t_complete_ns == 7 and json.loads(s.ordered()[0].arguments) == {"city": "Paris"}
