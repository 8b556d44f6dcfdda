"""Peak FLOP/s for the prefill roofline: the catalog's figure, an explicit override, or, for
``local-cpu``, numpy float32 matmuls on all usable cores (one single-threaded process per core),
the best of several runs, cached in ``cpu_flops.json`` under the ``probe_cache`` rules.  numpy is
imported only in the probe's child process.  See docs/roofline.md#mfu.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.errors import ConfigError
from ..core.roofline.hardware import Hardware
from ..core.roofline.prefill import Peak
from .probe_cache import (BLAS_ENV, Cached, LoadMeter, cache_dir, cached_or_measured, not_cached_reason,
                          others_busy_share, proc_stat_sample, reap)

CACHE_FILE = "cpu_flops.json"
CACHE_METHOD = "best-of-runs-matmul-f32"
MATMUL_SIZE = 1024        # 2 x 1024^3 = 2.1 GFLOP per matmul
MATMUL_REPEATS = 4        # per run

Clock = Callable[[], int]                 # ns
Work = Callable[[], float]                # does one run's matmuls, returns the FLOPs done
Sample = tuple[int, int, int, float]      # (run, start ns, end ns, FLOPs) of one process
Measure = Callable[[int], "list[float]"]  # runs -> TFLOP/s of each run


def run_worker(work: Work, runs: int, put: Callable[[Sample], None], *, clock: Clock = time.perf_counter_ns,
               barrier: Callable[[], object] = lambda: None) -> None:
    """One process's part of the probe: ``runs`` times, wait for the others, then time ``work``."""
    for run in range(runs):
        barrier()
        t0 = clock()
        flops = work()
        put((run, t0, clock(), flops))


def aggregate(samples: list[Sample], runs: int) -> list[float]:
    """TFLOP/s of each run: every process's FLOPs / (last end - first start) of that run."""
    out = []
    for run in range(runs):
        mine = [s for s in samples if s[0] == run]
        if not mine:
            raise ConfigError(f"hardware 'local-cpu': the FLOPS probe's run {run} reported nothing; "
                              "give roofline.peak_tflops instead")
        wall = max(s[2] for s in mine) - min(s[1] for s in mine)
        flops = sum(s[3] for s in mine)
        if not wall > 0 or not flops > 0:
            raise ConfigError(f"hardware 'local-cpu': the FLOPS probe timed {flops!r} FLOPs in {wall!r} ns; "
                              "give roofline.peak_tflops instead")
        out.append(flops / (wall / 1e9) / 1e12)
    return out


def _child(size: int, repeats: int, runs: int, barrier, queue) -> None:
    for var in BLAS_ENV:  # one core per process: BLAS threads spin at barriers and stall on a busy core
        os.environ[var] = "1"
    try:
        import numpy as np

        rng = np.random.default_rng(0)
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        a @ b  # warm-up: pages touched, kernels chosen

        def work() -> float:
            for _ in range(repeats):
                a @ b
            return 2.0 * size ** 3 * repeats

        run_worker(work, runs, queue.put, barrier=lambda: barrier.wait(timeout=60))
    except Exception as exc:  # reported by the parent
        queue.put(("error", repr(exc), 0, 0.0))


def numpy_matmul_runs(runs: int, *, processes: int | None = None, timeout_s: float = 120.0) -> list[float]:
    """One single-threaded numpy process per usable core, all starting each run together."""
    import multiprocessing as mp

    from .hwdetect import usable_cores

    n = processes or usable_cores()
    ctx = mp.get_context("spawn")  # a fresh interpreter: BLAS reads its thread count at import
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(MATMUL_SIZE, MATMUL_REPEATS, runs, barrier, queue), daemon=True)
             for _ in range(n)]
    samples: list[Sample] = []
    try:
        for p in procs:
            p.start()
        for _ in range(n * runs):
            sample = queue.get(timeout=timeout_s)
            if sample[0] == "error":
                raise ConfigError(f"hardware 'local-cpu': the FLOPS probe failed ({sample[1]}); "
                                  "give roofline.peak_tflops")
            samples.append(sample)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"hardware 'local-cpu': the FLOPS probe did not finish ({exc!r}); "
                          "give roofline.peak_tflops instead") from None
    finally:
        reap(procs)
    return aggregate(samples, runs)


