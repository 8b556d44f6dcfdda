"""Shards on several hosts (``ray: ADDRESS``, ``client/placement/ray/shards.py``) on a real local Ray cluster of
two raylets, on the loopback address only (``ray.cluster_utils.Cluster``: node ip 127.0.0.1, no
dashboard, usage stats off, an 80 MiB object store each), against the embedded reference target (a
server process of its own on 127.0.0.1): a sharded open loop merged from two named nodes, a closed loop,
a trace replay, agent sessions and ``samples: auto`` rounds over both, a small rate sweep whose every
step is sharded over the nodes, and a node removed mid-run of an open and of a closed loop -- an error
naming it.  Skipped only where ``ray`` cannot be imported
(``pip install 'pytest-llm-latency[ray]'``)."""
from __future__ import annotations

import json
import os
import threading

import pytest

# before ray's import: never resolve "this node" off the loopback, no usage report
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'pytest-llm-latency[ray]'")

from pytest_llm_latency.client.transport.http import make_http_client  # noqa: E402
from pytest_llm_latency.client.runner import Target, make_client, measure  # noqa: E402
from pytest_llm_latency.core.checks import judge  # noqa: E402
from pytest_llm_latency.core.spec.workload import make_workload  # noqa: E402
from pytest_llm_latency.targets.reference.launch import start_reference  # noqa: E402
from tests.helpers.results import validated_results  # noqa: E402
from tests.load import ray_tier  # noqa: E402
from tests.load.ray_tier import NODE, SPEC, live_nodes, run  # noqa: E402

server, cluster = ray_tier.server, ray_tier.cluster  # the tier's fixtures (a reference target, two raylets)


def test_a_sharded_open_loop_on_two_nodes_merges_every_record_each_naming_its_node(server, cluster):
    res = run(server, cluster.address, SPEC)
    assert res.verdict == "pass", res.failure_message()
    assert res.n == 80 and not res.failures
    nodes = live_nodes()
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


