"""``workers: N | auto`` (issue 28): the workload key, the run-wide option and its precedence,
the refusals where a workload cannot be spread over worker processes, and ``auto``."""
from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.load_spec import resolve_workers
from pytest_llm_latency.core.spec.worker_sizing import STREAMS_PER_PROCESS
from pytest_llm_latency.core.spec.workload import make_workload, with_ray, with_workers
from pytest_llm_latency.plugin.fixtures import apply_workers
from pytest_llm_latency.plugin.options import Settings
from pytest_llm_latency.plugin.slofile import parse_slo_file

OPEN = {"class": "chat", "rate": 4, "requests": 20}


def where(path):
    return "f.slo.yaml:3 workloads.w." + ".".join(map(str, path))


def test_default_is_auto_for_the_load_engines_loops_and_one_process_elsewhere():
    assert make_workload("w", OPEN).workers == "auto"                                           # an open loop
    assert make_workload("w", {"class": "chat", "concurrency": 4, "requests": 20}).workers == "auto"
    assert make_workload("w", {"class": "chat", "concurrency": 4}).workers == "auto"           # samples: auto rounds
    # one stream at a time, a prompt sweep, A/B: one process, never an error (an explicit N there still is one)
    assert make_workload("w", {"class": "chat", "samples": 20, "confidence": None}).workers == 1
    assert make_workload("w", {"class": "chat"}).workers == 1
    with pytest.raises(ConfigError, match="workers"):
        make_workload("w", {"class": "chat", "samples": 20, "confidence": None, "workers": 2})
    assert make_workload("w", {"class": "chat", "concurrency": 4, "requests": 20, "workers": 1}).workers == 1


@pytest.mark.parametrize("given,want", [(2, 2), ("auto", "auto"), ("AUTO", "auto"), ("3", 3), (1, 1)])
def test_an_open_loop_takes_workers(given, want):
    assert make_workload("w", {**OPEN, "workers": given}).workers == want


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5, True, None])
def test_a_bad_value_names_the_key_and_what_is_expected(bad):
    with pytest.raises(ConfigError, match=r"workloads\.w\.workers: expected an integer >= 1 or 'auto'"):
        make_workload("w", {**OPEN, "workers": bad}, where)


@pytest.mark.parametrize("spec,why", [
    ({"class": "chat", "concurrency": 1, "requests": 20}, "give rate: R .* or concurrency: C"),
    ({"class": "chat", "samples": 20}, "give rate: R"),
    ({"class": "chat", "prompt_sweep": [64, 128], "samples": 10}, "prompt_sweep sends one request at a time"),
])  # a rate_sweep and an A/B run take workers: tests/unit/client/drivers/test_workers_sweep_ab.py
def test_workers_elsewhere_is_a_config_error_naming_why(spec, why):
    with pytest.raises(ConfigError, match=r"workloads\.w\.workers: 2 worker processes -- .*" + why):
        make_workload("w", {**spec, "workers": 2}, where)


def test_a_closed_loop_takes_workers_up_to_its_concurrency():
    assert make_workload("w", {"class": "chat", "concurrency": 4, "requests": 20, "workers": 2}).workers == 2
    assert make_workload("w", {"class": "chat", "concurrency": 4, "requests": 20, "workers": 4}).workers == 4
    with pytest.raises(ConfigError, match=r"workloads\.w\.workers: 5 worker processes -- a closed loop at "
                                          r"concurrency 4 runs at least one stream per worker: give workers <= 4"):
        make_workload("w", {"class": "chat", "concurrency": 4, "requests": 20, "workers": 5}, where)


def test_a_trace_replay_takes_workers():
    from pytest_llm_latency.client.placement.shares import worker_count

    w = make_workload("w", {"trace": "t.jsonl", "workers": 2})
    assert w.workers == 2 and worker_count(w) == 2


AGENT = {"class": "agent_session", "samples": 8, "concurrency": 4}


def test_agent_sessions_take_workers_up_to_their_sessions_and_session_slots():
    from pytest_llm_latency.client.drivers.agent_session import session_shares

    w = make_workload("w", {**AGENT, "workers": 2})
    assert w.workers == 2 and session_shares(w).count == 2
    assert make_workload("w", {**AGENT, "workers": 4}).workers == 4
    assert session_shares(make_workload("w", {**AGENT, "workers": "auto"})).count >= 1
    with pytest.raises(ConfigError, match=r"workloads\.w\.workers: 3 worker processes -- agent sessions are dealt "
                                          r"whole, at least one per worker, and samples \(sessions\) is 2: give "
                                          r"workers <= 2 \(or raise samples\)"):
        make_workload("w", {**AGENT, "samples": 2, "workers": 3}, where)
    with pytest.raises(ConfigError, match=r"workloads\.w\.workers: 2 worker processes -- agent sessions at "
                                          r"concurrency 1 run at least one session at once per worker: give "
                                          r"workers <= 1 \(or raise concurrency, or workers: auto\)"):
        make_workload("w", {**AGENT, "concurrency": 1, "workers": 2}, where)
    one_at_a_time = make_workload("w", {**AGENT, "concurrency": 1})
    assert with_workers(one_at_a_time, 2, "--llm-latency-workers", run_wide=True).workers == 1  # run-wide: left alone


