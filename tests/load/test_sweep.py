"""``sweep``: bisection over the request rate (core.spec.rate_sweep) -- on a known threshold, and live
against the reference target, whose model predicts its capacity."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.client.drivers.rate_steps import run_sweep
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.rate_sweep import Step, SweepSpec, bisect_rate, make_sweep
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.targets.reference.launch import parse_reference_url, start_reference


def threshold(cap):
    calls = []

    def run_at(rate):
        calls.append(rate)
        return Step(rate, rate <= cap)
    return run_at, calls


@pytest.mark.parametrize("cap", [1.3, 17.0, 37.3, 63.9])
def test_bisection_brackets_a_known_capacity_within_tolerance_in_bounded_steps(cap):
    run_at, calls = threshold(cap)
    sw = bisect_rate(run_at, SweepSpec(1.0, 64.0, max_steps=10, tolerance=0.05))
    assert len(calls) <= 10
    assert sw.capacity <= cap < sw.lowest_failing <= sw.capacity * 1.05
    assert [s.rate for s in sw.curve()] == sorted(calls)


def test_bounded_ends_are_said_not_guessed():
    run_at, calls = threshold(100.0)
    sw = bisect_rate(run_at, SweepSpec(1.0, 64.0))
    assert calls == [64.0] and sw.capacity == 64.0 and sw.bounded == "at least rate_max 64 req/s"
    run_at, calls = threshold(0.5)
    sw = bisect_rate(run_at, SweepSpec(1.0, 64.0))
    assert calls == [64.0, 1.0] and sw.capacity is None and sw.bounded == "below rate_min 1 req/s"
    run_at, calls = threshold(10.0)
    assert len(bisect_rate(run_at, SweepSpec(1.0, 64.0, max_steps=4, tolerance=0.01)).steps) == 4


@pytest.mark.parametrize("spec, msg", [({"rate_min": 5}, "needs rate_min and rate_max"),
                                       ({"rate_min": 5, "rate_max": 2}, "must be below"),
                                       ({"rate_min": 1, "rate_max": 2, "max_steps": 1}, "max_steps"),
                                       ({"rate_min": 1, "rate_max": 2, "steps": 3}, "unknown key")])
def test_bad_sweep_specs(spec, msg):
    with pytest.raises(ConfigError, match=msg):
        make_sweep(spec, "workloads.w.sweep")
    with pytest.raises(ConfigError, match="chooses the rate"):
        make_workload("w", {"class": "chat", "rate": 3, "rate_sweep": {"rate_min": 1, "rate_max": 8}})


def predicted_capacity(url: str, prompt: int, output: int) -> float:
    """The reference model's capacity with every slot busy: each request holds one of
    ``max_num_seqs`` slots for ``output`` steps (its prefill step emits the first token); a
    step costs what ``Physics.step`` says for a full batch, one slot prefilling per step on
    average ``1/output`` of the time."""
    cfg = parse_reference_url(url)
    ph, s = cfg.physics(), cfg.max_num_seqs
    ctx = prompt + output // 2
    decode = ph.step([ctx] * s).seconds
    mixed = ph.step([ctx] * (s - 1), [(prompt, 0)]).seconds
    step = (mixed + (output - 1) * decode) / output
    return s / (output * step * cfg.time_scale)


def test_sweep_converges_within_10_percent_of_the_reference_models_capacity():
    url = "reference://h100-sxm/llama-3.1-8b?max_num_seqs=4&time_scale=0.5"
    prompt, output = 64, 32
    cap = predicted_capacity(url, prompt, output)
    # constant arrivals: below capacity nothing queues, above it the queue grows by request
    w = make_workload("w", {"prompt_tokens": prompt, "output_tokens": output, "requests": 40, "warmup": 4,
                            "arrival": "constant", "slo": {"ttft_p95": "30ms"},
                            "rate_sweep": {"rate_min": 8, "rate_max": 160, "max_steps": 9, "tolerance": 0.04}})
    with start_reference(url, mode="subprocess") as h:
        client = make_client(Target(h.url, "openai-completions"), make_http_client())
        res, sw = run_sweep(lambda wl: measure(client, wl, salt_context=repr(wl.load.rate)), w, judge)
        judge(res)
    print(f"predicted {cap:.1f} req/s; {sw.describe()}")
    assert len(sw.steps) <= 9 and not sw.bounded, sw.describe()
    assert abs(sw.capacity / cap - 1) <= 0.10, (cap, sw.describe())
    assert res.load.rate_sweep_capacity_rps == pytest.approx(sw.capacity, rel=1e-3)
    assert res.notes[0].startswith("rate_sweep: capacity ")


# ---------------------------------------------------------------------- over worker processes (workers: N)
# one decode slot and real time: ~40 ms a request, so 400 req/s queues (TTFT p50 ~ 190 ms) and 10 req/s never does
# (~10 ms), both measured on a busy 2-core machine
WORKERS_URL = "reference://h100-sxm/llama-3.1-8b?max_num_seqs=1&time_scale=1"
WORKERS_SWEEP = {"prompt_tokens": 32, "output_tokens": 8, "requests": 8, "warmup": 1, "arrival": "constant",
                 "workers": 2, "slo": {"ttft_p50": "80ms"},
                 "rate_sweep": {"rate_min": 10, "rate_max": 400, "max_steps": 2}}


def sweep_over_workers(url: str, spec: dict):
    """``run_sweep`` as the driver runs it, each step's judged measurement kept in order."""
    steps = []
    with make_http_client() as http:
        client = make_client(Target(url, "openai-completions"), http)

        def measure_at(wl):
            steps.append(measure(client, wl, seed=3, salt_context=repr(wl.load.rate)))
            return steps[-1]
        res, sw = run_sweep(measure_at, make_workload("w", spec), judge)
    return judge(res), sw, steps


