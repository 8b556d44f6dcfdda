"""Property tests for the stream decoders and the OpenAI adapter's event handling.

* any chunking of a valid stream (including empty reads and reads that split a
  UTF-8 character or a CRLF) gives exactly the events of the whole stream, and the
  events the stream was built from;
* arbitrary bytes give events or ``ProtocolError`` -- never UnicodeDecodeError,
  IndexError, RecursionError, ValueError, ...;
* ``OpenAIClient.stream`` on arbitrary JSON-ish SSE events lets only
  ``MeasurementError`` (incl. ``ProtocolError``) escape.
"""
import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llm_latency.client.transport.ndjson import NDJSONDecoder
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.client.transport.sse import SSEDecoder, SSEEvent
from pytest_llm_latency.core.errors import MeasurementError, ProtocolError

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    """Split ``data`` at ``cuts`` (any ints; repeated cuts give empty reads)."""
    points = sorted(c % (len(data) + 1) for c in cuts)
    out, prev = [], 0
    for p in points:
        out.append(data[prev:p])
        prev = p
    return out + [data[prev:]]


def run(decoder, parts):
    """Events of a whole decode, or the exception type it stopped with."""
    events = []
    try:
        for p in parts:
            events += decoder.feed(p)
        return events + decoder.close()
    except ProtocolError:
        return ProtocolError


cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)
# no \r or \n inside a value; include multi-byte characters so cuts land inside them
value = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20)
eol = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def sse_streams(draw):
    """(bytes, expected events): data/event/id/retry fields, comments, all line endings."""
    lines, want = [], []
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            lines.append(":" + draw(value))  # comment / keep-alive ping
        name = draw(st.none() | st.text("abcdefgh_", min_size=1, max_size=8))
        if name is not None:
            lines.append("event: " + name)
        datas = draw(st.lists(value, min_size=1, max_size=3))
        for d in datas:
            if draw(st.booleans()):
                lines.append(draw(st.sampled_from(["id: 7", "retry: 100", "x-unknown: 1"])))
            # one space after the colon is dropped by the decoder: "data:" only when d has no leading space
            lines.append(("data:" if draw(st.booleans()) and not d.startswith(" ") else "data: ") + d)
        want.append(SSEEvent("\n".join(datas), name))
        lines.append("")  # the blank line that dispatches
    if want and draw(st.booleans()):
        lines.pop()  # no blank line at the end: close() still dispatches the pending event
    out, prev = "", None
    for line in lines:
        end = draw(eol)
        if prev == "\r" and line == "" and end.startswith("\n"):
            end = "\r"  # "\r" + "\n" would be one CRLF, not two line ends
        out += line + end
        prev = end
    return out.encode("utf-8"), want


@FUZZ
@given(sse_streams(), cuts)
def test_sse_any_chunking_gives_the_events_of_the_whole_stream(stream, cut):
    data, want = stream
    whole = run(SSEDecoder(), [data])
    assert whole == want
    assert run(SSEDecoder(), chunked(data, cut)) == whole


@FUZZ
@given(sse_streams())
def test_sse_one_byte_at_a_time_with_empty_reads_between(stream):
    data, want = stream
    parts = [p for b in data for p in (bytes([b]), b"")]
    assert run(SSEDecoder(), parts) == want


ATOMS = [b"data:", b"data: ", b"event:", b"error:", b":", b" ", b"x", b"{", b"}", b"\r", b"\n", b"\r\n",
         "\u00e9".encode(), "\U0001F600".encode(), b"\xff", b"\xc3", b"\xe4\xb8", b"\x00"]
noise = st.binary(max_size=300) | st.lists(st.sampled_from(ATOMS), max_size=80).map(b"".join)


@FUZZ
@given(noise, cuts, st.sampled_from([16, 64, 4 * 1024 * 1024]))
def test_sse_random_bytes_only_ever_raise_protocol_error(data, cut, cap):
    whole = run(SSEDecoder(max_line_bytes=cap), [data])  # anything but ProtocolError propagates here
    assert run(SSEDecoder(max_line_bytes=cap), chunked(data, cut)) == whole


# ---------------------------------------------------------------------------- NDJSON

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | value,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(value, inner, max_size=3), max_leaves=10)
json_objects = st.dictionaries(value, json_values, max_size=4)


@st.composite
def ndjson_streams(draw):
    objs = draw(st.lists(json_objects, max_size=5))
    out = ""
    for o in objs:
        out += draw(st.sampled_from(["", "\n", "\r\n", "  \n"]))  # blank lines are skipped
        out += json.dumps(o, ensure_ascii=draw(st.booleans())) + draw(st.sampled_from(["\n", "\r\n"]))
    if objs and draw(st.booleans()):
        out = out.rstrip("\r\n")  # last object without its newline: close() returns it
    return out.encode("utf-8"), objs


@FUZZ
@given(ndjson_streams(), cuts)
def test_ndjson_any_chunking_gives_the_objects_of_the_whole_stream(stream, cut):
    data, want = stream
    assert run(NDJSONDecoder(), [data]) == want
    assert run(NDJSONDecoder(), chunked(data, cut)) == want


ND_ATOMS = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"1", b"-", b"e", b"null", b"\\u", b"\n", b"\r\n",
            b" ", b"\xff", "\u00e9".encode(), b"NaN", b"Infinity"]
nd_noise = st.binary(max_size=300) | st.lists(st.sampled_from(ND_ATOMS), max_size=80).map(b"".join)


