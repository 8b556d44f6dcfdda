"""Hooks other plugins or a conftest can implement (the transport seam).

``pytest_llm_latency_transport`` returns an ``httpx.BaseTransport`` to use for
every target (e.g. ``httpx.MockTransport`` or respx's), like pytest_httpx does;
``pytest_llm_latency_clock`` returns a ``Callable[[], int]`` (ns) clock.
"""
import pytest

@pytest.hookspec(firstresult=True)
def pytest_llm_latency_transport(config, url):
    """Return an httpx transport for requests to ``url``, or None for the default."""


@pytest.hookspec(firstresult=True)
def pytest_llm_latency_clock(config):
    """Return a ``Callable[[], int]`` ns clock, or None for ``time.perf_counter_ns``."""
