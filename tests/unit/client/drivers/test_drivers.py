"""Every driver of the registry, through the ``Driver`` protocol, against the embedded reference
target (in a thread): it measures (records, never a verdict), and the checks then judge it.
Parametrized over the registry, so a new driver without a workload here fails."""
from __future__ import annotations

import json

import pytest

from pytest_llm_latency.client.drivers.base import ABArms, Driver, Run, SweepArms
from pytest_llm_latency.client.drivers.registry import DRIVERS, driver_for
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.targets.reference.launch import start_reference

BASE = {"class": "custom", "prompt_tokens": 64, "output_tokens": 4, "samples": 4, "warmup": 0, "confidence": None,
        "slo": {"ttft_p50": 60_000}}

#: per driver, a workload that driver is chosen for ({url}: the reference server)
WORKLOADS = {
    "serial": {},
    "sequential_rounds": {"samples": "auto", "min_samples": 4, "max_samples": 8, "confidence": 0.9},
    "closed_loop": {"concurrency": 2},
    "open_loop": {"rate": 50},
    "prompt_sweep": {"prompt_sweep": [32, 64], "samples": 2, "slo": {"ttft_p50": 60_000}},
    "agent_sessions": {"steps": 2, "tool_result_tokens": 8, "tool_time": 0, "samples": 2, "prompt_tokens": 256,
                       "slo": {"turn_ttft_p95": None, "session_e2e_p95": None}},
    "rate_sweep": {"rate_sweep": {"rate_min": 5, "rate_max": 10, "max_steps": 2}},
    "ab_interleaved": {"baseline_target": "{url}"},
    "ab_alternating": {"baseline_target": {"url": "{url}", "mode": "alternating", "block": 2}},
    # the arms' clients are injected (Run.sweep: both the reference server here); the URLs only name them
    "arm_sweep": {"server_sweep": {"urls": {"a": "http://a.invalid", "b": "http://b.invalid"}, "block_size": 2}},
    "trace_replay": {"trace": "trace.jsonl", "trace_block_tokens": 32},
}
#: the trace_replay workload's rows (the plugin loads them from the file: ``Run.trace_rows``)
TRACE = [{"timestamp": 20 * i, "input_length": 40 + 9 * i, "output_length": 4, "hash_ids": [i % 2, 10 + i]}
         for i in range(4)]


@pytest.fixture(scope="module")
def reference():
    with start_reference("reference://h100-sxm/llama-3.1-8b?time_scale=0.05", mode="thread") as h:
        with make_http_client() as http:
            yield h.url, make_client(Target(h.url, "openai-chat"), http)


def workload_for(name: str, url: str):
    return make_workload(name, workload_spec(name, url))


def workload_spec(name: str, url: str) -> dict:
    spec = {**BASE, **WORKLOADS[name]}
    if "trace" in spec:  # the rows are the requests and give the lengths
        spec = {k: v for k, v in spec.items() if k not in ("class", "prompt_tokens", "output_tokens", "samples")}
    if "prompt_sweep" in spec:
        del spec["prompt_tokens"]
    if "baseline_target" in spec:
        bt = spec["baseline_target"]
        spec["baseline_target"] = (bt.format(url=url) if isinstance(bt, str)
                                   else {**bt, "url": bt["url"].format(url=url)})
    return spec


def test_every_driver_has_a_workload_here():
    assert set(WORKLOADS) == set(DRIVERS)


#: the second axis: each driver on worker processes (``client.placement.Processes``, ``workers: 2``),
#: what its workload adds for it, or None where the one table of refusals
#: (``core.spec.load_spec.workers_refusal``) refuses the pair before any request (Ray: tests/load/test_ray.py)
ON_PROCESSES = {
    "serial": None,
    "sequential_rounds": {"concurrency": 2},
    "closed_loop": {},
    "open_loop": {},
    "prompt_sweep": None,
    "agent_sessions": {"concurrency": 2},
    "rate_sweep": {},
    "ab_interleaved": {"concurrency": 2},
    "ab_alternating": {"concurrency": 2},
    "arm_sweep": {"concurrency": 2},
    "trace_replay": {},
}
PLACEMENTS = [(name, "local") for name in sorted(DRIVERS)] + [(name, "processes") for name in sorted(ON_PROCESSES)]