@FUZZ
@given(nd_noise, cuts, st.sampled_from([16, 4 * 1024 * 1024]))
def test_ndjson_random_bytes_only_ever_raise_protocol_error(data, cut, cap):
    whole = run(NDJSONDecoder(max_line_bytes=cap), [data])
    assert run(NDJSONDecoder(max_line_bytes=cap), chunked(data, cut)) == whole


@pytest.mark.parametrize("line", [b"[" * 100_000, b'{"a": ' + b"1" * 5000 + b"}", b'{"a":' * 3000],
                         ids=["deep-array", "5000-digit-int", "deep-object"])
def test_ndjson_pathological_json_is_a_protocol_error(line):
    """Regression (found writing this file): json.loads raised RecursionError / ValueError (digit limit)."""
    with pytest.raises(ProtocolError):
        NDJSONDecoder().feed(line + b"\n")


def test_sse_empty_read_after_a_trailing_cr_keeps_crlf_one_line_end():
    """Regression (found writing this file): an empty read after '\\r' forgot the pending CR, so the '\\n'
    of a split CRLF became a blank line and dispatched the event early."""
    assert run(SSEDecoder(), [b"data: x\r", b"", b"\ndata: y\n\n"]) == [SSEEvent("x\ny")]
    assert run(SSEDecoder(), [b"event: e\r", b"", b"\ndata: z\r", b"", b"\n\n"]) == [SSEEvent("z", "e")]


# ------------------------------------------------------------------ OpenAI adapter

# Well-typed events: every field has the type the protocol gives it, with arbitrary values.
text = st.none() | st.text(max_size=6)
count = st.none() | st.integers(0, 50)
typed_choice = st.fixed_dictionaries({}, optional={
    "index": st.integers(0, 2), "text": text, "finish_reason": st.none() | st.sampled_from(["stop", "length", ""]),
    "delta": st.fixed_dictionaries({}, optional={"role": st.just("assistant"), "content": text, "reasoning": text,
                                                 "reasoning_content": text,
                                                 "tool_calls": st.lists(st.dictionaries(st.text(max_size=3),
                                                                                        text, max_size=2),
                                                                        max_size=2)})})
typed_obj = st.fixed_dictionaries({}, optional={
    "choices": st.lists(typed_choice, max_size=2), "object": st.sampled_from(["text_completion", "error"]),
    "usage": st.none() | st.fixed_dictionaries({}, optional={"prompt_tokens": count, "completion_tokens": count}),
    "error": st.text(max_size=6) | st.dictionaries(st.just("message"), text),
    "timings": st.dictionaries(st.sampled_from(["prompt_ms", "predicted_ms", "prompt_n", "predicted_n"]),
                               st.floats(0, 1e6) | st.integers(0, 10**6))})
raw_line = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20)
token = st.just(json.dumps({"choices": [{"text": " tok", "finish_reason": None}]}))
typed_event = typed_obj.map(json.dumps) | st.just("[DONE]") | raw_line | token

# Anything JSON-ish: fields of the wrong type too (a dict for "choices", a list for a count ...).
scalars = st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats() | st.text(max_size=8)
anything = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["text", "delta", "content", "finish_reason", "completion_tokens", "prompt_tokens", "choices",
                     "error", "message", "x"]), inner, max_size=4), max_leaves=12)
loose_obj = st.fixed_dictionaries({}, optional={
    "choices": st.lists(typed_choice | anything, max_size=2) | anything, "error": anything, "timings": anything,
    "usage": st.fixed_dictionaries({}, optional={"prompt_tokens": anything, "completion_tokens": anything})
    | anything})
loose_event = loose_obj.map(lambda o: json.dumps(o, allow_nan=True)) | typed_event


def stream_once(events: list[str], api: str, done: bool):
    body = "".join(f"data: {e}\n\n" for e in events + (["[DONE]"] if done else [])).encode()

    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    clock = iter(range(10**9, 10**12, 10**6)).__next__
    with httpx.Client(transport=httpx.MockTransport(handler)) as http:
        client = OpenAIClient(http, "http://fake", "m", api, clock=clock, sleep=lambda s: None)
        try:
            rec = client.stream("", "hi", 4, expected_prompt_tokens=3)
        except MeasurementError:  # ProtocolError is one
            return None
    assert rec.t_end_ns is not None and all(c.tokens >= 1 for c in rec.chunks)
    return rec


@FUZZ
@given(st.lists(typed_event, max_size=6), st.sampled_from(["completions", "chat"]), st.booleans())
def test_openai_stream_on_well_typed_events_lets_only_measurement_errors_escape(events, api, done):
    stream_once(events, api, done)


# Found by the fuzzer below (they used to escape as KeyError/TypeError/ValueError/OverflowError).
KNOWN_BAD = ['{"choices": {"text": null}}', '{"choices": 5}', '{"choices": [], "usage": {"prompt_tokens": []}}',
             '{"choices": [], "usage": {"completion_tokens": "many"}}',
             '{"choices": [], "usage": {"prompt_tokens": Infinity}}']


@pytest.mark.parametrize("event", KNOWN_BAD)
def test_openai_wrongly_typed_fields_are_protocol_errors(event):
    assert stream_once([event], "completions", True) is None  # a MeasurementError (ProtocolError) was raised


@settings(FUZZ, report_multiple_bugs=False)
@given(st.lists(loose_event, max_size=6), st.sampled_from(["completions", "chat"]), st.booleans())
def test_openai_stream_on_any_json_lets_only_measurement_errors_escape(events, api, done):
    stream_once(events, api, done)
