"""``samples: auto`` over worker processes (``workers: N``, ``client/placement/processes/pool.py``) against the
embedded reference target (a server process of its own), with real spawned workers: rounds of
``concurrency`` requests split over the workers, stopped when every budget is decided on all the
workers' records; a worker killed mid-run (the test hook ``LLM_LATENCY_TEST_WORKER_EXIT_AFTER``)
and a hung one -- errors naming them; and the YAML key through the plugin."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.placement.processes import pool as worker_pool
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.client.placement.processes.shard import TEST_EXIT_AFTER_ENV, TEST_EXIT_CODE
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.targets.reference.launch import start_reference
from tests.helpers.results import validated_results

URL = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05"
# e2e p90 well under its budget: decided (pass) after 24 samples at 90%, long before max_samples
SPEC = {"prompt_tokens": 64, "output_tokens": 8, "concurrency": 4, "samples": "auto", "min_samples": 8,
        "max_samples": 40, "confidence": 0.9, "warmup": 1, "workers": 2, "slo": {"e2e_p90": "30s"}}


@pytest.fixture(scope="module")
def server():
    with start_reference(URL, mode="subprocess") as h:
        yield h


def run(server, spec: dict, nonce: str):
    with make_http_client() as http:
        client = make_client(Target(server.url, "openai-completions"), http)
        return judge(measure(client, make_workload("w", spec), seed=7, nonce=nonce))


def test_rounds_over_two_workers_stop_when_decided_on_both_workers_records(server, monkeypatch):
    dealt: list[tuple[int, list[str]]] = []
    send_round = worker_pool.WorkerPool.send_round

    def spy(self, start, batch):  # the controller's side: what each round hands out
        dealt.append((start, [p.user for p in batch]))
        return send_round(self, start, batch)

    monkeypatch.setattr(worker_pool.WorkerPool, "send_round", spy)
    res = run(server, SPEC, "rounds")
    assert res.verdict == "pass", res.failure_message()
    assert res.n == 24 == len(res.records) and not res.failures      # stopped when decided, not at 40
    assert res.measurement.samples_mode == "auto"
    assert res.measurement.stop_reason == "every budget decided at 24 samples"
    assert [(v.key, v.status, v.method, v.n) for v in res.verdicts] == [
        ("e2e_p90", "pass", "sequential order-statistic", 24)]
    # six rounds of four, each request sent once
    assert [start for start, _ in dealt] == [0, 4, 8, 12, 16, 20] and all(len(b) == 4 for _, b in dealt)
    users = [u for _, b in dealt for u in b]
    assert len(set(users)) == 24
    # the server saw the samples inside the /metrics window, and nothing else: it opens once the workers'
    # warm-ups are done (a warm-up counted there would pass for another client's traffic)
    assert res.server.metrics["vllm:request_success_total"] == 24
    # two worker processes, round prompts k, k+2 on worker k, merged back in prompt order
    workers = [r.worker for r in res.records]
    pids = {w.split("@")[0] for w in workers}
    assert len(pids) == 2 and all(p.isdigit() for p in pids)
    assert workers[0::2] == [workers[0]] * 12 and workers[1::2] == [workers[1]] * 12
    assert res.load.load_mode == "rounds" and res.load.workers == 2
    assert [(x["index"], x["worker"], x["requests"]) for x in res.load.worker_lag] == [
        (0, workers[0], 12), (1, workers[1], 12)]
    assert all(x["client_lag_ms_p99"] is not None for x in res.load.worker_lag)


def test_a_worker_killed_mid_run_makes_the_run_an_error_naming_it(server, monkeypatch):
    monkeypatch.setenv(TEST_EXIT_AFTER_ENV, "1:6")  # spawned workers inherit it: worker 1 exits in round 3
    res = run(server, SPEC, "killed")
    assert res.verdict == "error"
    msg = " ".join(res.errors)
    assert "worker 1 (pid " in msg and f"died with exit code {TEST_EXIT_CODE} after 4 of 6 requests (round 3)" in msg
    assert res.n == 6 and len({r.worker for r in res.records}) == 1   # worker 0's three rounds; no fourth round
    assert res.load.workers == 2 and [x["index"] for x in res.load.worker_lag] == [0]


def test_a_worker_that_hangs_in_a_round_is_killed_and_named(monkeypatch):
    """A target that accepts and never answers: the round outlives the controller's bound (one
    request's bound + slack, made short here), so the worker is killed and named."""
    import socket
    import threading

    from pytest_llm_latency.client.drivers.worker_rounds import round_shards
    from pytest_llm_latency.client.transport.http import Timeouts
    from pytest_llm_latency.client.placement.processes.shard import Credentials, WorkerTarget
    from pytest_llm_latency.core.prompts.synthesis import Prompt

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.extend(srv.accept()[0] for _ in range(2)), daemon=True).start()
    target = WorkerTarget(f"http://127.0.0.1:{srv.getsockname()[1]}", "openai-completions", "m",
                          Timeouts(connect_s=5, idle_s=60, total_s=60, max_retries=0))
    monkeypatch.setattr(worker_pool, "ROUND_SLACK_S", 0.5)  # the controller's bound; the workers' timeout is 60 s
    try:
        shards = round_shards(2, target, [], 0, 2, output_tokens=4, extra=None)
        with worker_pool.WorkerPool(shards, Credentials(), request_timeout_s=0.5) as pool:
            assert not pool.failures                              # both ready (no warm-up)
            got = pool.send_round(0, [Prompt("", f"p{i}", 8, 8) for i in range(2)])
    finally:
        srv.close()
        for c in held:
            c.close()
    assert got == [] and sorted(pool.failures) == [0, 1]
    assert all(f"worker {k} (pid " in f and "did not answer in time after 0 of 1 requests (round 1)" in f
               for k, f in pool.failures.items()), pool.failures
    assert all(not p.is_alive() for p in pool.procs)


def test_samples_auto_with_workers_in_yaml_reaches_the_result_json(pytester):
    pytest.importorskip("jsonschema")
    pytester.makefile(".slo.yaml", rounds="""
workloads:
  rounds:
    prompt_tokens: 64
    output_tokens: 8
    concurrency: 4
    samples: auto
    min_samples: 8
    max_samples: 40
    confidence: 0.9
    workers: 2
    slo: {e2e_p90: 30s}
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--llm-latency-url={URL}",
                                      "--llm-latency-json=r.json", timeout=180)
    r.assert_outcomes(passed=1)
    doc = validated_results(pytester.path / "r.json")
    res = doc["results"][0]
    assert res["load"]["workers"] == 2 and res["load"]["load_mode"] == "rounds"
    assert [w["index"] for w in res["load"]["worker_lag"]] == [0, 1]
    rows = res["requests"]
    assert len(rows) == 24 and len({row["worker"] for row in rows}) == 2
    assert res["measurement"]["stop_reason"] == "every budget decided at 24 samples"
