"""The GPU tier: the project's own PyTorch decode engine (``engine.py``) served over HTTP
(``server.py``) and measured through the plugin as a user would.

Skip policy: every test here skips, saying why, unless ``import torch`` works and
``torch.cuda.is_available()``; so it skips in CI (no torch, no GPU) and on any machine without
a CUDA device.  ``run_tier.sh`` is the one command for a machine with one.

``LLM_LATENCY_GPU_TIER_CPU=1`` (with torch installed) is for checking the engine and the
server's protocol without a GPU: the engine fixtures then serve a tiny two-layer model on the
CPU in eager fp32, whatever mode and dtype a test asks for, and the tests whose figures mean
something only on a GPU skip, saying so.

One engine process holds the GPU at a time (``EngineServers.get`` stops the previous one), so
an 8B bf16 (16 GB), its eager twin and its fp32 twin (32 GB) never share the memory.
``LLM_LATENCY_GPU_TIER_LAYERS=N`` serves the 8B's layer shapes with N layers (faster start).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import httpx
import pytest

from pytest_llm_latency.targets.managed import ManagedTargetError, TargetPool

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CPU_ENV = "LLM_LATENCY_GPU_TIER_CPU"
LAYERS_ENV = "LLM_LATENCY_GPU_TIER_LAYERS"
#: the 8B's start: torch import, 16-32 GB of random weights, CUDA-graph capture, two warm-up requests
STARTUP_TIMEOUT_S = 300.0
#: KV cache positions: the tests' 512-token prompts + 64 output tokens, and the plugin's probes
MAX_LEN = 1024


@lru_cache(maxsize=1)
def torch_state() -> tuple[str | None, str]:
    """(``"cuda"``, ``"cpu"`` or None, why): where the tier's engines run, or why nowhere."""
    if importlib.util.find_spec("torch") is None:
        return None, ("PyTorch is not installed: the GPU tier needs torch and a CUDA device (pip install -e "
                      "'.[test,gpu]' on a GPU machine, then tests/gpu/run_tier.sh); CI has neither")
    try:
        import torch
    except Exception as exc:  # a broken install (missing CUDA libraries): a reason to skip
        return None, f"import torch failed ({type(exc).__name__}: {exc}): the GPU tier needs a working PyTorch"
    if torch.cuda.is_available():
        return "cuda", f"CUDA device: {torch.cuda.get_device_name(0)}"
    if os.environ.get(CPU_ENV) == "1":
        return "cpu", f"{CPU_ENV}=1: the tiny model on the CPU (protocol self-check)"
    return None, (f"PyTorch {torch.__version__} sees no CUDA device: the GPU tier runs only where one is "
                  f"(set {CPU_ENV}=1 to check the engine and server on the CPU)")


@pytest.hookimpl(tryfirst=True)  # before ``-m gpu`` selects on the marker
def pytest_collection_modifyitems(config, items):
    """Every item of this folder is marked ``gpu`` and skips, saying why, where no engine can run
    (this hook sees the whole session's items: only this folder's are touched, and torch is
    looked for only then)."""
    ours = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    device, why = torch_state() if ours else ("", "")
    for item in ours:
        item.add_marker(pytest.mark.gpu)
        if device is None:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def gpu_device() -> str:
    device, why = torch_state()
    if device is None:
        pytest.skip(why)
    return device


@pytest.fixture
def needs_cuda(gpu_device) -> None:
    """Skip on the CPU self-check: the test's figures (bandwidth, efficiency) mean something only on a GPU."""
    if gpu_device != "cuda":
        pytest.skip(f"{CPU_ENV}=1 runs the tiny model on the CPU: this test's figures need a CUDA device")


@dataclass(frozen=True)
class EngineServer:
    """A running engine server: its URL, what it serves and the config.json of its exact shapes."""
    url: str
    model: str
    mode: str
    dtype: str
    config_path: Path      # the engine's own config (layers override included), for roofline.config

    def stats(self) -> dict:
        """``/engine/stats``: the engine and every request it served, with its own step time."""
        with httpx.Client(trust_env=False, timeout=30.0) as c:
            r = c.get(self.url + "/engine/stats")
        r.raise_for_status()
        return r.json()

    def served(self) -> list[dict]:
        return self.stats()["served"]


class EngineServers:
    """Starts ``server.py`` processes through the plugin's own ``TargetPool``, one at a time."""

    def __init__(self, pool: TargetPool, device: str, workdir: Path):
        self.pool, self.device, self.workdir = pool, device, workdir
        self.current: tuple[list[str], EngineServer] | None = None

    def command(self, mode: str, dtype: str) -> list[str]:
        cmd = [sys.executable, str(HERE / "server.py"), "--host", "{host}", "--port", "{port}",
               "--max-len", str(MAX_LEN), "--seed", "0"]
        if self.device == "cpu":
            return cmd + ["--device", "cpu", "--tiny", "--mode", "eager", "--dtype", "fp32"]
        layers = os.environ.get(LAYERS_ENV)
        return cmd + ["--device", "cuda", "--mode", mode, "--dtype", dtype] + (["--layers", layers] if layers else [])

    def get(self, mode: str, dtype: str) -> EngineServer:
        cmd = self.command(mode, dtype)
        if self.current is not None and self.current[0] == cmd:
            return self.current[1]
        if self.current is not None:  # one engine on the GPU at a time
            self.pool.release(self.current[0], ready_path="/health", env=self._env())
            self.current = None
        try:
            target = self.pool.get(cmd, ready_path="/health", startup_timeout_s=STARTUP_TIMEOUT_S, env=self._env())
        except ManagedTargetError as exc:
            pytest.fail(f"the {mode}/{dtype} engine server did not start:\n{exc}", pytrace=False)
        with httpx.Client(trust_env=False, timeout=30.0) as c:
            info = c.get(target.url + "/engine/stats").json()["engine"]
            model = c.get(target.url + "/v1/models").json()["data"][0]["id"]
        config_path = self.workdir / f"config-{info['mode']}-{info['dtype']}.json"
        config_path.write_text(json.dumps(info["config"], indent=1))
        server = EngineServer(target.url, model, info["mode"], info["dtype"], config_path)
        self.current = (cmd, server)
        return server

    @staticmethod
    def _env() -> dict[str, str]:
        # server.py imports the plugin's tokenizer: the repository first, installed or not
        path = os.environ.get("PYTHONPATH")
        return {"PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def engine_servers(gpu_device, tmp_path_factory):
    pool = TargetPool(tmp_path_factory.mktemp("gpu-engine-logs"))
    yield EngineServers(pool, gpu_device, tmp_path_factory.mktemp("gpu-engine-configs"))
    pool.close()


@pytest.fixture
def graphs_bf16(engine_servers) -> EngineServer:
    """The 8B (or its ``LLM_LATENCY_GPU_TIER_LAYERS`` cut) in bf16, decode steps replayed from a CUDA graph."""
    return engine_servers.get("graphs", "bf16")


@pytest.fixture
def eager_bf16(engine_servers) -> EngineServer:
    """The same model and weights, every decode kernel launched from Python each step."""
    return engine_servers.get("eager", "bf16")


@pytest.fixture
def graphs_fp32(engine_servers) -> EngineServer:
    """The same model in fp32 (twice the bytes per step), CUDA graphs."""
    return engine_servers.get("graphs", "fp32")


@pytest.fixture(scope="session")
def probe_cache(tmp_path_factory) -> Path:
    """An ``LLM_LATENCY_CACHE`` of the tier's own: probed once per session, nothing left in ~/.cache."""
    return tmp_path_factory.mktemp("llm-latency-cache")
