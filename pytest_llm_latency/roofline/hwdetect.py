"""Where the hardware figure comes from: a catalog name, an explicit bandwidth, ``auto`` (local
NVIDIA GPUs from ``nvidia-smi --query-gpu=name,memory.total --format=csv``, the runner injectable
for tests; with tensor parallelism ``tp`` the bandwidth is tp x per-GPU), ``local-cpu`` (this host's
read bandwidth: a numpy probe, one process per core, the best of several runs, cached per host under
the ``probe_cache`` rules, ``Hardware.note`` saying why a figure was not) or ``local-gpu``.

numpy is imported only inside the probe's worker.  See docs/roofline.md#decode-the-memory-bandwidth-gate.
"""
from __future__ import annotations

import csv
import io
import os
import socket
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from . import catalog
from ..core.errors import ConfigError
from ..core.roofline.hardware import Hardware
from .probe_cache import (BLAS_ENV, BUSY_LIMIT, SPREAD_LIMIT, Cached, LoadMeter, cache_dir,  # noqa: F401
                          cached_or_measured, host_key, not_cached_reason, others_busy_share, proc_stat_sample, reap)

NVIDIA_SMI_ARGS = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv"]
Runner = Callable[[Sequence[str]], str]


# ---------------------------------------------------------------------------- nvidia-smi

@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    memory_mib: float | None


def _default_runner(argv: Sequence[str]) -> str:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        raise ConfigError("hardware 'auto': nvidia-smi was not found on PATH (no NVIDIA driver here?); "
                          "name the hardware instead (e.g. hardware: h100-sxm), give mem_bandwidth_gb_s, "
                          "or use hardware: local-cpu") from None
    except subprocess.TimeoutExpired:
        raise ConfigError("hardware 'auto': nvidia-smi did not answer within 30 s; name the hardware instead") from None
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip() or f"exit code {proc.returncode}"
        raise ConfigError(f"hardware 'auto': nvidia-smi failed: {msg}; name the hardware instead")
    return proc.stdout


def parse_nvidia_smi_csv(text: str) -> list[GpuInfo]:
    """Parse ``name, memory.total [MiB]`` CSV (with or without the header and the units)."""
    gpus: list[GpuInfo] = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        cells = [c.strip() for c in row]
        if not cells or not cells[0] or cells[0].lower() == "name":  # blank, or the header: name, memory.total [MiB]
            continue
        if cells[0].lower().startswith(("no devices", "nvidia-smi has failed")):
            raise ConfigError(f"hardware 'auto': nvidia-smi says {','.join(cells)!r}; name the hardware instead")
        try:
            mem: float | None = float(cells[1].split()[0])
        except (IndexError, ValueError):  # no memory column, or "[N/A]"
            mem = None
        gpus.append(GpuInfo(index=len(gpus), name=cells[0], memory_mib=mem))
    return gpus


def nvidia_gpus(runner: Runner | None = None) -> list[GpuInfo]:
    gpus = parse_nvidia_smi_csv((runner or _default_runner)(NVIDIA_SMI_ARGS))
    if not gpus:
        raise ConfigError("hardware 'auto': nvidia-smi listed no GPUs; name the hardware instead")
    return gpus


def detect_nvidia(tp: int = 1, runner: Runner | None = None) -> Hardware:
    """The catalog entry of the local GPUs; with ``tp`` > 1, the group of the first tp GPUs."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ConfigError(f"hardware 'auto': tensor_parallel must be an integer >= 1, got {tp!r}")
    gpus = nvidia_gpus(runner)
    if tp > len(gpus):
        raise ConfigError(f"hardware 'auto': tensor_parallel={tp} but nvidia-smi lists {len(gpus)} GPU(s) "
                          f"({', '.join(g.name for g in gpus)}); lower tensor_parallel or name the hardware")
    names = {g.name for g in gpus[:tp]}
    if len(names) > 1:
        raise ConfigError(f"hardware 'auto': the first {tp} GPUs differ ({', '.join(sorted(names))}); "
                          "name the hardware explicitly")
    name = gpus[0].name
    hw = catalog.find_hardware(name)
    if hw is None:
        close = catalog.close_matches(name, catalog.all_hardware())
        hint = f" Closest catalog entries: {', '.join(close)}." if close else ""
        raise ConfigError(f"hardware 'auto': nvidia-smi reports {name!r}, which is not in the hardware catalog."
                          f"{hint} Name one (hardware: KEY) or give mem_bandwidth_gb_s from the datasheet.")
    others = f"; {len(gpus)} GPUs present" if len(gpus) > 1 else ""
    hw = hw.tensor_parallel(tp)
    return replace(hw, source=f"{hw.source} (nvidia-smi: {name}{others})")


# ---------------------------------------------------------------------------- local CPU probe

MAX_PROBE_PROCESSES = 16  # 256 MiB each: a 64-core affinity mask must not mean 16 GiB


def usable_cores() -> int:
    """Cores this process may run on, capped at ``MAX_PROBE_PROCESSES`` (a container's CPU
    quota can be far below its affinity mask; memory bandwidth saturates long before)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_PROBE_PROCESSES))


