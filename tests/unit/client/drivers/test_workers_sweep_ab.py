"""Rate sweeps and A/B runs over worker processes (issue 28): the refusals lifted and kept
(``core.spec.load_spec``), a step that lost a worker ending the sweep (``core.spec.rate_sweep``), and the
worker figures and failures of every step / block carried into the result the run is judged on
(``client.drivers.rate_steps.run_sweep``, ``client.drivers.ab_interleaved``).  No server: the steps' and
blocks' measurements are built here, judged by the real ``core.checks.judge``."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.drivers.ab_alternating import ABAlternating
from pytest_llm_latency.client.drivers.ab_interleaved import ABInterleaved
from pytest_llm_latency.client.drivers.base import ABArms, Run
from pytest_llm_latency.client.drivers.rate_steps import run_sweep
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.checks.sweeps import check_rate_sweep
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.result.facts import RateSweepRun
from pytest_llm_latency.core.spec.rate_sweep import Step, SweepSpec, bisect_rate
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.spec.workload import make_workload, with_ray, with_workers
from tests.helpers.records import record

BT = "http://127.0.0.1:9"
SWEEP = {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "requests": 6, "warmup": 1,
         "slo": {"ttft_p50": 200}, "rate_sweep": {"rate_min": 1, "rate_max": 16, "max_steps": 4}}
AB = {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "rate": 20, "samples": 10, "warmup": 1,
      "slo": {}, "baseline_target": BT}


def where(path):
    return "f.slo.yaml:3 workloads.w." + ".".join(map(str, path))


# ---------------------------------------------------------------------- the refusals (core.spec.load_spec)
@pytest.mark.parametrize("spec", [
    SWEEP,                                                                  # every step an open loop
    AB,                                                                     # A/B, an open loop a block
    {**AB, "rate": None, "concurrency": 4},                                 # A/B, a closed loop a block
    {**AB, "baseline_target": {"url": BT, "mode": "alternating", "block": 5}},
])
def test_a_rate_sweep_and_an_ab_run_take_workers(spec):
    spec = {k: v for k, v in spec.items() if v is not None}
    assert make_workload("w", {**spec, "workers": 2}).workers == 2
    assert with_workers(make_workload("w", spec), 2, "--llm-latency-workers", run_wide=True).workers == 2


def test_an_ab_run_without_a_loop_keeps_the_one_stream_refusal():
    spec = {k: v for k, v in AB.items() if k != "rate"}  # serial blocks: one request at a time
    with pytest.raises(ConfigError, match=r"workloads\.w\.workers: 2 worker processes -- .*give rate: R"):
        make_workload("w", {**spec, "workers": 2}, where)
    assert with_workers(make_workload("w", spec), 2, "--llm-latency-workers", run_wide=True).workers == 1


def test_a_rate_sweep_takes_ray_with_one_shard_per_node_by_default():
    w = make_workload("w", {**SWEEP, "ray": "127.0.0.1:6379"})
    assert w.ray == "127.0.0.1:6379" and w.workers == "auto"


def test_an_ab_run_on_ray_is_refused_naming_why_and_the_fix():
    with pytest.raises(ConfigError, match=r"workloads\.w\.ray: one shard per Ray node -- an A/B run "
                                          r"\(baseline_target\) on Ray nodes is not yet supported: every block .* "
                                          r"\(worker processes of this host: workers: N\); or drop ray"):
        make_workload("w", {**AB, "ray": "127.0.0.1:6379"}, where)
    w = make_workload("w", AB)
    assert with_ray(w, "127.0.0.1:6379", "--llm-latency-ray", run_wide=True).ray is None  # run-wide: left alone


def test_samples_auto_takes_ray_with_a_request_of_each_round_per_node():
    w = make_workload("w", {"class": "chat", "concurrency": 4, "samples": "auto", "ray": "127.0.0.1:1"}, where)
    assert w.ray == "127.0.0.1:1" and w.workers == "auto" and w.sequential
    with pytest.raises(ConfigError, match=r"workloads\.w\.ray: one shard per Ray node -- with ray, workers is "
                                          r"the number of nodes: samples: auto sends rounds of 1 request"):
        make_workload("w", {"class": "chat", "concurrency": 1, "samples": "auto", "ray": "127.0.0.1:1"}, where)


# ---------------------------------------------------------------------- a step that lost a worker ends the sweep
def test_a_stopped_step_ends_the_bisection_and_is_neither_pass_nor_fail():
    calls = []

    def run_at(rate):
        calls.append(rate)
        return Step(rate, rate <= 8, "worker 1 (pid 9) died" if rate == 4 else "", stopped=rate == 4)

    sw = bisect_rate(run_at, SweepSpec(1.0, 16.0, max_steps=8))
    assert calls == [16.0, 1.0, 4.0]                                 # rate_max, rate_min, the midpoint: stopped
    assert sw.capacity == 1.0 and sw.lowest_failing == 16.0 and sw.stopped_at is sw.steps[-1]
    stop = bisect_rate(lambda r: Step(r, False, "worker 1 (pid 9) died", stopped=r == 16.0), SweepSpec(1.0, 16.0))
    assert [s.rate for s in stop.steps] == [16.0]                   # nothing after the stopped step
    assert stop.stopped_at is stop.steps[0] and stop.capacity is None and stop.lowest_failing is None
    assert stop.bounded == ""                                        # not "below rate_min": never tried
    assert stop.describe().startswith("stopped at 16 req/s, not judged (worker 1 (pid 9) died)")
    assert "16 ERROR" in stop.describe()
    res = measured(make_workload("w", SWEEP), [record(50)], [])
    res.facts.rate_sweep = RateSweepRun(stop, "", None)
    assert check_rate_sweep(res) == []                               # the lost worker is the error, not a capacity


def test_a_stopped_step_mid_bisection_stops_it_there():
    seen = []

    def run_at(rate):
        seen.append(rate)
        return Step(rate, rate <= 4, stopped=len(seen) == 3)

    sw = bisect_rate(run_at, SweepSpec(1.0, 16.0, max_steps=8))
    assert len(sw.steps) == 3 and sw.steps[-1].stopped and sw.capacity == 1.0 and sw.lowest_failing == 16.0


# ---------------------------------------------------------------------- run_sweep carries every step's lost workers
def step_result(w, *, ttft_ms: float, workers: int = 2, lost: int = 0, behind: int = 0):
    """A step's measurement over ``workers`` workers, ``lost`` of them died and ``behind`` of the
    survivors fell behind, as ``client.drivers.load_report.load_summary`` records them."""
    res = measured(w, [record(ttft_ms) for _ in range(w.samples)], [])
    res.load.workers = workers
    res.load.worker_lag = [{"worker": f"{100 + k}@h", "index": k, "requests": 3} for k in range(lost, workers)]
    res.facts.workers_failed = ([f"worker {k} (pid {100 + k}) died with exit code 86 after 1 of 3 requests"
                                 for k in range(lost)] +
                                [f"worker {k} ({100 + k}@h) fell behind (CPU-starved: lag p99 90 ms)"
                                 for k in range(lost, lost + behind)])
    return res


def sweep(plan):
    """run_sweep with each step's measurement from ``plan(rate, w)``; the steps' rates in order."""
    rates = []

    def measure_at(w):
        assert w.workers == 2 and w.sweep is None and w.load.rate is not None  # workers kept on each step
        rates.append(w.load.rate)
        return plan(w.load.rate, w)
    res, sw = run_sweep(measure_at, make_workload("w", {**SWEEP, "workers": 2}), judge)
    return judge(res), sw, rates


def test_every_step_over_workers_and_the_capacity_found_as_before():
    res, sw, rates = sweep(lambda rate, w: step_result(w, ttft_ms=50 if rate <= 4 else 500))
    assert res.verdict == "pass", res.failure_message()
    assert rates == [16.0, 1.0, 4.0, 8.0]                              # max_steps: 4
    assert sw.capacity == 4.0 and sw.lowest_failing == 8.0 and sw.stopped_at is None
    assert res.load.workers == 2 and [x["index"] for x in res.load.worker_lag] == [0, 1]  # the reported step's
    assert res.load.rate_sweep_capacity_rps == 4.0


def test_a_worker_lost_in_a_step_makes_the_sweep_an_error_naming_step_and_worker_and_ends_it():
    def plan(rate, w):
        return step_result(w, ttft_ms=50 if rate <= 4 else 500, lost=1 if rate == 4 else 0)
    res, sw, rates = sweep(plan)
    assert rates == [16.0, 1.0, 4.0]                                    # max_steps 4, but stopped at the loss
    assert sw.stopped_at is not None and sw.stopped_at.rate == 4.0 and sw.capacity == 1.0
    assert res.verdict == "error"                                       # never the capacity step's pass
    assert res.errors and res.errors[0].startswith(
        "rate_sweep step at 4 req/s: worker 0 (pid 100) died with exit code 86"), res.errors
    assert res.shown_notes[0].startswith("rate_sweep: stopped at 4 req/s, not judged (worker 0 (pid 100) died")
    assert res.load.rate_sweep_capacity_rps == 1.0 and res.load.workers == 2
    assert res.load.rate_sweep_lowest_failing_rps == 16.0                # the lost step is not a failing rate


def test_a_worker_lost_in_the_first_step_makes_the_sweep_an_error_at_once():
    res, sw, rates = sweep(lambda rate, w: step_result(w, ttft_ms=50, lost=1))
    assert rates == [16.0] and res.verdict == "error" and res.load.workers == 2
    assert [f.check for f in res.findings if f.kind == "failed"] == []  # no "no rate meets the SLO" on top
    assert any("worker 0 (pid 100) died" in e for e in res.errors)


def test_a_worker_behind_in_a_step_makes_it_unjudged_and_with_no_server_fail_above_the_capacity_an_error():
    """A client that fell behind at a rate says nothing of the server there: neither a pass nor a
    fail (a fail would put the client's limit into the capacity).  The bisection goes on below it;
    with no rate the server failed to bracket the capacity, the run is an error naming the step."""
    def plan(rate, w):
        return step_result(w, ttft_ms=50, behind=1 if rate > 4 else 0)  # the client, not the server, at > 4
    res, sw, rates = sweep(plan)
    assert rates == [16.0, 1.0, 4.0, 8.0] and sw.stopped_at is None     # max_steps 4: bisected below 16
    assert sw.capacity == 4.0 and sw.lowest_failing is None             # 8 and 16 are not failing rates
    assert sw.unjudged_bracket is not None and sw.unjudged_bracket.rate == 8.0
    assert "fell behind" in sw.steps[0].summary
    assert res.verdict == "error"
    assert any(e.startswith("sweep: the step at 8 req/s could not be judged (") and "fell behind" in e
               for e in res.errors), res.errors


def sweep_one_process(plan):
    rates = []

    def measure_at(w):
        rates.append(w.load.rate)
        res = measured(w, [record(plan(w.load.rate)[0]) for _ in range(w.samples)], [])
        res.facts.client_fell_behind = plan(w.load.rate)[1]
        return res
    res, sw = run_sweep(measure_at, make_workload("w", SWEEP), judge)
    return judge(res), sw, rates


def test_one_process_step_whose_client_fell_behind_is_unjudged_not_a_fail():
    res, sw, rates = sweep_one_process(lambda rate: (50, rate > 4))
    assert rates == [16.0, 1.0, 4.0, 8.0] and res.verdict == "error"
    assert any("could not be judged (the client fell behind" in e for e in res.errors), res.errors


def test_an_unjudged_step_above_a_rate_the_server_failed_leaves_the_capacity_standing_with_a_note():
    """The client fell behind at rate_max only; the server fails from 8 req/s (TTFT over budget):
    the capacity (4) is bracketed by the server's fail, so it passes, and says what was not judged."""
    res, sw, rates = sweep_one_process(lambda rate: (50 if rate <= 4 else 500, rate >= 16))
    assert rates == [16.0, 1.0, 4.0, 8.0]
    assert sw.capacity == 4.0 and sw.lowest_failing == 8.0 and sw.unjudged_bracket is None
    assert res.verdict == "pass", res.failure_message()
    assert any(n.startswith("sweep: 1 step(s) could not be judged (at 16 req/s: the client fell behind")
               and "bracketed by the failing step at 8 req/s" in n for n in res.shown_notes), res.shown_notes


# ---------------------------------------------------------------------- A/B: every block's workers, both arms
class Blocks:
    """The inner (base) driver of an A/B run: each block's measurement over 2 workers; ``lost``:
    (arm client, block) pairs whose block lost worker 1."""

    def __init__(self, lost=()):
        self.lost, self.calls = set(lost), []

    def __call__(self, w):
        return self

    def measure(self, client, w, run):
        block = sum(1 for c, _, _ in self.calls if c == client)
        self.calls.append((client, w, run.salt_context))
        res = measured(w, [record(50 if client == "a" else 60) for _ in range(w.samples)], [])
        res.load.workers = 2
        gone = (client, block) in self.lost
        res.load.worker_lag = [{"worker": f"{client}{block}{k}@h", "index": k, "requests": w.samples}
                               for k in range(2 - gone)]
        res.facts.workers_failed = ["worker 1 (pid 7) did not finish in time after 0 of 3 requests"] if gone else []
        return res


def ab(inner, driver=ABInterleaved, spec=AB):
    w = make_workload("w", {**spec, "workers": 2})
    arms = ABArms("b", 5) if driver is ABInterleaved else ABArms(lambda: "b", 5, lambda: "a", lambda arm: None)
    return driver(inner).measure_arms("a", w, Run(salt_context="t", ab=arms))


def test_ab_blocks_go_through_the_workers_each_warming_its_new_processes_and_every_block_is_reported():
    inner = Blocks()
    a, b = ab(inner)
    assert [(c, w.samples, w.warmup, w.workers) for c, w, _ in inner.calls] == [
        ("a", 5, 1, 2), ("b", 5, 1, 2), ("a", 5, 1, 2), ("b", 5, 1, 2)]   # warmed every block: new processes
    assert len({s for _, _, s in inner.calls}) == 4                       # each block its own prompts
    assert a.n == 10 and a.load.workers == 2 and a.load.ab_blocks == 2
    assert [x["worker"] for x in a.load.worker_lag] == ["a00@h", "a01@h", "a10@h", "a11@h"]
    assert [x["worker"] for x in b.load.worker_lag] == ["b00@h", "b01@h", "b10@h", "b11@h"]
    assert judge(a).verdict == "pass" and not a.facts.workers_failed


@pytest.mark.parametrize("driver,spec", [(ABInterleaved, AB),
                                         (ABAlternating, {**AB, "baseline_target": {"url": BT, "mode": "alternating",
                                                                                    "block": 5}})])
def test_a_worker_lost_in_any_block_of_either_arm_makes_the_run_an_error_naming_block_and_arm(driver, spec):
    a, b = ab(Blocks(lost={("b", 1)}), driver, spec)
    assert a.facts.workers_failed == ["A/B block 2 (baseline target): worker 1 (pid 7) did not finish in time "
                                      "after 0 of 3 requests"]
    assert judge(a).verdict == "error"                                   # the candidate's verdict is the run's
    assert b.load.workers == 2 and len(b.load.worker_lag) == 3           # the survivors', every block
    a, _ = ab(Blocks(lost={("a", 0)}), driver, spec)
    assert judge(a).verdict == "error" and a.errors[0].startswith("A/B block 1 (candidate): worker 1 (pid 7)")


def test_one_process_ab_blocks_warm_only_the_first_block_as_before():
    inner = Blocks()
    ABInterleaved(inner).measure_arms("a", make_workload("w", AB), Run(ab=ABArms("b", 5)))
    assert [w.warmup for _, w, _ in inner.calls] == [1, 1, 0, 0]