def served(server) -> float:
    """Requests the reference target has finished (its ``vllm:request_success_total``)."""
    import httpx

    text = httpx.get(f"{server.url}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


def run_removing_a_third_node(server, cluster, spec: dict, after: int):
    """``spec`` on three nodes (``workers: auto``), the third removed once ``after`` requests were
    served (mid-run): the judged result and the removed node's id prefix."""
    third = cluster.add_node(**NODE)
    victim = third.node_id[:8]
    before, stop = served(server), threading.Event()

    def remove_when_running():
        while not stop.wait(0.05):
            if served(server) - before >= after:
                cluster.remove_node(third)
                return

    killer = threading.Thread(target=remove_when_running, daemon=True)
    killer.start()
    try:
        return run(server, cluster.address, {**spec, "workers": "auto"}), victim
    finally:
        stop.set()
        killer.join()


def test_a_node_removed_mid_run_makes_the_run_an_error_naming_it(server, cluster):
    # mid-run: once 40 of the 200 scheduled requests were served
    res, victim = run_removing_a_third_node(server, cluster, {**SPEC, "requests": 200}, after=40)
    assert res.verdict == "error"
    msg = " ".join(res.errors)
    assert f"on node 127.0.0.1/{victim} lost" in msg, msg
    assert res.load.workers == 3 and len(res.load.worker_lag) == 2   # the survivors' lag, the lost one named
    assert res.records and all(victim not in (r.worker or "") for r in res.records)  # only the survivors' records
    assert victim not in live_nodes()


def test_ray_in_yaml_with_workers_auto_reaches_the_result_json(pytester, cluster, server):
    """The plugin end to end in its own process (another Ray driver): ``--llm-latency-ray`` over an
    open loop with ``workers: auto`` (one shard per live node), the JSON valid against the schema."""
    pytest.importorskip("jsonschema")
    pytester.makefile(".slo.yaml", load=f"""
target: {{url: {server.url}}}
workloads:
  spread:
    prompt_tokens: 64
    output_tokens: 8
    rate: 40
    requests: 40
    workers: auto
    confidence: null
    slo: {{e2e_p95: 30s}}
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--llm-latency-ray={cluster.address}",
                                      "--llm-latency-json=r.json", timeout=150)
    r.assert_outcomes(passed=1)
    doc = validated_results(pytester.path / "r.json")
    res = doc["results"][0]
    nodes = live_nodes()
    assert res["load"]["workers"] == len(nodes)
    assert {w["node"].split("/")[1] for w in res["load"]["worker_lag"]} == nodes
    assert all("clock_offset_ms" in w and "clock_rtt_ms" in w for w in res["load"]["worker_lag"])
    assert len(res["requests"]) == 40 and {row["worker"].split("/")[1] for row in res["requests"]} == nodes


def test_the_api_key_reaches_the_nodes_only_by_object_reference(server, cluster, monkeypatch):
    """Every call the driver makes on the shard actors (what the dashboard and ``ray list tasks``
    show as arguments) holds no secret, in its repr or pickled; the run still passes."""
    from ray import cloudpickle

    from pytest_llm_latency.client.placement.ray import shards as ray_shards
    from pytest_llm_latency.client.transport.http import Redactor

    secret = "sk-ray-test-5e3c9d"
    calls: list = []
    real = ray_shards._actor_class

    class Spy:
        def __init__(self, handle):
            self.handle = handle

        def __getattr__(self, name):
            method = getattr(self.handle, name)

            class Call:
                def remote(self, *a, **kw):
                    calls.append((name, a, kw))
                    return method.remote(*a, **kw)
            return Call()

    class SpyClass:
        def __init__(self, cls):
            self.cls = cls

        def options(self, **kw):
            made = self.cls.options(**kw)
            return type("Made", (), {"remote": lambda _self: Spy(made.remote())})()

    monkeypatch.setattr(ray_shards, "_actor_class", lambda r: SpyClass(real(r)))
    real_kill = ray.kill
    monkeypatch.setattr(ray, "kill", lambda a, **kw: real_kill(getattr(a, "handle", a), **kw))
    with make_http_client(api_key=secret) as http:
        client = make_client(Target(server.url, "openai-completions"), http, redact=Redactor((secret,)))
        res = judge(measure(client, make_workload("w", {**SPEC, "requests": 40, "ray": cluster.address}),
                            seed=7, nonce="ray-cred"))
    assert res.verdict == "pass", res.failure_message()
    assert {name for name, _, _ in calls} >= {"where", "clock", "prepare", "run"}
    prepare = [a for name, a, _ in calls if name == "prepare"]
    assert len(prepare) == 2 and all(isinstance(a[1], list) and isinstance(a[1][0], ray.ObjectRef) for a in prepare)
    assert secret not in repr(calls) and secret.encode() not in cloudpickle.dumps(calls)


def test_a_rate_sweep_on_two_nodes_runs_every_step_over_both_and_finds_the_capacity(cluster):
    """``rate_sweep`` with ``ray:``: each step an open loop sharded over the two nodes (one decode slot
    in real time: 400 req/s queues past the TTFT budget, 10 req/s does not: tests/load/test_sweep.py)."""
    from pytest_llm_latency.client.drivers.rate_steps import run_sweep

    spec = {"prompt_tokens": 32, "output_tokens": 8, "requests": 8, "warmup": 1, "arrival": "constant",
            "slo": {"ttft_p50": "80ms"}, "rate_sweep": {"rate_min": 10, "rate_max": 400, "max_steps": 2},
            "ray": cluster.address}
    steps = []
    with start_reference("reference://h100-sxm/llama-3.1-8b?max_num_seqs=1&time_scale=1", mode="subprocess") as h, \
            make_http_client() as http:
        client = make_client(Target(h.url, "openai-completions"), http)

        def measure_at(wl):
            steps.append(measure(client, wl, seed=3, salt_context=repr(wl.load.rate)))
            return steps[-1]
        res, sw = run_sweep(measure_at, make_workload("w", spec), judge)
    judge(res)
    assert [(s.rate, s.passed) for s in sw.steps] == [(400.0, False), (10.0, True)], sw.describe()
    nodes = live_nodes()
    for step in steps:
        assert {r.worker.split("/")[1] for r in step.records} == nodes and step.n == 8
        assert step.load.workers == 2 and {x["node"].split("/")[1] for x in step.load.worker_lag} == nodes
    assert res.verdict == "pass", res.failure_message()
    assert res.load.rate_sweep_capacity_rps == 10 and res.load.workers == 2


CLOSED = {"prompt_tokens": 64, "output_tokens": 64, "concurrency": 4, "samples": 40, "workers": 2,
          "confidence": None, "slo": {"e2e_p95": "30s"}}


def test_a_closed_loop_on_two_nodes_counts_the_samples_in_one_window_and_reports_progress(server, cluster,
                                                                                      monkeypatch):
    """Concurrency 4 over two nodes (two streams each), the books in a ``LoopBooks`` actor: the
    samples merged from both named nodes, each stream's first request the ramp-up, and every measured
    request inside the books' one window on the driver's timeline; progress polled from the nodes."""
    from pytest_llm_latency.client.placement.ray import loop as ray_loop, shards as ray_shards

    monkeypatch.setattr(ray_shards, "PROGRESS_S", 0.05)  # a short run: read the nodes' counts often
    books: list[dict] = []
    real = ray_loop.settle
    monkeypatch.setattr(ray_loop, "settle", lambda run, b, samples: real(run, books.append(b) or b, samples))
    seen: list[tuple[int, int]] = []
    with make_http_client() as http:
        client = make_client(Target(server.url, "openai-completions"), http)
        res = judge(measure(client, make_workload("w", {**CLOSED, "ray": cluster.address}), seed=7,
                            nonce="ray-closed", progress=lambda done, total: seen.append((done, total))))
    assert res.verdict == "pass", res.failure_message()
    assert res.n == 40 and not res.failures and res.load.load_mode == "closed"
    assert {r.worker.partition("@")[2].split("/")[1] for r in res.records} == live_nodes()  # both nodes, named
    assert res.load.ramp_excluded == 4                                  # each stream's first request
    (b,) = books
    assert b["started"] == 4 and b["why"] == "samples" and b["counted"] >= 40
    assert all(b["ramp_end"] <= r.t_send_ns and r.t_end_ns <= b["t_stop"] for r in res.records)  # one window
    assert res.load.window_s == pytest.approx((max(r.t_end_ns for r in res.records) - b["ramp_end"]) / 1e9, abs=1e-4)
    assert b["calls"] < 2 * 44                                          # rare calls on the books
    assert seen and all(total == 40 for _, total in seen) and seen[-1] == (40, 40)
    assert any(0 < done < 40 for done, _ in seen), seen                 # counts from the nodes while they ran


def test_a_trace_replay_on_two_nodes_keeps_sessions_whole_and_declares_hits_across_nodes(server, cluster,
                                                                                     tmp_path, monkeypatch):
    """Whole sessions per node (session i on node i mod 2); the declared hits decided after the run
    from the merged stamps, on the driver's timeline: row 4, on the other node than row 0, declares the
    block it shares with it; progress polled from the nodes."""
    from pytest_llm_latency.client.drivers.base import Run
    from pytest_llm_latency.client.drivers.registry import driver_for
    from pytest_llm_latency.client.placement.ray import shards as ray_shards
    from pytest_llm_latency.plugin.trace_load import load_trace

    monkeypatch.setattr(ray_shards, "PROGRESS_S", 0.05)

    rows = [{"session_id": "a", "timestamp": 0, "input_length": 90, "output_length": 5, "hash_ids": [1, 2]},
            {"session_id": "b", "timestamp": 300, "input_length": 70, "output_length": 4, "hash_ids": [7, 8]},
            {"session_id": "a", "delay": 200, "input_length": 40, "output_length": 4, "hash_ids": [3]},
            {"timestamp": 900, "input_length": 100, "output_length": 3, "hash_ids": [11, 12]},
            {"timestamp": 1200, "input_length": 100, "output_length": 3, "hash_ids": [1, 13]}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    w = make_workload("w", {"trace": "t.jsonl", "trace_block_tokens": 64, "warmup": 1, "workers": 2,
                            "ray": cluster.address, "confidence": None, "slo": {"ttft_max": "30s"}})
    assert w.trace is not None
    seen: list[tuple[int, int]] = []
    with make_http_client() as http:
        client = make_client(Target(server.url, "openai-completions"), http)
        res = judge(driver_for(w).measure(client, w, Run(seed=7, nonce="ray-trace", trace_rows=tuple(
            load_trace(w.trace, tmp_path)), progress=lambda done, total: seen.append((done, total)))))
    assert res.verdict == "pass", res.failure_message()
    got = {r.trace.row: r for r in res.records}
    assert sorted(got) == [0, 1, 2, 3, 4] and res.load.load_mode == "trace" and res.load.workers == 2
    node = {i: r.worker.partition("@")[2] for i, r in got.items()}
    assert node[0] == node[2] == node[3] != node[1] == node[4]          # sessions a, b, row 3, row 4: i mod 2
    assert {n.split("/")[1] for n in node.values()} == live_nodes()
    assert got[2].t_send_ns >= got[0].t_end_ns + 200_000_000 - 1_000_000  # a later turn after its delay
    assert got[4].trace.declared_cached_tokens == 64                    # row 0's block, ended on the other node
    assert got[3].trace.declared_cached_tokens == 0
    assert seen and seen[-1] == (5, 5) and any(0 < done < 5 for done, _ in seen), seen


AGENT = {"class": "agent_session", "prompt_tokens": 256, "output_tokens": 8, "steps": 3, "tool_result_tokens": 16,
         "tool_time": "1ms", "samples": 6, "concurrency": 2, "warmup": 1, "workers": 2,
         "slo": {"prefix_reuse_min": None, "turn_ttft_max": "30s", "turn_ttft_p95": None, "session_e2e_p95": None}}


def test_agent_sessions_on_two_nodes_keep_each_session_whole_on_the_drivers_timeline(server, cluster):
    """Session i whole on node i mod 2, from the controller's first prompts; every stamp inside the
    driver's own window of the run (moved to its timeline), a later turn sent after its turn before."""
    from pytest_llm_latency.client.transport.clock import MEASUREMENT_CLOCK

    seen: list[tuple[int, int]] = []
    t_before = MEASUREMENT_CLOCK()
    with make_http_client() as http:
        client = make_client(Target(server.url, "openai-chat"), http)
        res = judge(measure(client, make_workload("s", {**AGENT, "ray": cluster.address}), seed=5, nonce="ray-agent",
                            progress=lambda done, total: seen.append((done, total))))
    t_after = MEASUREMENT_CLOCK()
    assert res.verdict == "pass", res.failure_message()
    sessions = res.facts.agent.sessions
    assert [s.index for s in sessions] == list(range(6)) and all(len(s.turns) == 3 and not s.failed for s in sessions)
    assert res.n == 18 and not res.failures
    per_session = [res.records[i * 3:(i + 1) * 3] for i in range(6)]     # session-major
    nodes = [{r.worker.partition("@")[2] for r in turns} for turns in per_session]
    assert all(len(n) == 1 for n in nodes)                                  # each session's turns on one node
    node = [next(iter(n)) for n in nodes]
    assert node[0::2] == [node[0]] * 3 and node[1::2] == [node[1]] * 3 and node[0] != node[1]  # i mod 2
    assert {n.split("/")[1] for n in node} == live_nodes()                  # both nodes
    assert all(t_before < r.t_send_ns < r.t_end_ns < t_after for r in res.records)  # the driver's timeline
    assert all(b.t_send_ns >= a.t_end_ns for turns in per_session for a, b in zip(turns, turns[1:]))
    assert res.load.workers == 2 and {x["node"] for x in res.load.worker_lag} == set(node)
    assert seen and seen[-1] == (18, 18) and all(total == 18 for _, total in seen)


def test_samples_auto_on_two_nodes_sends_rounds_until_decided_each_request_once(server, cluster):
    """Rounds of 4 over two nodes (two requests each), decided after each round on both nodes' records:
    stopped before max_samples, every round's requests sent after the round before ended (one timeline)."""
    spec = {"prompt_tokens": 64, "output_tokens": 8, "concurrency": 4, "samples": "auto", "min_samples": 8,
            "max_samples": 40, "confidence": 0.9, "workers": 2, "warmup": 1, "slo": {"e2e_p90": "30s"}}
    res = run(server, cluster.address, spec)
    assert res.verdict == "pass", res.failure_message()
    n = res.n
    assert 8 <= n < 40 and n % 4 == 0 and not res.failures and res.load.load_mode == "rounds"
    assert res.measurement.stop_reason == f"every budget decided at {n} samples"
    # each sample once; the nodes' warm-ups are before the /metrics window opens (not another client's traffic)
    assert res.server.metrics["vllm:request_success_total"] == n
    rounds = [res.records[i:i + 4] for i in range(0, n, 4)]                # prompt order: round by round
    for rnd in rounds:
        assert [r.worker.partition("@")[2] for r in rnd][0::2] == [rnd[0].worker.partition("@")[2]] * 2
    assert {r.worker.partition("@")[2].split("/")[1] for r in res.records} == live_nodes()  # both nodes
    assert all(min(r.t_send_ns for r in b) >= max(r.t_end_ns for r in a) - 1_000_000  # one timeline
               for a, b in zip(rounds, rounds[1:]))
    lag = res.load.worker_lag
    assert res.load.workers == 2 and [x["requests"] for x in lag] == [n // 2, n // 2]
    assert all(abs(x["clock_offset_ms"]) < 50 for x in lag)


def test_a_node_removed_mid_run_of_a_closed_loop_makes_the_run_an_error_naming_it_alone(server, cluster):
    """Three nodes, a stream each; the third removed mid-run: the error names it, and only it (the
    books, on the driver's node, outlive it: the survivors finish, their records kept)."""
    res, victim = run_removing_a_third_node(server, cluster, {**CLOSED, "concurrency": 3, "samples": 45}, after=12)
    assert res.verdict == "error"
    lost = [e for e in res.errors if " on node " in e]
    assert len(lost) == 1 and f"on node 127.0.0.1/{victim} lost (its node or actor died)" in lost[0], res.errors
    assert res.load.workers == 3 and len(res.load.worker_lag) == 2 and res.records   # the survivors'
    assert all(victim not in (r.worker or "") for r in res.records)
    assert victim not in live_nodes()