def test_agent_sessions_take_ray_one_node_per_session_slot_under_the_workers_rules():
    w = make_workload("w", {**AGENT, "ray": "127.0.0.1:6379"})
    assert w.ray == "127.0.0.1:6379" and w.workers == "auto"              # every node (at most a slot each)
    assert make_workload("w", {**AGENT, "ray": "h:1", "workers": 2}).workers == 2
    with pytest.raises(ConfigError, match=r"workloads\.w\.ray: one shard per Ray node -- with ray, workers is the "
                                          r"number of nodes: agent sessions at concurrency 4 run at least one "
                                          r"session at once per worker"):
        make_workload("w", {**AGENT, "ray": "h:1", "workers": 5}, where)
    two = make_workload("w", {**AGENT, "samples": 2})
    with pytest.raises(ConfigError, match=r"--llm-latency-ray: one shard per Ray node -- with ray, workers is the "
                                          r"number of nodes: agent sessions are dealt whole, at least one per "
                                          r"worker, and samples \(sessions\) is 2: give workers <= 2"):
        with_ray(replace(two, workers=3), "h:1", "--llm-latency-ray")


def test_workers_one_is_accepted_everywhere():
    assert make_workload("w", {"class": "chat", "concurrency": 4, "requests": 20, "workers": 1}).workers == 1


def test_a_run_wide_value_leaves_other_workloads_as_they_are():
    closed = make_workload("w", {"class": "chat", "concurrency": 4, "requests": 20})
    assert with_workers(closed, 4, "--llm-latency-workers", run_wide=True).workers == 4
    assert with_workers(closed, 1, "--llm-latency-workers", run_wide=True).workers == 1  # the opt-out
    assert with_workers(closed, 8, "--llm-latency-workers", run_wide=True).workers == "auto"  # more than its streams
    serial = make_workload("w", {"class": "chat", "samples": 20, "confidence": None})
    assert with_workers(serial, 4, "--llm-latency-workers", run_wide=True).workers == 1
    assert with_workers(make_workload("w", OPEN), 4, "--llm-latency-workers", run_wide=True).workers == 4


@pytest.mark.parametrize("cli,env,ini,want,source", [
    ({"workers": "3"}, {"LLM_LATENCY_WORKERS": "2"}, {"workers": "4"}, 3, "--llm-latency-workers"),
    ({}, {"LLM_LATENCY_WORKERS": "auto"}, {"workers": "4"}, "auto", "LLM_LATENCY_WORKERS (environment)"),
    ({}, {}, {"workers": "4"}, 4, "llm_latency_workers (ini)"),
    ({}, {}, {}, "auto", "default"),
])
def test_option_precedence_cli_env_ini_default(cli, env, ini, want, source):
    s = Settings.resolve(cli, env, ini)
    assert s.get("workers") == want and s.source("workers") == source


def test_a_bad_option_value_names_its_source():
    with pytest.raises(ConfigError, match=r"LLM_LATENCY_WORKERS \(environment\): '0' is not valid for workers"):
        Settings.resolve({}, {"LLM_LATENCY_WORKERS": "0"}, {})


def test_marker_beats_cli_and_cli_beats_the_file():
    cli = Settings.resolve({"workers": "3"}, {}, {})
    marker_spec = {**OPEN, "workers": 2}
    assert apply_workers(make_workload("w", marker_spec), cli, marker_spec).workers == 2  # marker > CLI
    assert apply_workers(make_workload("w", OPEN), cli, OPEN).workers == 3                # CLI > default
    assert apply_workers(make_workload("w", OPEN), Settings.resolve({}, {}, {}), OPEN).workers == "auto"
    text = ("workloads:\n  w: {class: chat, rate: 4, requests: 20, workers: 2}\n"
            "  c: {class: chat, samples: 20, confidence: null}\n")
    assert [w.workers for w in parse_slo_file(text, "f.slo.yaml").workloads] == [2, 1]   # file
    spec = parse_slo_file(text, "f.slo.yaml", workers_override=3)
    assert [w.workers for w in spec.workloads] == [3, 1]  # CLI > file; the serial workload keeps one process


def test_a_file_error_names_file_line_and_key():
    text = "workloads:\n  c:\n    class: chat\n    concurrency: 4\n    requests: 20\n    workers: 6\n"
    with pytest.raises(ConfigError, match=r"f\.slo\.yaml:6 workloads\.c\.workers: 6 worker processes -- a closed"):
        parse_slo_file(text, "f.slo.yaml")


@pytest.mark.parametrize("in_flight,cpus,want", [
    (1, 16, 1),                          # a light load: one process
    (STREAMS_PER_PROCESS, 16, 1),
    (STREAMS_PER_PROCESS + 1, 16, 2),     # rounded up
    (512, 16, -(-512 // STREAMS_PER_PROCESS)),  # rounded up, under the CPUs
    (4096, 16, 15),                      # one CPU left (the target taken as on this host)
    (512, 2, 1), (512, 1, 1), (512, None, 1),  # never below one
])
def test_auto_without_a_rate_is_one_worker_per_streams_per_process_capped_by_the_cpus(in_flight, cpus, want):
    assert resolve_workers("auto", in_flight, cpus) == want
    assert resolve_workers(5, in_flight, cpus) == 5
