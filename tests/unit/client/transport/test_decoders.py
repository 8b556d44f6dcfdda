"""SSE / NDJSON decoders: every split point of the byte stream gives the same events."""
import pytest

from pytest_llm_latency.client.transport.ndjson import NDJSONDecoder
from pytest_llm_latency.client.transport.sse import SSEDecoder, SSEEvent
from pytest_llm_latency.core.errors import ProtocolError

STREAM = ('data: {"choices":[{"text":"h\u00e9llo \u4e16\u754c \U0001F600"}]}\r\n\r\n'
          ': ping\n\n'
          'event: message\ndata: {"a":\ndata: 1}\n\n'
          'data: [DONE]\r\n\r\n').encode("utf-8")
WANT = [SSEEvent('{"choices":[{"text":"h\u00e9llo \u4e16\u754c \U0001F600"}]}'),
        SSEEvent('{"a":\n1}', event="message"), SSEEvent("[DONE]")]


def decode(parts):
    d = SSEDecoder()
    out = []
    for p in parts:
        out += d.feed(p)
    return out + d.close()


def test_sse_whole():
    assert decode([STREAM]) == WANT


@pytest.mark.parametrize("i", range(len(STREAM) + 1))
def test_sse_split_at_every_byte_boundary(i):
    assert decode([STREAM[:i], STREAM[i:]]) == WANT


def test_sse_one_byte_at_a_time_and_bare_cr_line_endings():
    assert decode([bytes([b]) for b in STREAM]) == WANT
    cr = b'data: x\r\rdata: y\r\r'
    assert decode([bytes([b]) for b in cr]) == [SSEEvent("x"), SSEEvent("y")]


def test_sse_comment_only_stream_has_no_events():
    assert decode([b": keep-alive\n\n: ping\n\n"]) == []


def test_sse_nonstandard_error_field():
    assert decode([b"error: model crashed\n\n"]) == [SSEEvent("", error="model crashed")]


def test_sse_line_cap():
    d = SSEDecoder(max_line_bytes=100)
    with pytest.raises(ProtocolError, match="cap"):
        d.feed(b"data: " + b"x" * 200)
    with pytest.raises(ProtocolError, match="cap"):
        SSEDecoder(max_line_bytes=100).feed(b"data: " + b"x" * 200 + b"\n\n")


def test_sse_invalid_utf8_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="UTF-8"):
        SSEDecoder().feed(b"data: \xff\xfe\n\n")


ND = '{"response":"\u00e9\u4e16","done":false}\r\n\n{"done":true,"eval_count":3}\n'.encode("utf-8")


@pytest.mark.parametrize("i", range(len(ND) + 1))
def test_ndjson_split_at_every_byte_boundary(i):
    d = NDJSONDecoder()
    out = d.feed(ND[:i]) + d.feed(ND[i:]) + d.close()
    assert out == [{"response": "\u00e9\u4e16", "done": False}, {"done": True, "eval_count": 3}]


def test_ndjson_malformed_and_capped():
    with pytest.raises(ProtocolError, match="malformed JSON"):
        NDJSONDecoder().feed(b'{"a": \n')
    with pytest.raises(ProtocolError, match="not a JSON object"):
        NDJSONDecoder().feed(b'[1]\n')
    with pytest.raises(ProtocolError, match="cap"):
        NDJSONDecoder(max_line_bytes=10).feed(b'{"a": "xxxxxxxxxxxxxxxx"')
