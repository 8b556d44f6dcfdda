"""Worker processes (``workers: N``, ``client/placement/processes/workers.py``) against the embedded reference target
(a server process of its own), with real spawned worker processes: the issue's acceptance run
(open loop at 40 rps x 200 requests, two workers), the same schedule with one worker, and a
worker killed mid-run (the test hook ``LLM_LATENCY_TEST_WORKER_EXIT_AFTER``) -- an error naming it."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.client.placement.processes.shard import TEST_EXIT_AFTER_ENV, TEST_EXIT_CODE
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.targets.reference.launch import start_reference
from tests.helpers.results import validated_results

URL = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05"
SPEC = {"prompt_tokens": 64, "output_tokens": 8, "rate": 40, "requests": 200, "confidence": None,
        "slo": {"e2e_p95": "30s"}}


@pytest.fixture(scope="module")
def server():
    with start_reference(URL, mode="subprocess") as h:
        yield h


def run(server, spec: dict, seed: int = 7):
    with make_http_client() as http:
        client = make_client(Target(server.url, "openai-completions"), http)
        return judge(measure(client, make_workload("w", spec), seed=seed, nonce=f"workers{spec.get('workers', 1)}"))


def offsets_from_t0(res) -> list[int]:
    stamps = sorted(r.t_scheduled_ns for r in res.records)
    return [t - stamps[0] for t in stamps]


def test_two_workers_send_the_schedule_once_from_disjoint_shards_and_one_worker_the_same_schedule(server):
    two = run(server, {**SPEC, "workers": 2})
    assert two.verdict == "pass", two.failure_message()
    assert two.n == 200 and not two.failures
    by_worker: dict[str, set[str]] = {}
    for r in two.records:
        by_worker.setdefault(r.worker, set()).add(r.t_scheduled_ns)
    assert len(by_worker) == 2 and {len(s) for s in by_worker.values()} == {100}
    pids = {w.split("@")[0] for w in by_worker}
    assert len(pids) == 2 and all(p.isdigit() for p in pids)
    a, b = by_worker.values()
    assert a.isdisjoint(b)                                     # disjoint shards
    assert len({r.t_scheduled_ns for r in two.records}) == 200  # each scheduled arrival sent once
    # merged in schedule order, and the workers alternate through it (k, k+2, ...)
    assert [r.t_scheduled_ns for r in two.records] == sorted(r.t_scheduled_ns for r in two.records)
    assert {two.records[i].worker for i in (0, 2, 4)} != {two.records[i].worker for i in (1, 3, 5)}
    assert two.load.workers == 2 and len(two.load.worker_lag) == 2
    assert all(x["requests"] == 100 and x["send_lag_ms_p99"] is not None for x in two.load.worker_lag)

    one = run(server, SPEC)
    assert one.n == 200 and all(r.worker is None for r in one.records)   # the default, auto: sized to one here
    assert one.load.workers == 1 and one.load.workers_reason.startswith("auto: 40 requests/s x ")
    assert offsets_from_t0(one) == offsets_from_t0(two)         # the same schedule, to the nanosecond


CLOSED = {"prompt_tokens": 64, "output_tokens": 8, "concurrency": 4, "samples": 40, "confidence": None,
          "slo": {"e2e_p95": "30s"}}


def test_a_closed_loop_over_two_workers_counts_the_samples_across_both(server):
    res = run(server, {**CLOSED, "workers": 2})
    assert res.verdict == "pass", res.failure_message()
    assert res.n == 40 and not res.failures                      # samples counted across the workers
    pids = {r.worker.split("@")[0] for r in res.records}
    assert len(pids) == 2 and all(p.isdigit() for p in pids)   # from two distinct worker processes
    assert res.load.load_mode == "closed" and res.load.ramp_excluded == 4  # each stream's first request
    assert 0 <= res.load.drain_excluded <= 3                     # in flight when issuing stopped
    assert res.load.workers == 2 and [x["index"] for x in res.load.worker_lag] == [0, 1]
    assert sum(x["requests"] for x in res.load.worker_lag) == 40
    assert all(x["client_lag_ms_p99"] is not None for x in res.load.worker_lag)
    assert res.load.window_s > 0


def test_a_worker_that_dies_mid_run_makes_the_run_an_error_naming_it(server, monkeypatch):
    monkeypatch.setenv(TEST_EXIT_AFTER_ENV, "1:10")  # spawned workers inherit it: worker 1 exits after 10
    res = run(server, {**SPEC, "requests": 60, "workers": 2})
    assert res.verdict == "error"
    msg = " ".join(res.errors)
    assert "worker 1 (pid " in msg and f"died with exit code {TEST_EXIT_CODE} after" in msg and "of 30 requests" in msg
    assert len({r.worker for r in res.records}) == 1 and res.n == 30  # only worker 0's records, all of them
    assert res.load.workers == 2 and [x["index"] for x in res.load.worker_lag] == [0]  # the survivor's lag


def test_a_closed_loop_worker_that_dies_mid_run_makes_the_run_an_error_naming_it(server, monkeypatch):
    monkeypatch.setenv(TEST_EXIT_AFTER_ENV, "1:5")  # worker 1 exits after 5 requests
    res = run(server, {**CLOSED, "workers": 2})
    assert res.verdict == "error"
    assert any("worker 1 (pid " in e and f"died with exit code {TEST_EXIT_CODE} after" in e for e in res.errors)
    # the survivor shares the lost one's books (and maybe a lock it held): it is stopped at once, and named
    assert any(e.startswith("worker 0 (pid ") and "was stopped when another worker was lost" in e
               for e in res.errors), res.errors
    assert res.load.workers == 2 and not res.records


def test_workers_in_yaml_reach_the_result_json_and_its_request_rows(pytester):
    pytest.importorskip("jsonschema")
    pytester.makefile(".slo.yaml", load="""
