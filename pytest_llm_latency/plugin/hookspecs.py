"""Hooks other plugins or a conftest can implement (the transport seam).

``pytest_llm_latency_transport`` returns an ``httpx.BaseTransport`` to use for
every target (e.g. ``httpx.MockTransport`` or respx's), like pytest_httpx does;
``pytest_llm_latency_clock`` returns a ``Clock``: a ``Callable[[], int]`` (ns).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pytest

if TYPE_CHECKING:
    import httpx

#: A monotonic clock in integer nanoseconds (by default ``time.monotonic_ns``, CLOCK_MONOTONIC:
#: ``client.transport.clock.MEASUREMENT_CLOCK``).
Clock = Callable[[], int]


@pytest.hookspec(firstresult=True)
def pytest_llm_latency_transport(config: pytest.Config, url: str) -> httpx.BaseTransport | None:
    """Return an httpx transport for requests to ``url``, or None for the default."""


@pytest.hookspec(firstresult=True)
def pytest_llm_latency_clock(config: pytest.Config) -> Clock | None:
    """Return a ``Callable[[], int]`` ns clock, or None for ``time.monotonic_ns`` (the measurement clock)."""
