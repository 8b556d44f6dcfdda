"""How many shards a workload is dealt to, and why: ``workers: N | auto`` worker processes of this
host (``auto``: one per stream in flight, at most the host's CPUs, sized after the controller's
warm-up by the load's token events: ``core.spec.worker_sizing``), or one per node of a Ray cluster.
Read through ``Placement`` (``choose.py``); the functions are the arithmetic it applies."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.spec.workload import Workload
from ..load.engine import MAX_OPEN_LOOP_THREADS
from ..load.sample_count import planned_samples

if TYPE_CHECKING:
    from ...core.spec.worker_sizing import WorkerSizing


def host_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or ``taskset``'s share), else the host's."""
    import os

    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def is_local_target(base_url: str | None) -> bool:
    """Does the target run on this host (a loopback or unspecified address, ``localhost``, this
    host's name or one of its addresses, the embedded ``reference://`` server)?  Then ``workers:
    auto`` leaves it a core.  Never a DNS query: a name other than this host's is remote."""
    import ipaddress
    import socket
    from urllib.parse import urlsplit

    if not base_url:
        return True
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https"):
        return True  # reference:// and the like: served by this process
    host = (parts.hostname or "").lower().rstrip(".")
    if host in ("", "localhost") or host.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return host == socket.gethostname().lower()
    if addr.is_loopback or addr.is_unspecified:
        return True
    try:  # this host's own addresses, as /etc/hosts or the resolver's cache give them for its name
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return any(ipaddress.ip_address(str(i[4][0]).split("%")[0]) == addr for i in infos)


def worker_streams(workload: Workload) -> int:
    """The streams in flight worker processes split: a closed loop's concurrency; an open loop's
    (or a trace replay's rows') thread cap."""
    open_loop = workload.load is not None and workload.load.open_loop
    if getattr(workload, "trace", None) is not None:  # a trace replay: its rows (the sessions are not read yet)
        return min(max(workload.samples, 1), MAX_OPEN_LOOP_THREADS)
    return min(planned_samples(workload), MAX_OPEN_LOOP_THREADS) if open_loop else workload.concurrency


def worker_count(workload: Workload) -> int:
    """The worker processes sending ``workload`` before any warm-up (``workers: N | auto``; 1: this
    process): ``auto`` without a measured token rate, the target taken as on this host
    (``core.spec.worker_sizing``); the load engine's loops size ``auto`` after their warm-up instead
    (``sizing_for``)."""
    workers = getattr(workload, "workers", 1)
    address = getattr(workload, "ray", None)
    if address is not None:  # ray: one shard per node (client/placement/ray/shards.py): auto = every live node
        from .ray.cluster import node_count

        return node_count(address) if workers == "auto" else int(workers)
    if workers == 1:
        return 1
    from ...core.spec.load_spec import resolve_workers

    streams = worker_streams(workload)
    return min(resolve_workers(workers, streams, host_cpus()), streams)  # a closed loop: a stream each


def planned_workers(workload: Workload) -> int:
    """The most worker processes ``workload`` may be sent by: ``N`` as given (``worker_count``);
    ``auto`` (not on Ray): one per stream in flight, at most the host's CPUs (``sizing_for``
    chooses at most this many after the warm-up).  The prompts prepared and the driver chosen
    (one process or worker processes) follow it."""
    if getattr(workload, "workers", 1) != "auto" or getattr(workload, "ray", None) is not None:
        return worker_count(workload)
    from ...core.spec.worker_sizing import cpu_cap

    return max(1, min(worker_streams(workload), cpu_cap(host_cpus(), local=False)))


def sizing_for(workload: Workload, base_url: str | None, warm: list) -> "WorkerSizing":
    """How many worker processes send ``workload`` and why (``core.spec.worker_sizing``), after the
    controller's warm-up (``warm``: its outcomes; their records' chunk stamps give the per-stream
    token rate): ``N`` as given; ``auto`` by the load's token events, at most ``planned_workers``."""
    from ...core.measure.record import RequestRecord
    from ...core.spec.worker_sizing import WorkerSizing, size_workers, stream_rate

    workers = getattr(workload, "workers", 1)
    if workers != "auto":
        return size_workers(workers, streams=1, cpus=None, local=True)
    rate = stream_rate([c.t_ns for c in r.chunks] for r in warm if isinstance(r, RequestRecord))
    open_rps = workload.load.rate if workload.load is not None and workload.load.open_loop else None
    sized = size_workers("auto", streams=worker_streams(workload), cpus=host_cpus(),
                         local=is_local_target(base_url), rate=rate, open_rps=open_rps)
    ceiling = planned_workers(workload)
    if sized.count > ceiling:  # never more than the prompts prepared for (the same bound, computed before)
        return WorkerSizing(ceiling, f"{sized.reason}; at most {ceiling} planned")
    return sized