workloads:
  spread:
    prompt_tokens: 64
    output_tokens: 8
    rate: 40
    requests: 40
    workers: 2
    confidence: null
    slo: {e2e_p95: 30s}
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--llm-latency-url={URL}",
                                      "--llm-latency-json=r.json", timeout=180)
    r.assert_outcomes(passed=1)
    doc = validated_results(pytester.path / "r.json")
    res = doc["results"][0]
    assert res["load"]["workers"] == 2 and [w["index"] for w in res["load"]["worker_lag"]] == [0, 1]
    rows = res["requests"]
    assert len(rows) == 40 and len({row["worker"] for row in rows}) == 2


def test_a_worker_that_hangs_is_killed_and_named(monkeypatch):
    """A target that accepts and never answers: the worker's request outlives the controller's
    bound (span + request timeout + slack, made short here), so it is killed and named."""
    import socket
    import threading

    from pytest_llm_latency.client.placement.processes import shard as worker_shard, workers
    from pytest_llm_latency.client.transport.http import Timeouts
    from pytest_llm_latency.core.prompts.synthesis import Prompt

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.extend(srv.accept()[0] for _ in range(2)), daemon=True).start()
    target = worker_shard.WorkerTarget(f"http://127.0.0.1:{srv.getsockname()[1]}", "openai-completions", "m",
                                       Timeouts(connect_s=5, idle_s=60, total_s=60, max_retries=0))
    prompts = [Prompt("", f"p{i}", 8, 8) for i in range(2)]
    shards = worker_shard.make_shards([0.0, 0.01], prompts, [], 2, target, warmup=0, output_tokens=4, extra=None,
                                      in_flight=2)
    monkeypatch.setattr(workers, "FINISH_SLACK_S", 0.5)  # the controller's bound; the worker's own timeout is 60 s
    try:
        run = workers.run_workers(shards, worker_shard.Credentials(), span_s=0.01, request_timeout_s=0.5)
    finally:
        srv.close()
        for c in held:
            c.close()
    assert not run.outcomes and len(run.worker_failures) == 2
    assert all(f"worker {k} (pid " in f and "did not finish in time after 0 of 1 requests" in f
               for k, f in enumerate(run.worker_failures)), run.worker_failures


