"""Session fixtures for tests against a real llama.cpp ``llama-server``.

Why fixtures and not a pre-started server: the tests must own the server's
life (free port, process group, teardown) exactly like the plugin will for a
YAML ``target: {command: ...}``, so they go through ``TargetPool``.

Policy (deliberate): these fixtures skip **only** when
``LLM_LATENCY_NO_LLAMA=1``.  Otherwise a missing binary is built (CI pre-builds
it, so this is instant there) and a failed build or start fails loudly; a
silently skipped integration tier would hide a broken CI.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.realserver import build_llama_server, make_models

from pytest_llm_latency.targets.managed import ManagedTarget, ManagedTargetError, TargetPool

NO_LLAMA_ENV = "LLM_LATENCY_NO_LLAMA"
STARTUP_TIMEOUT_S = 120.0


def llama_server_command(binary: Path, model: Path, *extra: str) -> list[str]:
    """argv for one single-slot, two-thread llama-server with /metrics on.

    ``{host}``/``{port}`` are filled in by ``ManagedTarget``.  F32 models need
    no ``--no-repack``; quantized ones do on AMX CPUs (pass it in ``extra``).
    """
    # One thread: llama.cpp's threads spin at a barrier every step, so on a 2-core CI runner
    # whose cores are busy with other work, -t 2 ran 10-40x slower (the examples run overran
    # 600 s); -t 1 measured the same tier in 2 minutes with both cores busy.
    return [str(binary), "-m", str(model), "-np", "1", "-t", "1", "--metrics",
            "--host", "{host}", "--port", "{port}", *extra]


@pytest.fixture(scope="session", name="llama_server_command")
def llama_server_command_fixture():
    """The ``llama_server_command`` builder, for tests that manage their own server."""
    return llama_server_command


def _skip_if_disabled() -> None:
    if os.environ.get(NO_LLAMA_ENV) == "1":
        pytest.skip(f"{NO_LLAMA_ENV}=1: real llama-server tests are disabled")


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """Path of the cached llama-server binary, built on first use (~5 min)."""
    _skip_if_disabled()
    try:
        return build_llama_server.build()
    except build_llama_server.BuildError as exc:
        pytest.fail(f"could not build llama-server (set {NO_LLAMA_ENV}=1 to skip the "
                    f"integration tier deliberately):\n{exc}", pytrace=False)


@pytest.fixture(scope="session")
def gguf_models() -> dict[str, Path]:
    """Paths of the generated models (``tiny``, ``membound``), generated once."""
    _skip_if_disabled()
    return make_models.ensure_models()


@pytest.fixture(scope="session")
def llama_pool(tmp_path_factory):
    """One pool per session: identical commands share a server; all stop at the end."""
    pool = TargetPool(tmp_path_factory.mktemp("llama-server-logs"))
    yield pool
    pool.close()


def _pooled(pool: TargetPool, binary: Path, model: Path) -> ManagedTarget:
    try:
        return pool.get(llama_server_command(binary, model), ready_path="/health",
                        startup_timeout_s=STARTUP_TIMEOUT_S)
    except ManagedTargetError as exc:
        pytest.fail(f"llama-server did not start:\n{exc}", pytrace=False)


@pytest.fixture(scope="session")
def llama_tiny(llama_pool, llama_server_binary, gguf_models) -> ManagedTarget:
    """A running llama-server on the 2.5 MB ``tiny`` model."""
    return _pooled(llama_pool, llama_server_binary, gguf_models["tiny"])


@pytest.fixture(scope="session")
def llama_membound(llama_pool, llama_server_binary, gguf_models) -> ManagedTarget:
    """A running llama-server on the 406 MB memory-bound ``membound`` model."""
    return _pooled(llama_pool, llama_server_binary, gguf_models["membound"])