Sample = tuple[float, float, float]              # (start, end, bytes read) of one process
Measure = Callable[[int, int], list[list[Sample]]]  # (processes, runs) -> samples of each run


def aggregate_run(samples: Sequence[Sample]) -> float:
    """Aggregate read bandwidth of one run, GB/s: all bytes / (last end - first start)."""
    if not samples:
        raise ValueError("no samples")
    start = min(s[0] for s in samples)
    end = max(s[1] for s in samples)
    if end <= start:
        raise ValueError(f"non-positive wall time {end - start!r}")
    return sum(s[2] for s in samples) / (end - start) / 1e9


def _probe_worker(n_floats: int, passes: int, runs: int, barrier, queue) -> None:
    for var in BLAS_ENV:  # one core per process: no BLAS threads of our own
        os.environ[var] = "1"
    import numpy as np

    a = np.ones(n_floats, dtype=np.float32)   # writes every page: no first-touch cost in the timing
    float(np.dot(a, a))                       # warm-up
    for run in range(runs):
        barrier.wait(timeout=60)
        t0 = time.perf_counter()              # CLOCK_MONOTONIC: comparable across processes
        for _ in range(passes):
            float(np.dot(a, a))               # reads the array once
        t1 = time.perf_counter()
        queue.put((run, t0, t1, float(a.nbytes) * passes))


def numpy_read_measure(processes: int, runs: int, *, array_mb: int = 256, passes: int = 4,
                       timeout_s: float = 120.0) -> list[list[Sample]]:
    """Run ``processes`` processes, each reading its own ``array_mb`` float32 array ``passes``
    times per run, all starting together (a barrier) in each of ``runs`` runs."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # a fresh interpreter: no inherited threads or BLAS pools
    barrier, queue = ctx.Barrier(processes), ctx.Queue()
    n_floats = array_mb * 1024 * 1024 // 4
    saved = {v: os.environ.get(v) for v in BLAS_ENV}
    os.environ.update({v: "1" for v in BLAS_ENV})  # children inherit it before importing numpy
    procs = [ctx.Process(target=_probe_worker, args=(n_floats, passes, runs, barrier, queue), daemon=True)
             for _ in range(processes)]
    try:
        for p in procs:
            p.start()
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old
    results: list[list[Sample]] = [[] for _ in range(runs)]
    try:
        for _ in range(processes * runs):
            run, t0, t1, nbytes = queue.get(timeout=timeout_s)
            results[run].append((t0, t1, nbytes))
    except Exception as exc:
        raise ConfigError(f"hardware 'local-cpu': the bandwidth probe did not finish ({exc!r}); "
                          "give mem_bandwidth_gb_s instead") from None
    finally:
        reap(procs)
    return results


#: Written into each cache entry; entries without it (the old median-of-runs figure) are measured again.
CACHE_METHOD = "best-of-runs"

@dataclass(frozen=True)
class ProbeResult:
    mem_bandwidth_gb_s: float       # the best run: the machine's attainable figure
    runs_gb_s: tuple[float, ...]
    processes: int
    busy_share: float | None = None  # CPU share of other processes while the probe ran

    @property
    def value(self) -> float:
        return self.mem_bandwidth_gb_s

    @property
    def runs_text(self) -> str:
        lo, hi = min(self.runs_gb_s), max(self.runs_gb_s)
        span = f"{hi:.1f} GB/s" if len(self.runs_gb_s) == 1 else f"{lo:.1f}-{hi:.1f} GB/s"
        return f"best of {len(self.runs_gb_s)} run(s), {span}"

    @property
    def not_cached_reason(self) -> str | None:
        """Why this figure must not be cached (a loaded machine), or None."""
        return not_cached_reason(self.runs_gb_s, self.busy_share, "GB/s")

    def as_json(self) -> dict:
        return {"mem_bandwidth_gb_s": self.mem_bandwidth_gb_s, "runs_gb_s": list(self.runs_gb_s),
                "processes": self.processes, "busy_share": self.busy_share, "method": CACHE_METHOD}


def probe_cpu_bandwidth(*, processes: int | None = None, runs: int = 5, measure: Measure | None = None,
                        load: LoadMeter | None = None) -> ProbeResult:
    """Best aggregate read bandwidth over ``runs`` runs of ``processes`` (default: one per core),
    with the CPU share other processes took meanwhile (``load``: default ``/proc/stat``)."""
    procs = processes or usable_cores()
    if runs < 1 or procs < 1:
        raise ConfigError(f"local-cpu probe: runs and processes must be >= 1 (got {runs}, {procs})")
    meter = load or proc_stat_sample
    before = meter()
    per_run = [aggregate_run(samples) for samples in (measure or numpy_read_measure)(procs, runs)]
    busy = others_busy_share(before, meter())
    return ProbeResult(max(per_run), tuple(per_run), procs, busy)


def local_cpu_bandwidth(*, refresh: bool = False, only_if_higher: bool = False, cache: Path | None = None,
                        measure: Measure | None = None, runs: int = 5,
                        load: LoadMeter | None = None) -> Cached:
    """This host's read bandwidth, measured once per host and then cached (``refresh``: measure again;
    ``only_if_higher``: the gate's second look), by the rule of ``probe_cache.cached_or_measured``."""
    return cached_or_measured(
        (cache or cache_dir()) / "cpu_bandwidth.json", field="mem_bandwidth_gb_s", method=CACHE_METHOD,
        measure=lambda: probe_cpu_bandwidth(runs=runs, measure=measure, load=load),
        entry=lambda r: r.as_json(), show=lambda old: f"{old:.1f} GB/s",
        refresh=refresh, only_if_higher=only_if_higher)


