"""The rules every local probe shares (memory bandwidth in ``hwdetect``, matmul FLOP/s in
``flops_probe``, GPU reads in ``gpu_probe``): a probe reports the best of several runs, cached per
host in ``${LLM_LATENCY_CACHE:-~/.cache/pytest-llm-latency}/<file>.json`` (written atomically)
unless its runs disagree by more than ``SPREAD_LIMIT`` or other processes took more than
``BUSY_LIMIT`` of the CPU while it ran (``/proc/stat`` less this process and its reaped children).
"""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Callable, NamedTuple, Protocol, Sequence, TypeVar

#: A probe's figure is cached only when its runs agree within this factor (best / worst) ...
SPREAD_LIMIT = 1.5
#: ... and other processes used at most this share of the machine's CPU time while it ran.
BUSY_LIMIT = 0.25

#: one core per probe process: no BLAS threads of its own
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
CpuSample = tuple[float, float, float]   # (machine busy s, machine total s, own + reaped children CPU s)
LoadMeter = Callable[[], "CpuSample | None"]


def cache_dir() -> Path:
    return Path(os.environ.get("LLM_LATENCY_CACHE") or Path.home() / ".cache" / "pytest-llm-latency")


def host_key() -> str:
    return f"{socket.gethostname()}-{os.cpu_count()}cpu"


def proc_stat_sample() -> CpuSample | None:
    """All CPUs' busy and total time from ``/proc/stat``, and this process's own CPU time plus
    that of its reaped children (a probe's workers); None where ``/proc/stat`` is unreadable."""
    try:
        import resource

        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        tick = float(os.sysconf("SC_CLK_TCK"))
    except (ImportError, OSError, ValueError):  # pragma: no cover - non-Linux
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    user, nice, system, idle, iowait, irq, softirq = (float(x) for x in fields[1:8])
    steal = float(fields[8]) if len(fields) > 8 else 0.0
    busy = user + nice + system + irq + softirq + steal
    own = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                resource.getrusage(resource.RUSAGE_CHILDREN)))
    return busy / tick, (busy + idle + iowait) / tick, own


def others_busy_share(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """Share of the machine's CPU time between two samples used by processes other than this one
    and its children; None when unknown."""
    if before is None or after is None:
        return None
    total = after[1] - before[1]
    if not total > 0:
        return None
    others = (after[0] - before[0]) - (after[2] - before[2])
    return min(1.0, max(0.0, others / total))


def not_cached_reason(runs: Sequence[float], busy_share: float | None, unit: str) -> str | None:
    """Why a probe's figure (best of ``runs``, in ``unit``) must not be cached, or None."""
    reasons = []
    if busy_share is not None and busy_share > BUSY_LIMIT:
        reasons.append(f"the machine was busy: other processes used {busy_share:.0%} of its CPU time "
                       f"during the probe (limit {BUSY_LIMIT:.0%})")
    spread = max(runs) / min(runs)
    if spread > SPREAD_LIMIT:
        reasons.append(f"the runs disagree: best {max(runs):.1f} {unit} is {spread:.2f}x the "
                       f"worst {min(runs):.1f} {unit} (limit {SPREAD_LIMIT:g}x)")
    return "; ".join(reasons) or None


def read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_cache(path: Path, data: dict) -> None:
    from ..files.atomic import write_atomic

    write_atomic(path, json.dumps(data, indent=2, sort_keys=True))


def reap(procs) -> None:
    """Join a probe's worker processes, bounded: a worker still alive after 10 s is terminated."""
    for p in procs:
        if p.pid is None:  # never started
            continue
        p.join(timeout=10)
        if p.is_alive():
            p.terminate()
            p.join(timeout=5)


def cached_value(entry, field: str, method: str) -> float | None:
    """A cache entry's positive finite ``field``, or None when absent, malformed, or written by
    another probe ``method`` (an older method's figure is measured again, never reused)."""
    if not isinstance(entry, dict) or entry.get("method") != method:
        return None
    value = entry.get(field)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf"):
        return float(value)
    return None


class ProbeResult(Protocol):
    """What a probe's ``measure()`` returns."""

    @property
    def value(self) -> float: ...

    @property
    def runs_text(self) -> str: ...

    @property
    def not_cached_reason(self) -> str | None: ...


R = TypeVar("R", bound=ProbeResult)


class Cached(NamedTuple):
    value: float
    cached: bool          # the figure came from the cache
    note: str = ""        # e.g. why a fresh figure was not cached
    runs: str = ""        # "best of 5 run(s), 30.1-33.0 GB/s" for a fresh figure


def cached_or_measured(path: Path, *, field: str, method: str, measure: Callable[[], R],
                       entry: Callable[[R], dict], show: Callable[[float], str],
                       refresh: bool = False, only_if_higher: bool = False,
                       key: str | None = None) -> Cached:
    """The one read-measure-keep rule of every probe: without ``refresh`` a cached figure for ``key``
    (default this host) as is; else ``measure()``, cached as ``entry(result)`` plus the time unless
    its ``not_cached_reason`` says why not or (``only_if_higher``) the cached figure is higher.  The
    file is re-read before the write: another process may have written meanwhile."""
    key = key or host_key()
    if not refresh:
        value = cached_value(read_cache(path).get(key), field, method)
        if value is not None:
            return Cached(value, True)
    result = measure()
    fresh = result.value
    if result.not_cached_reason is not None:
        return Cached(fresh, False, f"not cached: {result.not_cached_reason}", result.runs_text)
    data = read_cache(path)
    old = cached_value(data.get(key), field, method)
    if only_if_higher and old is not None and old >= fresh:
        return Cached(fresh, False, f"not cached: the cached {show(old)} is higher", result.runs_text)
    import time

    data[key] = {**entry(result), "method": method, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_cache(path, data)
    return Cached(fresh, False, "", result.runs_text)
