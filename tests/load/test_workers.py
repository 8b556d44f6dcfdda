"""Worker processes (``workers: N``, ``client/workers.py``) against the embedded reference target
(a server process of its own), with real spawned worker processes: the issue's acceptance run
(open loop at 40 rps x 200 requests, two workers), the same schedule with one worker, and a
worker killed mid-run (the test hook ``LLM_LATENCY_TEST_WORKER_EXIT_AFTER``) -- an error naming it."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.client.workers import TEST_EXIT_AFTER_ENV, TEST_EXIT_CODE
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.workload import make_workload
from pytest_llm_latency.targets.reference.launch import start_reference

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
    assert one.n == 200 and one.load.workers is None and all(r.worker is None for r in one.records)
    assert offsets_from_t0(one) == offsets_from_t0(two)         # the same schedule, to the nanosecond


def test_a_worker_that_dies_mid_run_makes_the_run_an_error_naming_it(server, monkeypatch):
    monkeypatch.setenv(TEST_EXIT_AFTER_ENV, "1:10")  # spawned workers inherit it: worker 1 exits after 10
    res = run(server, {**SPEC, "requests": 60, "workers": 2})
    assert res.verdict == "error"
    msg = " ".join(res.errors)
    assert "worker 1 (pid " in msg and f"died with exit code {TEST_EXIT_CODE} after" in msg and "of 30 requests" in msg
    assert len({r.worker for r in res.records}) == 1 and res.n == 30  # only worker 0's records, all of them
    assert res.load.workers == 2 and [x["index"] for x in res.load.worker_lag] == [0]  # the survivor's lag