def test_a_rate_sweep_over_two_workers_sends_every_step_from_both_and_finds_the_capacity():
    with start_reference(WORKERS_URL, mode="subprocess") as h:
        res, sw, steps = sweep_over_workers(h.url, WORKERS_SWEEP)
    assert [(s.rate, s.passed) for s in sw.steps] == [(400.0, False), (10.0, True)], sw.describe()
    for step in steps:  # each step an open loop over two worker processes, its records merged exactly
        pids = {r.worker.split("@")[0] for r in step.records}
        assert len(pids) == 2 and all(p.isdigit() for p in pids), step.records
        assert step.n == 8 and len({r.t_scheduled_ns for r in step.records}) == 8
        assert step.load.workers == 2 and [x["requests"] for x in step.load.worker_lag] == [4, 4]
    assert res.verdict == "pass", res.failure_message()
    assert res is steps[1] and res.load.rate_sweep_capacity_rps == 10 and res.load.rate_sweep_lowest_failing_rps == 400
    assert res.load.workers == 2 and res.notes[0].startswith("rate_sweep: capacity 10 req/s (passes; 400 req/s fails)")


def test_a_worker_dying_in_a_sweep_step_ends_the_sweep_as_an_error_naming_it(monkeypatch):
    from pytest_llm_latency.client.placement.processes.shard import TEST_EXIT_AFTER_ENV, TEST_EXIT_CODE

    monkeypatch.setenv(TEST_EXIT_AFTER_ENV, "1:2")  # spawned workers inherit it: worker 1 exits after 2 requests
    with start_reference(WORKERS_URL, mode="subprocess") as h:
        res, sw, steps = sweep_over_workers(h.url, WORKERS_SWEEP)
    assert len(steps) == 1 and sw.stopped_at is sw.steps[0]            # not judged: no further step
    assert res.verdict == "error"
    assert any("worker 1 (pid " in e and f"died with exit code {TEST_EXIT_CODE}" in e for e in res.errors), res.errors
    assert res.notes[0].startswith("rate_sweep: stopped at 400 req/s, not judged (worker 1 (pid ")
