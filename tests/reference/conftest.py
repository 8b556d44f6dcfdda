from __future__ import annotations

# httpx imports httpcore lazily, and the reference server imports prometheus_client
# lazily.  pytester's in-process runs (tests/plugin) unload every module first imported
# inside them, after which httpx raises raw httpcore exceptions and two copies of a
# module disagree.  Importing them here, at collection time, keeps one copy for the session.
import httpcore  # noqa: F401
import httpx
import prometheus_client  # noqa: F401
import pytest

import pytest_llm_latency.targets.reference.server  # noqa: F401

from pytest_llm_latency.targets.reference.launch import start_reference


@pytest.fixture(scope="module")
def fast_server():
    """Thread-mode server with no modelled delay (protocol tests)."""
    with start_reference("reference://h100-sxm/llama-3.1-8b?time_scale=0&max_model_len=4096",
                         mode="thread") as handle:
        yield handle


@pytest.fixture
def http():
    with httpx.Client(timeout=30.0, headers={"accept-encoding": "identity"}) as client:
        yield client


@pytest.fixture
def serve():
    """``serve(url_query, mode)`` -> handle; every server is stopped after the test."""
    handles = []

    def _start(query: str = "", mode: str = "subprocess", hw_model: str = "h100-sxm/llama-3.1-8b"):
        handle = start_reference(f"reference://{hw_model}?{query}", mode=mode)
        handles.append(handle)
        return handle

    yield _start
    for h in handles:
        h.stop()
