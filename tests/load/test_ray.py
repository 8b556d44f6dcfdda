"""Shards on several hosts (``ray: ADDRESS``, ``client/ray_shards.py``) on a real local Ray cluster of
two raylets, on the loopback address only (``ray.cluster_utils.Cluster``: node ip 127.0.0.1, no
dashboard, usage stats off, an 80 MiB object store each), against the embedded reference target (a
server process of its own on 127.0.0.1): a sharded open loop merged from two named nodes, and a
node removed mid-run -- an error naming it.  Skipped only where ``ray`` cannot be imported
(``pip install 'pytest-llm-latency[ray]'``)."""
from __future__ import annotations

import os
import threading

import pytest

# before ray's import: never resolve "this node" off the loopback, no usage report
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'pytest-llm-latency[ray]'")

from pytest_llm_latency.client.http import make_http_client  # noqa: E402
from pytest_llm_latency.client.runner import Target, make_client, measure  # noqa: E402
from pytest_llm_latency.core.checks import judge  # noqa: E402
from pytest_llm_latency.core.workload import make_workload  # noqa: E402
from pytest_llm_latency.targets.reference.launch import start_reference  # noqa: E402

URL = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05"
SPEC = {"prompt_tokens": 64, "output_tokens": 8, "rate": 40, "requests": 80, "workers": 2, "confidence": None,
        "slo": {"e2e_p95": "30s"}}
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "node_ip_address": "127.0.0.1",
        "min_worker_port": 0, "max_worker_port": 0}


@pytest.fixture(scope="module")
def server():
    with start_reference(URL, mode="subprocess") as h:
        yield h


@pytest.fixture
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    second = c.add_node(**NODE)
    assert c.address.startswith("127.0.0.1:")
    try:
        yield c, second
    finally:
        ray.shutdown()
        c.shutdown()


def run(server, address: str, spec: dict):
    with make_http_client() as http:
        client = make_client(Target(server.url, "openai-completions"), http)
        return judge(measure(client, make_workload("w", {**spec, "ray": address}), seed=7, nonce="ray"))


def test_a_sharded_open_loop_on_two_nodes_merges_every_record_each_naming_its_node(server, cluster):
    c, _ = cluster
    res = run(server, c.address, SPEC)
    assert res.verdict == "pass", res.failure_message()
    assert res.n == 80 and not res.failures
    nodes = {n["NodeID"][:8] for n in ray.nodes() if n["Alive"]}
    by_node: dict[str, set[int]] = {}
    for r in res.records:
        pid, _, node = r.worker.partition("@")
        assert pid.isdigit() and node.startswith("127.0.0.1/"), r.worker
        by_node.setdefault(node.split("/")[1], set()).add(r.t_scheduled_ns)
    assert set(by_node) == nodes and len(nodes) == 2                 # two distinct nodes, named
    assert {len(s) for s in by_node.values()} == {40}
    assert len({r.t_scheduled_ns for r in res.records}) == 80         # each scheduled arrival once
    sched = [r.t_scheduled_ns for r in res.records]
    assert sched == sorted(sched)                                      # merged on the driver's timeline
    assert all(r.t_send_ns >= r.t_scheduled_ns - 5_000_000 for r in res.records)  # stamps on one clock
    lag = res.load.worker_lag
    assert res.load.workers == 2 and [x["index"] for x in lag] == [0, 1]
    assert {x["node"].split("/")[1] for x in lag} == nodes
    assert all(abs(x["clock_offset_ms"]) < 50 and x["clock_rtt_ms"] > 0 for x in lag)  # one host: ~0


def test_a_node_removed_mid_run_makes_the_run_an_error_naming_it(server, cluster):
    c, second = cluster
    victim = second.node_id[:8]
    killer = threading.Timer(6.0, c.remove_node, args=(second,))  # actors ready ~3 s, then 5 s of schedule
    killer.start()
    try:
        res = run(server, c.address, {**SPEC, "requests": 200})
    finally:
        killer.cancel()
    assert res.verdict == "error"
    msg = " ".join(res.errors)
    assert f"/{victim}" in msg and "worker " in msg, msg
    assert all(victim not in (r.worker or "") for r in res.records)   # only the survivor's records
