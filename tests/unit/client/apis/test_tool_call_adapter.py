"""The OpenAI adapter's agent turn (``stream_messages``) on a MockTransport with virtual time:
``delta.tool_calls`` fragments with their arrival times, the body cut mid-UTF-8 and mid-JSON
between network reads, and ``usage.prompt_tokens_details.cached_tokens``."""
import json

import httpx
import pytest

from tests.helpers.fakeserver import MS, VirtualTime
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.core.measure import metrics
from pytest_llm_latency.core.measure.tool_calls import assemble

ARGS = json.dumps({"city": "Zürich – 東京", "q": 'a "quoted" \\ word'}, ensure_ascii=False)
FRAGS = [ARGS[i:i + 5] for i in range(0, len(ARGS), 5)]  # cut mid-string, mid-escape


def sse_events() -> list[tuple[float, bytes]]:
    """(arrival ms, event bytes): name at 100 ms, then one fragment every 10 ms (vLLM's shape)."""
    def ev(obj):
        return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()
    out = [(100.0, ev({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]},
        "finish_reason": None}]}))]
    for i, f in enumerate(FRAGS, 1):
        finish = "tool_calls" if i == len(FRAGS) else None
        out.append((100.0 + 10 * i, ev({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": f}}]}, "finish_reason": finish}]})))
    t = out[-1][0]
    out.append((t, ev({"choices": [], "usage": {"prompt_tokens": 500, "completion_tokens": len(FRAGS) + 1,
                                                "prompt_tokens_details": {"cached_tokens": 448}}})))
    out.append((t, b"data: [DONE]\n\n"))
    return out


def reads(events, vt: VirtualTime, cut: int):
    """The events' bytes, re-cut so every read ends ``cut`` bytes into the next event (inside
    a JSON string, often inside a multi-byte character); each read arrives at its last byte's time."""
    t0 = vt.now
    pending = b""
    for i, (ms, data) in enumerate(events):
        pending += data
        nxt = events[i + 1][1] if i + 1 < len(events) else b""
        head, pending_next = nxt[:cut], nxt[cut:]
        vt.now = t0 + int(ms * MS)
        yield pending + head
        pending = b""
        if i + 1 < len(events):
            events[i + 1] = (events[i + 1][0], pending_next)


def make_client(cut: int, seen: list):
    vt = VirtualTime()

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=reads(sse_events(), vt, cut))
    http = make_http_client(transport=httpx.MockTransport(handler))
    return OpenAIClient(http, "http://fake", "m", "chat", clock=vt, sleep=lambda s: None)


CUTS = [0, 1, 7, 41, 77, 98, 99, 100, 101, 104, 105]  # 98..105: inside a 2- or 3-byte character


def test_some_reads_end_inside_a_multibyte_character():
    inside = 0
    for cut in CUTS:
        chunks = list(reads(sse_events(), VirtualTime(), cut))
        inside += sum(1 for a, b in zip(chunks, chunks[1:]) if b and (b[0] & 0xC0) == 0x80)
        assert b"".join(chunks) == b"".join(e for _, e in sse_events())  # same bytes, other boundaries
    assert inside >= 2  # the parametrized cuts below do split UTF-8 characters between reads


@pytest.mark.parametrize("cut", CUTS)
def test_tool_call_times_and_arguments_survive_any_read_boundary(cut):
    seen: list = []
    c = make_client(cut, seen)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    rec = c.stream_messages(msgs, 16, tools=tools)
    body = seen[0]
    assert body["messages"] == msgs and body["tools"] == tools and body["max_tokens"] == 16
    calls = assemble(rec.tool_deltas)
    (call,) = calls.ordered()
    assert (call.id, call.name, call.arguments) == ("call_9", "get_weather", ARGS)
    assert (calls.t_first_ns - rec.t_send_ns) / 1e6 == pytest.approx(100.0)
    assert (calls.t_complete_ns - rec.t_send_ns) / 1e6 == pytest.approx(100.0 + 10 * len(FRAGS))
    assert metrics.ttft_ms(rec) == pytest.approx(100.0)  # the first tool-call delta is the first token
    assert rec.server_timings["cached_tokens"] == 448 and rec.prompt_tokens == 500
    assert rec.content_parts == []


def test_plain_stream_keeps_no_text():
    seen: list = []
    c = make_client(0, seen)
    rec = c.stream("s", "u", 16)
    assert rec.content_parts is None and rec.tool_deltas  # the deltas are recorded; text is not kept
