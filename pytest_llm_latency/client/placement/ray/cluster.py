"""Connecting to a Ray cluster (``ray: ADDRESS``) and counting its nodes: apart from the shard runner
(``client/placement/ray/shards.py``) so that the load engine can resolve ``workers: auto`` (one per node) without
importing it.  Ray is an optional extra: imported here only when a run names a cluster."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from typing import Any

from ....core.errors import ConfigError
from ....core.hosts import is_loopback

INSTALL = "pip install 'pytest-llm-latency[ray]'"


def require_ray(where: str) -> None:
    """A ``ConfigError`` naming ``where`` and the install line when Ray is not importable, or when
    ``import ray`` would find something else first: a folder or module named ``ray`` on ``sys.path``
    (pytest puts the rootdir and test folders there), named as what it is."""
    spec = importlib.util.find_spec("ray")
    if spec is None:
        raise ConfigError(f"{where}: Ray is not installed -- {INSTALL}")
    try:
        dist = importlib.metadata.distribution("ray")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    origin = spec.origin if spec.origin not in (None, "namespace") else \
        next(iter(spec.submodule_search_locations or ()), "?")
    installed = str(dist.locate_file("ray/__init__.py")) if dist is not None else None
    if installed is not None and spec.origin not in (None, "namespace") and \
            os.path.realpath(str(spec.origin)) == os.path.realpath(installed):
        return
    have = f"Ray {dist.version} is installed at {installed} but is hidden" if dist is not None else \
        f"Ray is not installed ({INSTALL})"
    raise ConfigError(f"{where}: 'import ray' finds {origin}, which is not the Ray package; {have}: a folder "
                      "or module named 'ray' on sys.path (pytest puts the rootdir and each test folder there) "
                      "comes first -- rename it")


def connect(address: str) -> Any:
    """``ray`` connected to the cluster at ``address`` (a ``host:port`` or ``ray://``; reused when the
    process is already connected).  A loopback address keeps the driver on the loopback too."""
    require_ray(f"ray: {address}")
    if is_loopback(address.rsplit("://", 1)[-1].rsplit(":", 1)[0]):
        # before ray's import: it reads this once; 0 = never resolve "this node" off the loopback
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if not ray.is_initialized():
        kw: dict[str, Any] = {"address": address, "namespace": "llm-latency", "log_to_driver": False,
                              "logging_level": "warning"}
        if is_loopback(address.rsplit("://", 1)[-1].rsplit(":", 1)[0]):
            kw["_node_ip_address"] = "127.0.0.1"
        ray.init(**kw)
    return ray


def alive_nodes(ray) -> list[dict]:
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]


def node_count(address: str) -> int:
    """``workers: auto`` with Ray: one shard per live node with a CPU."""
    return max(1, len(alive_nodes(connect(address))))