def local_cpu_hardware(**kwargs) -> Hardware:
    bw = local_cpu_bandwidth(**kwargs)
    where = (kwargs.get("cache") or cache_dir()) / "cpu_bandwidth.json"
    how = "cached numpy read probe, best of runs" if bw.cached else f"numpy read probe, {bw.runs}"
    return Hardware(key="local-cpu", name=f"local CPU ({socket.gethostname()})", mem_bandwidth_gb_s=bw.value,
                    source=f"{how}, {usable_cores()} processes ({where})", note=bw.note)


# ---------------------------------------------------------------------------- local GPU probe

def local_gpu_hardware(tp: int = 1, runner: Runner | None = None, **probe) -> Hardware:
    """The local GPU's catalog entry (``detect_nvidia``: its datasheet figure, judged by default)
    with its measured read figure beside it (``roofline.gpu_probe``; with ``tp``, device 0's x tp)."""
    from .gpu_probe import CACHE_FILE, local_gpu_bandwidth

    hw = detect_nvidia(tp, runner)
    name = nvidia_gpus(runner)[0].name
    bw = local_gpu_bandwidth(device=0, device_name=name, **probe)
    where = (probe.get("cache") or cache_dir()) / CACHE_FILE
    how = "cached GPU read probe" if bw.cached else f"GPU read probe, {bw.runs}"
    each = f", device 0 x {tp}" if tp > 1 else ""
    note = "; ".join(x for x in (hw.note, bw.note) if x)
    return replace(hw, key="local-gpu", measured_gb_s=bw.value * tp, note=note,
                   source=f"{hw.source}; measured: {how}{each} ({where})")


# ---------------------------------------------------------------------------- one entry point

def resolve_hardware(name: str | None = None, *, mem_bandwidth_gb_s: float | None = None, tp: int = 1,
                     runner: Runner | None = None, where: str = "hardware", **probe_kwargs) -> Hardware:
    """``name`` (catalog key/alias, ``auto``, ``local-cpu``, ``local-gpu``) or an explicit ``mem_bandwidth_gb_s``."""
    if mem_bandwidth_gb_s is not None:
        if name not in (None, ""):
            raise ConfigError(f"{where}: give either a hardware name ({name!r}) or mem_bandwidth_gb_s "
                              f"({mem_bandwidth_gb_s!r}), not both")
        return catalog.custom_hardware(mem_bandwidth_gb_s).tensor_parallel(tp)
    if not name:
        raise ConfigError(f"{where}: no hardware given; name it (e.g. h100-sxm; 'auto' for local NVIDIA GPUs, "
                          f"'local-cpu' to measure this host, 'local-gpu' to measure the local GPU) or give "
                          "mem_bandwidth_gb_s")
    key = str(name).strip().lower()
    if key == "auto":
        return detect_nvidia(tp, runner)
    if key in ("local-gpu", "localgpu", "local_gpu"):
        return local_gpu_hardware(tp, runner, **probe_kwargs)
    if key in ("local-cpu", "localcpu", "local_cpu"):
        if tp != 1:
            raise ConfigError(f"{where}: tensor_parallel does not apply to local-cpu (got {tp})")
        return local_cpu_hardware(**probe_kwargs)
    try:
        return catalog.hardware(str(name)).tensor_parallel(tp)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}; or use 'auto', 'local-cpu', 'local-gpu' or mem_bandwidth_gb_s") from None
