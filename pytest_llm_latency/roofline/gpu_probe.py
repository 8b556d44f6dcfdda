"""``hardware: local-gpu``: what the local GPU actually reads, beside its datasheet figure.

The probe runs in a subprocess (``gpu_probe_worker``: PyTorch, else CuPy, imported there only, so
its CUDA context is freed and a hung driver is bounded by ``TIMEOUT_S``).  Its buffer is at most
``MAX_BUFFER_BYTES``, at most ``FREE_SHARE`` of the free memory and at least ``L2_MULTIPLE`` x the L2
cache (below that it would measure the cache); the figure is the best run, cached per host and
device under the ``probe_cache`` rules.  See docs/roofline.md#calibrating-your-floor-on-your-gpu.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.errors import ConfigError
from .probe_cache import Cached, cache_dir, cached_or_measured, host_key, not_cached_reason

MAX_BUFFER_BYTES = 8 * 1024**3
FREE_SHARE = 0.5
L2_MULTIPLE = 16
MIN_BUFFER_BYTES = 256 * 1024**2
TIMEOUT_S = 180.0
CACHE_FILE = "gpu_bandwidth.json"
CACHE_METHOD = "sum-best-of-runs"
EXTRA = "pip install 'pytest-llm-latency[gpu]' (PyTorch), or CuPy (cupy-cuda12x)"

#: (device, runs) -> the worker's JSON: {"backend", "device_name", "buffer_bytes", "read_runs_gb_s", "copy_gb_s"}
GpuMeasure = Callable[[int, int], dict]


@dataclass(frozen=True)
class GpuProbeResult:
    read_gb_s: float                 # the best run's read-only figure
    runs_gb_s: tuple[float, ...]
    copy_gb_s: float | None          # a device-to-device copy: 2 x bytes / time
    device_name: str
    device: int
    buffer_bytes: int
    backend: str                     # "torch" | "cupy"

    @property
    def value(self) -> float:
        return self.read_gb_s

    @property
    def runs_text(self) -> str:
        lo, hi = min(self.runs_gb_s), max(self.runs_gb_s)
        return f"best of {len(self.runs_gb_s)} run(s), {lo:,.0f}-{hi:,.0f} GB/s over {self.buffer_bytes / 1e9:.2f} GB"

    @property
    def not_cached_reason(self) -> str | None:
        return not_cached_reason(self.runs_gb_s, None, "GB/s")

    def as_json(self) -> dict:
        return {"read_gb_s": self.read_gb_s, "runs_gb_s": list(self.runs_gb_s), "copy_gb_s": self.copy_gb_s,
                "device_name": self.device_name, "buffer_bytes": self.buffer_bytes, "backend": self.backend}


def worker_measure(device: int, runs: int) -> dict:
    """Run the probe worker in a fresh interpreter, bounded by ``TIMEOUT_S``."""
    argv = [sys.executable, "-m", "pytest_llm_latency.roofline.gpu_probe_worker", "--device", str(device),
            "--runs", str(runs)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"hardware 'local-gpu': the GPU bandwidth probe did not finish within {TIMEOUT_S:g} s; "
                          "name the hardware (hardware: auto) instead") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        said = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise ConfigError(f"hardware 'local-gpu': the GPU bandwidth probe failed: {said[0]}")
    if data.get("error"):
        raise ConfigError(f"hardware 'local-gpu': {data['error']}")
    return data


def probe_gpu_bandwidth(*, device: int = 0, runs: int = 5, measure: GpuMeasure | None = None) -> GpuProbeResult:
    """The local GPU's read bandwidth, best of ``runs`` (``measure``: injectable; default the worker)."""
    if runs < 1 or device < 0:
        raise ConfigError(f"local-gpu probe: runs must be >= 1 and device >= 0 (got {runs}, {device})")
    data = (measure or worker_measure)(device, runs)
    reads = tuple(float(x) for x in data.get("read_runs_gb_s") or ())
    if not reads or not all(0 < x < float("inf") for x in reads):
        raise ConfigError(f"hardware 'local-gpu': the probe reported no usable read figure ({data!r})")
    copy = data.get("copy_gb_s")
    return GpuProbeResult(max(reads), reads, float(copy) if copy else None, str(data.get("device_name", "GPU")),
                          device, int(data.get("buffer_bytes", 0)), str(data.get("backend", "?")))


def local_gpu_bandwidth(*, device: int = 0, device_name: str = "", refresh: bool = False,
                        only_if_higher: bool = False, cache: Path | None = None, measure: GpuMeasure | None = None,
                        runs: int = 5) -> Cached:
    """The GPU's read figure, measured once per host and device (name + index) and then cached."""
    return cached_or_measured(
        (cache or cache_dir()) / CACHE_FILE, field="read_gb_s", method=CACHE_METHOD,
        measure=lambda: probe_gpu_bandwidth(device=device, runs=runs, measure=measure),
        entry=lambda r: r.as_json(), show=lambda old: f"{old:,.0f} GB/s", refresh=refresh,
        only_if_higher=only_if_higher, key=f"{host_key()}-gpu{device}-{device_name or 'unnamed'}")
