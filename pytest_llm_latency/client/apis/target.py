"""A target (URL, API dialect, model) and the protocol client for it: ``make_client``.  Apart from
``client.runner`` (which re-exports both) so that a worker process (``client/placement/processes/workers.py``)
builds its
client without importing the drivers."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import httpx

from ...core.errors import ConfigError
from ...core.measure.record import Clock
from .. import APIS
from ..transport.clock import MEASUREMENT_CLOCK
from ..transport.http import Redactor, Timeouts
from .messages import MessagesClient
from .ollama import OllamaClient
from .openai import OpenAIClient
from .responses import ResponsesClient


@dataclass(frozen=True)
class Target:
    url: str
    api: str = "openai-completions"
    model: str | None = None

    def __post_init__(self):
        if self.api not in APIS:
            raise ConfigError(f"api {self.api!r} is not supported -- use one of {', '.join(APIS)}")


def make_client(target: Target, http: httpx.Client, *, clock: Clock = MEASUREMENT_CLOCK,
                timeouts: Timeouts = Timeouts(), redact: Redactor = Redactor(),
                sleep: Callable[[float], None] = time.sleep) -> OpenAIClient | OllamaClient:
    kw: dict[str, Any] = dict(clock=clock, timeouts=timeouts, redact=redact, sleep=sleep)
    if target.api in ("ollama", "ollama-chat"):
        return OllamaClient(http, target.url, target.model, "chat" if target.api == "ollama-chat" else "generate", **kw)
    if target.api == "openai-responses":
        return ResponsesClient(http, target.url, target.model, "responses", **kw)
    if target.api == "anthropic-messages":
        return MessagesClient(http, target.url, target.model, "messages", **kw)
    return OpenAIClient(http, target.url, target.model, "chat" if target.api == "openai-chat" else "completions", **kw)