def test_an_ab_run_over_two_workers_sends_every_block_of_both_arms_from_worker_processes(pytester):
    """A/B interleaved (``baseline_target``) with ``workers: 2``: each block of each arm is an open
    loop over two new worker processes; the candidate's rows name every block's workers."""
    pytest.importorskip("jsonschema")
    pytester.makefile(".slo.yaml", ab=f"""
target:
  url: "{URL}&jitter_seed=1"
  baseline_target: "{URL}&jitter_seed=2"
workloads:
  ab:
    prompt_tokens: 64
    output_tokens: 8
    rate: 40
    samples: 10
    warmup: 1
    workers: 2
    confidence: null
    slo: {{e2e_p50: 30s}}
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", timeout=180)
    r.assert_outcomes(passed=1)
    doc = validated_results(pytester.path / "r.json")
    res = doc["results"][0]
    assert res["load"]["ab_blocks"] == 2 and res["load"]["ab_mode"] == "interleaved"
    assert res["baseline"]["comparisons"] and all(c["n_base"] == c["n_candidate"] == 10 and c["blocks"] == 2
                                                  for c in res["baseline"]["comparisons"])  # both arms, every block
    lag = res["load"]["worker_lag"]
    assert res["load"]["workers"] == 2 and [w["index"] for w in lag] == [0, 1, 0, 1]  # two blocks, two each
    assert sum(w["requests"] for w in lag) == 10
    rows = res["requests"]
    assert len(rows) == 10 and {row["worker"] for row in rows} == {w["worker"] for w in lag}
    assert len({row["worker"].split("@")[0] for row in rows}) == 4       # new processes every block


@pytest.mark.parametrize("spec", [
    {"rate": 20, "requests": 16, "workers": 2},                                # an open loop
    {"concurrency": 4, "samples": "auto", "min_samples": 8, "max_samples": 16,  # samples: auto rounds
     "confidence": 0.9, "workers": 2, "warmup": 4, "slo": {"e2e_p50": "30s"}},
], ids=["open_loop", "rounds"])
def test_a_replayed_run_over_workers_is_not_judged_on_the_servers_prefix_cache(spec):
    """The same nonce twice against a caching server: the second run's prompts are served from the
    cache, and the workers' own warm-ups (before the common start) must not pass for other clients'
    traffic in the /metrics deltas, which would turn "not judged" into a note."""
    spec = {"prompt_tokens": 256, "output_tokens": 4, "warmup": 1, "confidence": None,
            "slo": {"e2e_p50": "30s"}, **spec}
    with start_reference(URL + "&prefix_caching=1", mode="subprocess") as h, make_http_client() as http:
        client = make_client(Target(h.url, "openai-completions"), http)
        first, second = (judge(measure(client, make_workload("w", spec), seed=3, nonce="replayed"))
                         for _ in range(2))
    assert first.verdict == "pass", first.failure_message()
    assert second.verdict == "error", second.failure_message()
    assert any("served from the server's prefix cache" in e for e in second.errors), second.errors
    assert not any("other clients share the server" in n for n in second.notes), second.notes


def test_a_worker_that_dies_between_ready_and_the_start_is_named_never_a_crash(monkeypatch):
    """The controller's "go" to a worker already gone is that worker's failure, named, not a
    BrokenPipeError out of the run (the other worker is killed: no sample is sent)."""
    import multiprocessing

    from pytest_llm_latency.client.placement.processes import shard as worker_shard, workers
    from pytest_llm_latency.core.prompts.synthesis import Prompt
    from tests.helpers.fake_workers import ready_then_exit

    monkeypatch.setattr(workers, "worker_main", ready_then_exit)
    target = worker_shard.WorkerTarget("http://127.0.0.1:9", "openai-completions", "m")  # never contacted
    shards = worker_shard.make_shards([0.0, 0.01], [Prompt("", f"p{i}", 8, 8) for i in range(2)], [], 2, target,
                                      warmup=0, output_tokens=4, extra=None, in_flight=2)

    def gone() -> None:  # the "ready" workers exit; wait (bounded) until they have, then the start
        for p in multiprocessing.active_children():
            if p.name.startswith("llm-latency-worker-"):
                p.join(30)

    run = workers.run_workers(shards, worker_shard.Credentials(), span_s=0.01, request_timeout_s=1.0, on_ready=gone)
    assert run.outcomes == [] and run.worker_failures
    assert run.worker_failures[0].startswith("worker 0 (pid ") and "died with exit code 3" in run.worker_failures[0]
