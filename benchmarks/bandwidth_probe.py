"""Compare the ``local-cpu`` bandwidth probe with plain numpy reads, 1 and N processes, in one run.

    .venv/bin/python benchmarks/bandwidth_probe.py [--repeats 5] [--array-mb 256]

The plain reads are written out here independently of ``hwdetect`` (processes that each allocate
their own float32 array, start together at a barrier and time ``passes`` reads of it; aggregate =
total bytes / (last end - first start)), for two kernels: ``a.sum()`` and ``np.dot(a, a)`` (BLAS pinned to one
thread).  The probe itself is run fresh (no cache).  Prints a Markdown table for RESULTS.md.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: one BLAS thread per process
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np


def _plain_read(kernel, array_mb, passes, barrier, queue):
    a = np.ones(array_mb * 1024 * 1024 // 4, dtype=np.float32)
    read = (lambda: a.sum()) if kernel == "sum" else (lambda: np.dot(a, a))
    read()
    barrier.wait()  # start together, or the processes would not compete for the memory bus
    t0 = time.perf_counter()
    for _ in range(passes):
        read()
    queue.put((a.nbytes * passes, t0, time.perf_counter()))


def plain(kernel: str, processes: int, array_mb: int, passes: int) -> float:
    """Total bytes / (last end - first start): the window in which all the reading happened."""
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_plain_read, args=(kernel, array_mb, passes, barrier, queue))
             for _ in range(processes)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    window = max(end for _, _, end in results) - min(start for _, start, _ in results)
    return sum(b for b, _, _ in results) / window / 1e9


def main() -> int:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from pytest_llm_latency.roofline.hwdetect import probe_cpu_bandwidth, usable_cores

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--array-mb", type=int, default=256)
    ap.add_argument("--passes", type=int, default=4)
    args = ap.parse_args()
    cores = usable_cores()
    rows = []
    load_before = os.getloadavg()
    for kernel in ("sum", "dot"):
        for procs in sorted({1, 2, cores}):
            xs = [plain(kernel, procs, args.array_mb, args.passes) for _ in range(args.repeats)]
            rows.append((f"plain numpy `{'a.sum()' if kernel == 'sum' else 'np.dot(a, a)'}`", procs, xs))
    probes = [probe_cpu_bandwidth().mem_bandwidth_gb_s for _ in range(args.repeats)]
    rows.append(("`local-cpu` probe (best of 5 runs each)", cores, probes))
    load_after = os.getloadavg()

    print(f"host: {platform.node()}, {platform.processor() or platform.machine()}, {cores} usable cores, "
          f"numpy {np.__version__}, array {args.array_mb} MB/process x {args.passes} passes, "
          f"{args.repeats} repeats; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}\n")
    print("| read | processes | median GB/s | min | max |")
    print("|---|---:|---:|---:|---:|")
    for label, procs, xs in rows:
        print(f"| {label} | {procs} | {statistics.median(xs):.1f} | {min(xs):.1f} | {max(xs):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