@dataclass(frozen=True)
class FlopsProbe:
    tflops: float                    # the best run
    runs_tflops: tuple[float, ...]
    busy_share: float | None = None

    @property
    def value(self) -> float:
        return self.tflops

    @property
    def not_cached_reason(self) -> str | None:
        return not_cached_reason([x * 1e3 for x in self.runs_tflops], self.busy_share, "GFLOP/s")

    @property
    def runs_text(self) -> str:
        lo, hi = min(self.runs_tflops) * 1e3, max(self.runs_tflops) * 1e3
        return f"best of {len(self.runs_tflops)} run(s), {lo:.1f}-{hi:.1f} GFLOP/s"


def probe_cpu_flops(*, runs: int = 5, measure: Measure | None = None, load: LoadMeter | None = None) -> FlopsProbe:
    if runs < 1:
        raise ConfigError(f"local-cpu FLOPS probe: runs must be >= 1, got {runs}")
    meter = load or proc_stat_sample
    before = meter()
    per_run = (measure or numpy_matmul_runs)(runs)
    return FlopsProbe(max(per_run), tuple(per_run), others_busy_share(before, meter()))


def local_cpu_tflops(*, refresh: bool = False, only_if_higher: bool = False, cache: Path | None = None,
                     measure: Measure | None = None, runs: int = 5, load: LoadMeter | None = None) -> Cached:
    """This host's float32 matmul peak, measured once per host and cached (``probe_cache`` rules);
    ``refresh`` measures again; ``only_if_higher`` keeps a higher cached figure."""
    return cached_or_measured(
        (cache or cache_dir()) / CACHE_FILE, field="tflops", method=CACHE_METHOD,
        measure=lambda: probe_cpu_flops(runs=runs, measure=measure, load=load),
        entry=lambda r: {"tflops": r.tflops, "runs_tflops": list(r.runs_tflops), "busy_share": r.busy_share},
        show=lambda old: f"{old * 1e3:.1f} GFLOP/s", refresh=refresh, only_if_higher=only_if_higher)


def local_cpu_peak(**probe) -> Peak:
    """This host's measured float32 matmul peak (``local_cpu_tflops``) as a ``Peak``."""
    local = local_cpu_tflops(**probe)
    how = "cached numpy float32 matmul probe" if local.cached else f"numpy float32 matmul probe, {local.runs}"
    where_cached = (probe.get("cache") or cache_dir()) / CACHE_FILE
    return Peak(local.value, f"local CPU ({socket.gethostname()})", f"{how} ({where_cached})", 1, local.note)


def resolve_peak(hardware: Hardware | None, *, peak_tflops: float | None = None, dtype: str | None = None,
                 where: str = "roofline.peak_tflops", **probe) -> Peak | None:
    """The peak FLOP/s for ``hardware``: ``peak_tflops`` (explicit) > local-cpu probe > the
    catalog's figure for ``dtype`` (else bf16).  A catalog null stays None: never guessed."""
    if peak_tflops is not None:
        if isinstance(peak_tflops, bool) or not isinstance(peak_tflops, (int, float)) or not 0 < peak_tflops < 1e9:
            raise ConfigError(f"{where}: expected a positive number of TFLOPS, got {peak_tflops!r}")
        name = hardware.name if hardware is not None else "explicit peak"
        return Peak(float(peak_tflops), name, f"explicit {where}", getattr(hardware, "devices", 1))
    if hardware is None:
        return None
    if hardware.key == "local-cpu":
        return local_cpu_peak(**probe)
    value, field_name = hardware.peak_tflops(dtype)
    source = f"catalog {field_name}: {hardware.source}" if value is not None else \
        f"catalog has no peak FLOP/s for {hardware.name}: {hardware.source}"
    return Peak(value, hardware.name, source, hardware.devices)
