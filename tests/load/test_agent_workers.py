"""Agent sessions over worker processes (``workers: N``, ``client/agent/workers.py``) against the
embedded reference target, with real spawned workers: sessions dealt whole (each session's turns
from one process, two processes in all), the controller's salts distinct across sessions (and the
server's cache agrees: no turn 1 hits anything), the result the same as one process's; a worker
killed mid-run (the ``LLM_LATENCY_TEST_WORKER_EXIT_AFTER`` hook) is an error naming it; and the
YAML key through pytest."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.placement.processes import workers as workers_mod
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.client.placement.processes.shard import TEST_EXIT_AFTER_ENV, TEST_EXIT_CODE
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.plugin.report.document import result_entry
from pytest_llm_latency.targets.reference.launch import start_reference
from tests.helpers.results import validated_results

URL = "reference://h100-sxm/llama-3.1-8b?prefix_caching=1&time_scale=0"
STEPS = 3
SPEC = {"class": "agent_session", "prompt_tokens": 256, "output_tokens": 8, "steps": STEPS, "tool_result_tokens": 16,
        "tool_time": "1ms", "samples": 6, "concurrency": 2, "warmup": 1,
        "slo": {"prefix_reuse_min": 0.5, "turn_ttft_max": "30s", "turn_ttft_p95": None, "session_e2e_p95": None}}


@pytest.fixture(scope="module")
def servers():
    """Two reference targets: each run has a prefix cache of its own (the same salts, no shared hits)."""
    with start_reference(URL, mode="thread") as a, start_reference(URL, mode="thread") as b:
        yield a.url, b.url


def run(url: str, spec: dict, nonce: str = "agentworkers"):
    with make_http_client() as http:
        client = make_client(Target(url, "openai-chat"), http)
        return judge(measure(client, make_workload("s", spec), seed=5, nonce=nonce))


def shape(entry) -> object:
    """The keys of a result entry, nested (values left out)."""
    if isinstance(entry, dict):
        return {k: shape(v) for k, v in entry.items()}
    if isinstance(entry, list):
        return [shape(v) for v in entry[:1]]
    return type(entry).__name__ if entry is None or isinstance(entry, (bool, str)) else "number"


def test_two_workers_run_each_session_whole_from_distinct_salts_as_one_process_would(servers, monkeypatch):
    dealt: list = []
    real = workers_mod.run_workers

    def spy(shards, *args, **kwargs):
        dealt.extend(shards)
        return real(shards, *args, **kwargs)
    monkeypatch.setattr(workers_mod, "run_workers", spy)
    two = run(servers[1], {**SPEC, "workers": 2})
    assert two.verdict == "pass", two.failure_message()
    sessions = two.facts.agent.sessions
    assert [s.index for s in sessions] == list(range(6)) and all(len(s.turns) == STEPS and not s.failed
                                                                 for s in sessions)
    assert two.n == 6 * STEPS and not two.failures
    per_session = [{r.worker for r in two.records[i * STEPS:(i + 1) * STEPS]} for i in range(6)]  # session-major
    assert all(len(w) == 1 for w in per_session)                              # each session on one process
    pids = [next(iter(w)).split("@")[0] for w in per_session]
    assert len(set(pids)) == 2 and all(p.isdigit() for p in pids)             # two worker processes
    assert pids[0::2] == [pids[0]] * 3 and pids[1::2] == [pids[1]] * 3        # session i on worker i mod 2
    salts = [p.system.split(":")[0] for s in dealt for p in s.prompts]
    warm_salts = [p.system.split(":")[0] for s in dealt for p in s.warm]
    assert len(salts) == 6 and len(set(salts + warm_salts)) == 6 + 2          # one salt a session, a worker's warm-up
    assert all(two.records[i * STEPS].server_timings["cached_tokens"] == 0 for i in range(6))  # no shared prefix
    assert two.load.workers == 2 and [x["index"] for x in two.load.worker_lag] == [0, 1]
    assert [x["requests"] for x in two.load.worker_lag] == [3 * STEPS, 3 * STEPS]

    one = run(servers[0], SPEC)  # the same seed and nonce on a cache of its own: the same sessions
    assert one.verdict == "pass", one.failure_message()
    assert one.load.workers is None and all(r.worker is None for r in one.records)
    tokens = lambda res: [(t.prompt_tokens, t.cached_tokens) for s in res.facts.agent.sessions  # noqa: E731
                          for t in s.turns]
    assert tokens(two) == tokens(one)                                         # turn by turn, session by session
    assert two.agent.prefix_reuse == one.agent.prefix_reuse
    assert two.agent.tools_overhead_tokens == one.agent.tools_overhead_tokens
    a, b = result_entry(two, "t", detail=True), result_entry(one, "t", detail=True)
    assert set(a.pop("load")) == {"workers", "worker_lag"} and "load" not in b  # the workers' part alone
    for row in a["requests"]:
        row.pop("worker")
    assert shape(a) == shape(b)                                               # the same result, bar the workers


def test_a_worker_killed_mid_run_makes_the_run_an_error_naming_it(servers, monkeypatch):
    monkeypatch.setenv(TEST_EXIT_AFTER_ENV, "1:2")  # spawned workers inherit it: worker 1 exits after 2 turns
    res = run(servers[0], {**SPEC, "workers": 2}, nonce="killed")
    assert res.verdict == "error"
    msg = " ".join(res.errors)
    assert "worker 1 (pid " in msg and f"died with exit code {TEST_EXIT_CODE} after 2 of {3 * STEPS} requests" in msg
    assert [s.index for s in res.facts.agent.sessions] == [0, 2, 4]          # only worker 0's sessions, whole
    assert len({r.worker for r in res.records}) == 1 and res.n == 3 * STEPS
    assert res.load.workers == 2 and [x["index"] for x in res.load.worker_lag] == [0]


def test_agent_workers_in_yaml_reach_the_result_json(pytester):
    pytest.importorskip("jsonschema")
    pytester.makefile(".slo.yaml", agent="""
workloads:
  tools:
    class: agent_session
    prompt_tokens: 256
    output_tokens: 8
    steps: 2
    tool_result_tokens: 16
    tool_time: 0
    samples: 4
    concurrency: 2
    workers: 2
    slo: {prefix_reuse_min: 0.5, turn_ttft_max: 30s, turn_ttft_p95: null, session_e2e_p95: null}
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--llm-latency-url={URL}",  # completions: a chat twin
                                      "--llm-latency-json=r.json", timeout=180)
    r.assert_outcomes(passed=1)
    doc = validated_results(pytester.path / "r.json")
    (res,) = doc["results"]
    assert res["agent"]["sessions"] == 4 and res["n"] == 8
    assert res["load"]["workers"] == 2 and [w["index"] for w in res["load"]["worker_lag"]] == [0, 1]
    assert len({row["worker"] for row in res["requests"]}) == 2
