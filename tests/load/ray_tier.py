"""The Ray tier's cluster and target (``tests/load/test_ray*.py``): a real local Ray cluster of two
raylets on the loopback only, and the embedded reference target in a process of its own.  Imported
only by modules that skipped already where ``ray`` cannot be imported."""
from __future__ import annotations

import os

import pytest
import ray

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.placement.ray.cluster import connect
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.targets.reference.launch import start_reference

URL = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05"
SPEC = {"prompt_tokens": 64, "output_tokens": 8, "rate": 40, "requests": 80, "workers": 2, "confidence": None,
        "slo": {"e2e_p95": "30s"}}
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "node_ip_address": "127.0.0.1",
        "min_worker_port": 0, "max_worker_port": 0}


@pytest.fixture(scope="module")
def server():
    with start_reference(URL, mode="subprocess") as h:
        yield h


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two raylets, for the module: a test that kills a node adds its own third one first.

    Loopback only: even without a dashboard, Ray's head starts its usage-stats module, which asks
    the cloud metadata address (169.254.169.254, metadata.google.internal) which cloud it runs on
    unless it finds an autoscaler config at ``~/ray_bootstrap_config.yaml``; the head is started
    with a HOME holding an empty one, so no request ever leaves the loopback."""
    from ray.cluster_utils import Cluster

    home = tmp_path_factory.mktemp("ray-home")
    (home / "ray_bootstrap_config.yaml").write_text("{}\n")
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(home)  # inherited by the head's processes, started now
    try:
        c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved
    c.add_node(**NODE)
    assert c.address.startswith("127.0.0.1:")
    connect(c.address)  # this process, Ray's driver: on the loopback too
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def live_nodes() -> set[str]:
    return {n["NodeID"][:8] for n in ray.nodes() if n["Alive"]}


def run(server, address: str, spec: dict):
    with make_http_client() as http:
        client = make_client(Target(server.url, "openai-completions"), http)
        return judge(measure(client, make_workload("w", {**spec, "ray": address}), seed=7, nonce="ray"))
