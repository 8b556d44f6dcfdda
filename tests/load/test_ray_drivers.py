"""Every driver the worker processes take, on the Ray nodes (``ray: ADDRESS``: ``client.placement.RayNodes``)
through the two protocols, against the embedded reference target; the pairs Ray refuses, refused
before any request with the reason.  The cluster: ``tests/load/ray_tier.py``."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'pytest-llm-latency[ray]'")

from pytest_llm_latency.client.transport.http import make_http_client  # noqa: E402
from pytest_llm_latency.client.runner import Target, make_client  # noqa: E402
from pytest_llm_latency.core.spec.workload import make_workload  # noqa: E402
from tests.load import ray_tier  # noqa: E402
from tests.unit.client.drivers.test_drivers import ON_PROCESSES, measure_driver, workload_spec  # noqa: E402

server, cluster = ray_tier.server, ray_tier.cluster  # the tier's fixtures (a reference target, two raylets)


@pytest.mark.parametrize("name", sorted(n for n, extra in ON_PROCESSES.items() if extra is not None))
def test_every_driver_that_can_be_dealt_runs_on_the_ray_nodes(name, server, cluster):
    """The second axis on Ray: each driver the worker processes take (``tests/unit/client/drivers/test_drivers.py``'s
    table) through the two protocols with ``ray:`` (``client.placement.RayNodes``), two nodes sending."""
    spec = {**workload_spec(name, server.url), **ON_PROCESSES[name], "workers": 2, "ray": cluster.address}
    refused = {"baseline_target": r"an A/B run \(baseline_target\) on Ray nodes is not yet supported",
               "server_sweep": r"a server sweep \(server_sweep\) on Ray nodes is not yet supported"}
    for key, reason in refused.items():  # refused before any request, with the reason (core.spec.load_spec)
        if key in spec:
            from pytest_llm_latency.core.errors import ConfigError

            with pytest.raises(ConfigError, match=reason):
                make_workload(name, spec)
            return
    with make_http_client() as http:
        client = make_client(Target(server.url, "openai-chat"), http)
        res = measure_driver(name, make_workload(name, spec), client, "ray")
    nodes = {(r.worker or "").rsplit("@", 1)[-1] for r in res.records}
    assert len(nodes) >= 2 and "" not in nodes, nodes  # pid@<node>: both nodes sent


def test_a_mixed_workload_runs_on_the_ray_nodes_tagged_and_judged_per_class(server, cluster):
    """Issue 37: a mix's classes travel with its prompts to the nodes and back on their records (the one sender),
    the open loop's class counts exact, each class judged on its own budgets."""
    from collections import Counter

    mix = {"short": {"weight": 0.75, "prompt_tokens": 48, "output_tokens": 4},
           "long": {"weight": 0.25, "prompt_tokens": 1500, "output_tokens": 4}}
    spec = {"mix": mix, "slo": {"short": {"ttft_p50": 60_000}, "long": {"ttft_p50": 60_000}}, "rate": 40,
            "requests": 16, "warmup": 1, "workers": 2, "ray": cluster.address}
    res = ray_tier.run(server, cluster.address, spec)
    assert Counter(r.mix_class for r in res.records) == {"short": 12, "long": 4}, res.failure_message()
    assert {(r.mix_class, r.prompt_tokens) for r in res.records} == {("short", 48), ("long", 1500)}
    assert len({(r.worker or "").rsplit("@", 1)[-1] for r in res.records}) >= 2
    assert res.verdict == "pass" and [c["status"] for c in res.mix.classes] == ["pass", "pass"]
