"""The reference server's timing acceptance tests measure through the plugin's own client
(``OpenAIClient.stream`` → ``RequestRecord`` → ``core.measure.metrics``).  This adapts that to the
small interface the tests use (``ttft_s``, ``tpot_s()``, ``itls_s()``, ``tokens``,
``chunks``).  The wire-shape tests keep the raw ``refclient`` on purpose."""
from __future__ import annotations

import httpx

from pytest_llm_latency.client.transport.http import Timeouts
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.core.measure import metrics
from pytest_llm_latency.core.measure.record import RequestRecord

_MODELS: dict[str, str] = {}


class Timed:
    def __init__(self, rec: RequestRecord):
        self.rec = rec
        self.t_send = rec.t_send_ns
        self.chunks = [(c.t_ns, c.tokens) for c in rec.chunks]
        self.done = rec.t_end_ns is not None  # the client raises on a stream without [DONE]
        self.finish_reason = rec.finish_reason

    @property
    def tokens(self) -> int:
        return self.rec.output_tokens

    @property
    def ttft_s(self) -> float:
        return metrics.ttft_ms(self.rec) / 1e3

    def tpot_s(self) -> float:
        return metrics.tpot_ms(self.rec) / 1e3

    def itls_s(self) -> list[float]:
        return [x / 1e3 for x in metrics.itl_ms(self.rec)]


def stream_openai(http: httpx.Client, url: str, body: dict, *, path: str = "/v1/completions",
                  timeout: float = 60.0) -> Timed:
    """One forced-length streamed request (``ignore_eos``/``min_tokens`` as the plugin sends them)."""
    api = "chat" if path.endswith("/chat/completions") else "completions"
    if url not in _MODELS:
        _MODELS[url] = http.get(url + "/v1/models", timeout=10).json()["data"][0]["id"]
    client = OpenAIClient(http, url, body.get("model") or _MODELS[url], api,
                          timeouts=Timeouts(connect_s=10, idle_s=timeout, total_s=4 * timeout))
    if "messages" in body:
        msgs = body["messages"]
        system = next((m["content"] for m in msgs if m["role"] == "system"), "")
        user = msgs[-1]["content"]
    else:
        system, user = "", body["prompt"]
    extra = {k: v for k, v in body.items() if k not in ("prompt", "messages", "max_tokens", "ignore_eos", "model",
                                                          "stream")}
    return Timed(client.stream(system, user, body["max_tokens"], extra=extra or None))
