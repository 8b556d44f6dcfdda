"""``pytest-llm-latency rate-sweep --workers N|auto --ray ADDRESS``: the workload keys ``workers`` and
``ray``, parsed and refused as they are (``core.spec.load_spec``), errors naming the flag.  No server: a
refused value exits 2 before anything is started (the run itself: tests/load/test_plugin_under_load.py)."""
from __future__ import annotations

import argparse

import pytest

from pytest_llm_latency.cli import rate_sweep
from pytest_llm_latency.cli.main import main
from pytest_llm_latency.core.spec.workload import make_workload

BASE = ["--url", "http://127.0.0.1:9", "--class", "chat", "--rate-min", "1", "--rate-max", "8"]


def workload_of(*argv: str):
    parser = argparse.ArgumentParser()
    rate_sweep.add_arguments(parser)
    args = parser.parse_args([*BASE, *argv])
    return make_workload("chat", rate_sweep._spec(args), where=rate_sweep._flag)


@pytest.mark.parametrize("argv,workers,ray", [
    ((), "auto", None),                                                  # the default of a loop
    (("--workers", "2"), 2, None),
    (("--workers", "auto"), "auto", None),
    (("--workers", " AUTO "), "auto", None),                             # as the YAML key and the option parse it
    (("--ray", "127.0.0.1:6379"), "auto", "127.0.0.1:6379"),           # one shard per node by default
    (("--ray", "ray://10.0.0.1:10001", "--workers", "2"), 2, "ray://10.0.0.1:10001"),  # two nodes
])
def test_workers_and_ray_are_the_workload_keys(argv, workers, ray):
    w = workload_of(*argv)
    assert w.workers == workers and w.ray == ray and w.sweep is not None


@pytest.mark.parametrize("argv,message", [
    (("--workers", "0"), "pytest-llm-latency rate-sweep: --workers: expected an integer >= 1 or 'auto' (worker "
                         "processes sending the load), got 0"),
    (("--workers", "two"), "--workers: expected an integer >= 1 or 'auto'"),
    (("--ray", "host 1:6379"), "--ray: expected a Ray cluster address (host:port or ray://host:port), got "
                               "'host 1:6379'"),
])
def test_a_bad_value_exits_2_naming_the_flag_before_anything_starts(capsys, argv, message):
    assert main(["rate-sweep", *BASE, *argv]) == 2
    assert message in capsys.readouterr().err
