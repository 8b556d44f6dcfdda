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
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.realserver import build_llama_server, make_models

from pytest_llm_latency.targets.managed import ManagedTarget, ManagedTargetError, TargetPool

NO_LLAMA_ENV = "LLM_LATENCY_NO_LLAMA"
STARTUP_TIMEOUT_S = 120.0
#: tokens the draft model proposes per engine step (``--spec-draft-n-max``)
SPEC_DRAFT_MAX = 4


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


def llama_spec_command(binary: Path, target: Path, draft: Path, draft_max: int = SPEC_DRAFT_MAX,
                       *extra: str) -> list[str]:
    """argv for ``llama_server_command`` with a draft model: speculative decoding of up to
    ``draft_max`` tokens per step, drafted whatever the draft's confidence.

    This build needs ``--spec-type draft-simple``: without it a plain Llama draft is loaded and
    never used (no ``timings.draft_n``).  ``--spec-draft-p-min 0`` (its default here) is given
    so that another default cannot switch drafting off; the draft runs on the target's one
    thread (``-td`` defaults to ``-t``)."""
    return llama_server_command(binary, target, "-md", str(draft), "--spec-type", "draft-simple",
                                "--spec-draft-n-max", str(draft_max), "--spec-draft-p-min", "0", *extra)


@pytest.fixture(scope="session", name="llama_spec_command")
def llama_spec_command_fixture():
    """The ``llama_spec_command`` builder (e.g. for an A/B SLO's ``command:`` lists)."""
    return llama_spec_command


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
    """Paths of the generated models (``make_models.SPECS``: ``tiny``, ``membound`` and the
    speculative-decoding ``spec-*`` ones), generated once."""
    _skip_if_disabled()
    return make_models.ensure_models(names=list(make_models.SPECS))


@pytest.fixture(scope="session")
def attention_models() -> dict[str, Path]:
    """Paths of the other architectures' models (``attention_models.ATTENTION_SPECS``: a sliding-window
    Gemma 3, a 64-expert Qwen3-MoE, a DeepSeek MLA model), generated once."""
    _skip_if_disabled()
    return make_models.ensure_models(names=list(make_models.ATTENTION_SPECS))


@pytest.fixture(scope="session")
def llama_pool(tmp_path_factory):
    """One pool per session: identical commands share a server; all stop at the end."""
    pool = TargetPool(tmp_path_factory.mktemp("llama-server-logs"))
    yield pool
    pool.close()


def _pooled(pool: TargetPool, binary: Path, model: Path, command: list[str] | None = None) -> ManagedTarget:
    try:
        return pool.get(command or llama_server_command(binary, model), ready_path="/health",
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


@pytest.fixture(scope="session")
def llama_attention(llama_pool, llama_server_binary, attention_models):
    """``llama_attention(name)``: a running llama-server on ``attention_models[name]`` (pooled:
    started once per session, on first use)."""
    return lambda name: _pooled(llama_pool, llama_server_binary, attention_models[name])


@dataclass(frozen=True)
class SpecServers:
    """Two running llama-servers with speculative decoding on the same target (``spec-target``),
    differing only in the draft: ``matched`` (``spec-draft``: predicts the target's tokens, every
    draft is accepted) and ``unrelated`` (``spec-draft-unrelated``: same shape, another seed)."""
    matched: str        # base URL
    unrelated: str      # base URL
    draft_max: int      # --spec-draft-n-max of both
    target_gguf: Path
    draft_gguf: Path
    unrelated_gguf: Path


@pytest.fixture(scope="session")
def llama_spec_servers(llama_pool, llama_server_binary, gguf_models) -> SpecServers:
    """The matched and the unrelated speculative-decoding servers (``SpecServers``)."""
    urls = {}
    for pair, (target, draft) in make_models.SPEC_PAIRS.items():
        cmd = llama_spec_command(llama_server_binary, gguf_models[target], gguf_models[draft])
        urls[pair] = _pooled(llama_pool, llama_server_binary, gguf_models[target], cmd).url
    (target, draft), (_, unrelated) = make_models.SPEC_PAIRS["matched"], make_models.SPEC_PAIRS["unrelated"]
    return SpecServers(urls["matched"], urls["unrelated"], SPEC_DRAFT_MAX, gguf_models[target],
                       gguf_models[draft], gguf_models[unrelated])
