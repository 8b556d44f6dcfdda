"""Mixed workloads (issue 37) on every loop that takes them and both local placements, against the embedded
reference target: each request carries its class from the prompt to the record (through the one sender, in
this process or a worker's), the class counts are exact, and each class is judged on its own budgets.  The Ray
nodes: tests/load/test_ray_drivers.py."""
from __future__ import annotations

from collections import Counter

import pytest

from pytest_llm_latency.client.drivers.base import ABArms, Run
from pytest_llm_latency.client.drivers.registry import driver_for
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.spec.workload import make_workload
from tests.unit.client.drivers.test_drivers import reference  # noqa: F401  (the module's reference target)

MIX = {"short": {"weight": 0.75, "prompt_tokens": 48, "output_tokens": 4},
       "long": {"weight": 0.25, "prompt_tokens": 2000, "output_tokens": 6}}
SLO = {"short": {"ttft_p50": 60_000}, "long": {"ttft_p50": 60_000}}
#: loop -> what its workload adds (8 requests: 6 short, 2 long); A/B: blocks of open loops
LOOPS = {"closed_loop": {"concurrency": 2}, "open_loop": {"rate": 50}, "ab_interleaved": {"rate": 50},
         "rate_sweep": {"rate_sweep": {"rate_min": 20, "rate_max": 40, "max_steps": 2}}}


def mix_spec(loop: str, url: str, **extra) -> dict:
    spec = {"mix": MIX, "slo": SLO, "requests": 8, "warmup": 1, **LOOPS[loop], **extra}
    if loop == "ab_interleaved":
        spec["baseline_target"] = url
    return spec


@pytest.mark.parametrize("loop, workers", [(loop, 1) for loop in sorted(LOOPS)]
                         + [("closed_loop", 2), ("open_loop", 2)])  # worker processes: the closed and the open engine
def test_a_mix_is_sent_tagged_and_judged_per_class(loop, workers, reference):  # noqa: F811
    url, client = reference
    w = make_workload("mixed", mix_spec(loop, url, workers=workers))
    driver = driver_for(w)
    assert driver.name == loop
    ab = ABArms(client, 2) if loop == "ab_interleaved" else None
    res = judge(driver.measure(client, w, Run(seed=0, nonce="mix", salt_context=loop, judge=judge, ab=ab)))
    # a rate sweep: every step an open loop of the whole mix, judged per class to pick the next rate
    assert not res.failures, res.failures
    classes = Counter(r.mix_class for r in res.records)
    if loop == "closed_loop":  # the ramp-up and drain are cut by time: a share, not an exact count
        assert set(classes) == {"short", "long"} and sum(classes.values()) >= 6, classes
    else:
        assert classes == {"short": 6, "long": 2}, classes
    lengths = {c: {r.prompt_tokens for r in res.records if r.mix_class == c} for c in classes}
    assert lengths == {"short": {48}, "long": {2000}}  # each class's own prompts, exact as the server counted
    assert res.verdict == "pass", res.failure_message()
    assert [(r["name"], r["status"]) for r in res.mix.classes] == [("short", "pass"), ("long", "pass")]
    if workers == 2:
        assert len({r.worker for r in res.records}) >= 2
    if loop == "ab_interleaved":  # blocks of 2: each a window of the run's one class sequence, exact in all
        assert res.load.ab_blocks == 4
        base = res.facts.baseline_target_arm  # the baseline arm: the same classes
        assert Counter(r.mix_class for r in base.records) == {"short": 6, "long": 2}


def test_a_class_budget_is_judged_on_that_class_only():
    """The long prompts' TTFT is many times the short ones' (a 16,000-token prefill: ~670 ms on the reference
    H100 at time_scale 1): a budget between them fails the long class alone."""
    from pytest_llm_latency.client.runner import Target, make_client
    from pytest_llm_latency.client.transport.http import make_http_client
    from pytest_llm_latency.core.checks.judge import with_workload
    from pytest_llm_latency.targets.reference.launch import start_reference

    with start_reference("reference://h100-sxm/llama-3.1-8b", mode="thread") as h, make_http_client() as http:
        client = make_client(Target(h.url, "openai-chat"), http)
        # one request at a time: no long prefill delays a short request's first token
        spec = {"mix": {**MIX, "long": {**MIX["long"], "prompt_tokens": 16000}}, "requests": 8, "warmup": 0,
                "slo": {"short": {"ttft_p50": 5}, "long": {"ttft_p50": 5}}}
        w = make_workload("mixed", spec)
        res = judge(driver_for(w).measure(client, w, Run(seed=0, nonce="mix", salt_context="budget", judge=judge)))
    by = {r["name"]: r for r in res.mix.classes}
    short, long = by["short"]["stats"]["ttft_p50_ms"], by["long"]["stats"]["ttft_p50_ms"]
    assert long > 5 * short and long > 400, (short, long)
    limit = (short + long) / 2
    again = judge(with_workload(res, make_workload("mixed", {**spec, "slo": {"short": {"ttft_p50": limit},
                                                                              "long": {"ttft_p50": limit}}})))
    assert [v.mix_class for v in again.violations] == ["long"], (again.violations, again.errors, again.notes)
    assert again.violations[0].message.startswith("long: TTFT p50 ")