def test_every_driver_has_its_placements_here():
    assert set(ON_PROCESSES) == set(DRIVERS)


@pytest.mark.parametrize("name", sorted(n for n, extra in ON_PROCESSES.items() if extra is None))
def test_an_unsupported_pair_is_refused_by_the_one_table_before_any_request(name):
    from pytest_llm_latency.core.errors import ConfigError

    spec = {**BASE, **WORKLOADS[name], "workers": 2}
    if "prompt_sweep" in spec:
        del spec["prompt_tokens"]
    with pytest.raises(ConfigError, match="workers"):  # core.spec.load_spec.workers_refusal's reason, at parse time
        make_workload(name, spec)


@pytest.mark.parametrize("name,placement", [p for p in PLACEMENTS if p[1] == "local" or ON_PROCESSES[p[0]]
                                             is not None])
def test_every_driver_measures_through_the_protocol(name, placement, reference):
    url, client = reference
    extra = {**(ON_PROCESSES[name] or {}), "workers": 2} if placement == "processes" else {"workers": 1}
    workload = make_workload(name, {**workload_spec(name, url), **extra})  # workers: 1 is local, never auto
    res = measure_driver(name, workload, client, placement)
    senders = {r.worker for r in res.records}
    if placement == "processes":  # the records name the worker processes that sent them (A/B: new ones a block)
        assert len(senders) >= 2 and all("@" in str(s) for s in senders), senders
    else:
        assert senders == {None}, senders


def measure_driver(name: str, workload, client, placement: str):
    """``workload`` measured by driver ``name`` through the two protocols (``driver_for``,
    ``placement_for``), judged a pass; the measurement (also for the Ray tier: tests/load/test_ray.py)."""
    from pytest_llm_latency.client.placement import placement_for

    driver = DRIVERS[name]
    assert placement_for(workload).kind == placement
    assert isinstance(driver, Driver) and driver.name == name
    assert driver_for(workload) is driver, f"the registry picks {driver_for(workload).name} for {name}'s workload"
    stopped: list[str] = []
    ab = None
    if name == "ab_interleaved":
        ab = ABArms(client, 2)
    elif name == "ab_alternating":
        ab = ABArms(lambda: client, 2, start_a=lambda: client, alternate=stopped.append)
    sweep = None
    if name == "arm_sweep":
        sweep = SweepArms(workload.server_sweep.arms, (client, client), workload.server_sweep.block(workload.samples))
    rows = None
    if name == "trace_replay":
        from pytest_llm_latency.core.spec.trace import read_trace

        rows = tuple(read_trace([json.dumps(r) for r in TRACE], "trace.jsonl", 32))
    res = driver.measure(client, workload, Run(seed=0, nonce="drivers", salt_context=name, judge=judge, ab=ab,
                                               sweep=sweep, trace_rows=rows))
    if name != "rate_sweep":  # its steps are judged by the injected Run.judge (the verdict picks the next rate)
        assert res.findings is None, "a driver measures; the checks judge"
    assert res.records and not res.failures, (res.failures, res.notes)
    judged = judge(res)
    assert judged.verdict == "pass", judged.failure_message()
    if name == "ab_alternating":
        assert stopped[:2] == ["a", "b"] and res.load.ab_mode == "alternating"
    if name == "arm_sweep":  # both arms judged, both pass: the first is recommended (equal headroom or not)
        assert [a["name"] for a in judged.arms.arms] == ["a", "b"] and judged.arms.recommended in ("a", "b")
        assert judged.arms.meeting == ["a", "b"] and judged.arms.blocks == 2
    if name == "rate_sweep":
        assert (res.load.rate_sweep_steps or 0) >= 1 and res.notes[0].startswith("rate_sweep: ")
    if name == "sequential_rounds":
        assert res.measurement.samples_mode == "auto"
    if name == "prompt_sweep":
        assert {p.prompt_tokens for p in res.prefill.points} >= {32, 64}
    if name == "trace_replay":
        assert [r.prompt_tokens for r in sorted(res.records, key=lambda r: r.trace.row)] == [40, 49, 58, 67]
        assert res.load.load_mode == "trace" and res.load.trace_rows == 4
    return res
