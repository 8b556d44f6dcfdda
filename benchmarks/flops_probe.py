"""Compare the ``local-cpu`` FLOPS probe (one single-threaded numpy process per core) with one
numpy process whose BLAS runs one thread per core, and with one single-threaded process.

    .venv/bin/python benchmarks/flops_probe.py [--repeats 3]

Each figure is the best of 5 runs of 4 float32 1024x1024 matmuls (the probe's own settings), in
GFLOP/s, repeated ``--repeats`` times; the CPU share other processes used meanwhile is printed
with it (``probe_cache.proc_stat_sample``).  Prints a Markdown table for RESULTS.md.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys

from pytest_llm_latency.roofline import flops_probe
from pytest_llm_latency.roofline.hwdetect import usable_cores
from pytest_llm_latency.roofline.probe_cache import others_busy_share, proc_stat_sample


def _threaded(threads: int, queue) -> None:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    import time

    import numpy as np

    n, reps = flops_probe.MATMUL_SIZE, flops_probe.MATMUL_REPEATS
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    a @ a
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ a
        best = max(best, 2.0 * n ** 3 * reps / (time.perf_counter() - t0) / 1e9)
    queue.put(best)


def threaded(threads: int) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_threaded, args=(threads, q))
    p.start()
    value = q.get(timeout=120)
    p.join()
    return value


def timed(fn):
    before = proc_stat_sample()
    value = fn()
    return value, others_busy_share(before, proc_stat_sample())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    cores = usable_cores()
    print(f"{platform.node()} {platform.processor() or platform.machine()}, {cores} usable cores, "
          f"python {sys.version.split()[0]}")
    print("| repeat | probe: 1 proc/core, 1 thread each | 1 proc, BLAS threads = cores | 1 proc, 1 thread |")
    print("|---|---|---|---|")
    for i in range(args.repeats):
        cells = []
        for fn in (lambda: 1e3 * max(flops_probe.numpy_matmul_runs(5)), lambda: threaded(cores),
                   lambda: threaded(1)):
            v, busy = timed(fn)
            cells.append(f"{v:.1f} GFLOP/s (others busy {busy:.0%})" if busy is not None else f"{v:.1f} GFLOP/s")
        print(f"| {i + 1} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
