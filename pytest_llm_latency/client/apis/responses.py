"""OpenAI Responses streaming client (``--llm-latency-api openai-responses``: ``POST /v1/responses``;
vLLM, SGLang, llama.cpp's ``llama-server``).  Discovery (``/v1/models``) and status errors are
chat's (``OpenAIClient``); the stream is read by ``named_events``.  The protocol facts it relies on
(docs/servers.md#openai-responses-and-anthropic-messages):

* TTFT is the first ``response.output_text.delta``, ``response.reasoning_text.delta`` (reasoning:
  TTFO waits for the answer) or function call; ``response.created`` comes with the first generated
  token on llama.cpp but is no token, and a constrained answer's first text can come later.
* usage only on ``response.completed`` (``response.incomplete``): ``input_tokens`` (cached
  included), ``input_tokens_details.cached_tokens``, ``output_tokens``,
  ``output_tokens_details.reasoning_tokens``; llama.cpp adds ``timings``.
* ``response.failed`` and ``error`` events are server faults; the stream ends after
  ``response.completed`` with no ``data: [DONE]``.
"""
from __future__ import annotations


from ...core.errors import MeasurementError
from ...core.measure.record import RecordBuilder, RequestRecord
from .named_events import (NamedEventClient, StreamState, as_dict, count, error_message, tail, text_token,
    tool_arguments, tool_start)
from .openai import llamacpp_timings

#: answer text events: the text, and a refusal (the model's answer too, on OpenAI's API)
ANSWER_DELTAS = ("response.output_text.delta", "response.refusal.delta")
#: reasoning text events: the full reasoning (``reasoning_text``, vLLM and llama.cpp) or its summary (OpenAI)
REASONING_DELTAS = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta",
                    "response.reasoning.delta")
#: the events that end a response, with its usage
FINAL = ("response.completed", "response.incomplete")


def responses_input(messages: list[dict]) -> list[dict]:
    """Chat-shaped messages (an agent session's transcript) as Responses input items: messages by
    role, an assistant's ``tool_calls`` as ``function_call`` items, ``tool`` results as
    ``function_call_output`` items."""
    items: list[dict] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m.get("tool_call_id"),
                          "output": m.get("content") or ""})
            continue
        if m.get("content"):
            items.append({"role": role, "content": m["content"]})
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            items.append({"type": "function_call", "call_id": call.get("id"), "name": fn.get("name"),
                          "arguments": fn.get("arguments") or "{}"})
    return items


def responses_tools(tools: list[dict]) -> list[dict]:
    """Chat's ``{type: function, function: {name, description, parameters}}`` → Responses' flat
    ``{type: function, name, description, parameters}``."""
    return [{"type": "function", **(t.get("function") or {})} for t in tools]


