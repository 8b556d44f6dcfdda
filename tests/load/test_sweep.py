"""``sweep``: bisection over the request rate (core.rate_sweep) -- on a known threshold, and live
against the reference target, whose model predicts its capacity."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.client.rate_sweep import run_sweep
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.rate_sweep import Step, SweepSpec, bisect_rate, make_sweep
from pytest_llm_latency.core.workload import make_workload
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