class ResponsesClient(NamedEventClient):
    DIALECTS = ("responses",)
    CLOSING = "response.completed"
    #: the API's prompt counter (llama.cpp): ``{model, input}`` → ``{input_tokens}``, the rendered prompt's count
    COUNT_ENDPOINT = ("/v1/responses/input_tokens", lambda text, model: {"model": model, "input": text})

    @property
    def api_name(self) -> str:
        return "openai-responses"

    def request_body(self, system: str, user: str, max_tokens: int, *, stream: bool = True,
                     extra: dict | None = None) -> dict:
        """``max_output_tokens`` is the forced length; ``ignore_eos``/``min_tokens`` make it hold on
        engines that take chat's sampling fields here (llama.cpp, vLLM); the system text is a
        ``system`` input item (every engine renders it as chat's system message)."""
        body: dict = {"model": self.resolve_model(), "stream": stream, "temperature": 0.0,
                      "max_output_tokens": max_tokens, "ignore_eos": True, "min_tokens": max_tokens,
                      "input": ([{"role": "system", "content": system}] if system else []) +
                               [{"role": "user", "content": user}]}
        if extra:
            body.update(extra)
        return body

    def stream_messages(self, messages: list[dict], max_tokens: int, *, tools: list[dict] | None = None,
                        expected_prompt_tokens: int | None = None, extra: dict | None = None) -> RequestRecord:
        """One agent turn: the chat-shaped transcript as input items, the tools in Responses' shape."""
        body_extra = {"input": responses_input(messages), **({"tools": responses_tools(tools)} if tools else {}),
                      **(extra or {})}
        return self._stream(self.base_url + "/v1/responses", "", "", max_tokens, expected_prompt_tokens,
                            body_extra, keep_output=True)

    def _typed(self, b: RecordBuilder, t: int, kind: str, obj: dict, state: StreamState) -> None:
        if kind in ANSWER_DELTAS:
            text_token(b, t, obj.get("delta"), state=state, key=obj.get("item_id"))
        elif kind in REASONING_DELTAS:
            text_token(b, t, obj.get("delta"), reasoning=True, state=state, key=obj.get("item_id"))
        elif kind == "response.output_item.added":
            item = as_dict(obj.get("item"))
            if item.get("type") == "function_call":
                tool_start(b, t, state, item.get("id") or item.get("call_id"), item.get("call_id"), item.get("name"))
                tool_arguments(b, t, state, item.get("id") or item.get("call_id"), item.get("arguments"))
        elif kind == "response.function_call_arguments.delta":
            tool_arguments(b, t, state, obj.get("item_id"), obj.get("delta"))
        elif kind in ("response.output_text.done", "response.function_call_arguments.done",
                      "response.output_item.done"):
            self._done_tail(b, t, kind, obj, state)
        elif kind == "response.failed":
            raise MeasurementError("stream_error", self.redact(
                f"response.failed inside a 200 stream: {error_message(obj.get('response') or {})}"))
        elif kind in FINAL:
            self._final(b, obj, state)

    @staticmethod
    def _done_tail(b: RecordBuilder, t: int, kind: str, obj: dict, state: StreamState) -> None:
        """A closing event whose whole text or arguments extend what streamed: the rest is one more
        token-bearing chunk at this event's time (``named_events.tail``)."""
        if kind == "response.output_text.done":
            text_token(b, t, tail(state, (False, obj.get("item_id")), obj.get("text")), state=state,
                       key=obj.get("item_id"))
            return
        item = as_dict(obj.get("item")) if kind == "response.output_item.done" else \
            {"type": "function_call", "id": obj.get("item_id"), "arguments": obj.get("arguments")}
        if item.get("type") == "function_call":
            key = item.get("id") or item.get("call_id")
            if key in state.calls:
                tool_arguments(b, t, state, key, tail(state, ("args", key), item.get("arguments")))
        elif item.get("type") == "reasoning":
            whole = "".join(c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict))
            text_token(b, t, tail(state, (True, item.get("id")), whole), reasoning=True, state=state,
                       key=item.get("id"))

    def _final(self, b: RecordBuilder, obj: dict, state: StreamState) -> None:
        resp = as_dict(obj.get("response"))
        usage = as_dict(resp.get("usage"))
        inp = usage.get("input_tokens_details")
        out = usage.get("output_tokens_details")
        if isinstance(inp, dict) and count(inp.get("cached_tokens"), "input_tokens_details.cached_tokens", obj) \
                is not None:
            b.record.server_timings["cached_tokens"] = inp["cached_tokens"]
        if isinstance(out, dict) and count(out.get("reasoning_tokens"), "output_tokens_details.reasoning_tokens",
                                           obj) is not None:
            b.record.server_timings["reasoning_tokens"] = out["reasoning_tokens"]  # core.measure.reasoning
        n_out = count(usage.get("output_tokens"), "output_tokens", obj)
        b.usage(count(usage.get("input_tokens"), "input_tokens", obj), n_out)
        timings = obj.get("timings") if isinstance(obj.get("timings"), dict) else resp.get("timings")
        if isinstance(timings, dict):
            b.record.server_timings.update(llamacpp_timings(timings))
        details = as_dict(resp.get("incomplete_details"))
        if details.get("reason") == "max_output_tokens":
            state.finish = "length"  # a call cut by the limit is no call to run
        elif state.calls:
            state.finish = "tool_calls"
        elif n_out is not None and n_out == b.record.expected_output_tokens:
            state.finish = "length"  # llama.cpp says "completed" even when max_output_tokens cut it
        else:
            state.finish = details.get("reason") or "stop"
        state.done = True
