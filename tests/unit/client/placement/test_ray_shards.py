"""``ray: ADDRESS`` without a cluster (``client/placement/ray/cluster.py``, ``client/placement/ray/shards.py``): the
workload key's checks, the install line when Ray is missing (options, YAML target and workload, marker),
the stamps moved to the driver's timeline, and the loopback-target refusal.  The cluster itself is
the Ray tier's (``tests/load/test_ray.py``)."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.placement.ray import cluster as ray_cluster
from pytest_llm_latency.client.placement.ray.shards import check_reachable, shift_run
from pytest_llm_latency.client.placement.processes.shard import ShardRun
from pytest_llm_latency.core.measure.bunching import StallTimeline
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.spec.workload import make_workload

OPEN = {"prompt_tokens": 8, "output_tokens": 4, "rate": 10, "requests": 20, "confidence": None,
        "slo": {"e2e_p95": "1s"}}


def test_ray_on_an_open_loop_defaults_to_one_shard_per_node_and_keeps_a_given_count():
    assert make_workload("w", {**OPEN, "ray": " 127.0.0.1:6379 "}).ray == "127.0.0.1:6379"
    assert make_workload("w", {**OPEN, "ray": "127.0.0.1:6379"}).workers == "auto"
    assert make_workload("w", {**OPEN, "ray": "ray://h:10001", "workers": 3}).workers == 3
    assert make_workload("w", {**OPEN, "ray": "ray://h:10001", "workers": 1}).workers == 1  # one node, as given
    assert make_workload("w", OPEN).ray is None


def test_ray_takes_a_closed_loop_and_a_trace_replay_one_shard_per_node():
    closed = make_workload("w", {**OPEN, "rate": None, "concurrency": 4, "ray": "127.0.0.1:6379"})
    assert closed.ray == "127.0.0.1:6379" and closed.workers == "auto" and closed.concurrency == 4
    assert make_workload("w", {**OPEN, "rate": None, "concurrency": 4, "workers": 3, "ray": "h:1"}).workers == 3
    trace = make_workload("w", {"trace": "t.jsonl", "ray": "127.0.0.1:6379"})
    assert trace.ray == "127.0.0.1:6379" and trace.workers == "auto" and trace.trace is not None
    with pytest.raises(ConfigError, match="give workers <= 4"):  # a stream per node at least
        make_workload("w", {**OPEN, "rate": None, "concurrency": 4, "workers": 5, "ray": "h:1"})


@pytest.mark.parametrize("spec, needle", [
    ({**OPEN, "rate": None, "requests": None, "samples": 20}, "give rate: R"),
    ({**OPEN, "rate": None, "requests": None, "samples": "auto"}, "samples: auto"),
    ({**OPEN, "ray": ""}, "expected a Ray cluster address"),
    ({**OPEN, "ray": 6379}, "expected a Ray cluster address"),
])
def test_ray_elsewhere_is_a_config_error_naming_the_key_and_why(spec, needle):
    with pytest.raises(ConfigError) as e:
        spec = {k: v for k, v in {"ray": "127.0.0.1:6379", **spec}.items() if v is not None}
        make_workload("w", spec, lambda p: f"f.yaml:3 workloads.w.{'.'.join(p)}")
    assert "workloads.w.ray" in str(e.value) and needle in str(e.value)


def test_without_ray_installed_the_error_names_the_extra(monkeypatch):
    monkeypatch.setattr(ray_cluster.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"--llm-latency-ray: Ray is not installed -- "
                                          r"pip install 'pytest-llm-latency\[ray\]'"):
        ray_cluster.require_ray("--llm-latency-ray")



@pytest.mark.parametrize("package", [True, False], ids=["with __init__", "namespace folder"])
def test_a_folder_named_ray_on_sys_path_is_named_not_taken_for_ray(tmp_path, monkeypatch, package):
    """pytest puts the rootdir and test folders on sys.path: a ``ray/`` folder there must not pass for
    the Ray package (it used to die later with "module 'ray' has no attribute 'is_initialized'")."""
    import sys

    (tmp_path / "ray").mkdir()
    if package:
        (tmp_path / "ray" / "__init__.py").write_text("")
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    if not package and _ray_installed():  # a regular package anywhere on sys.path wins over a namespace folder
        ray_cluster.require_ray("ray: 127.0.0.1:6379")
        return
    with pytest.raises(ConfigError) as info:
        ray_cluster.require_ray("ray: 127.0.0.1:6379")
    said = str(info.value)
    assert said.startswith("ray: 127.0.0.1:6379: 'import ray' finds " + str(tmp_path / "ray"))
    assert "which is not the Ray package" in said and "rename it" in said
    assert ("is installed at" in said) == _ray_installed()


def _ray_installed() -> bool:
    import importlib.metadata

    try:
        importlib.metadata.distribution("ray")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def test_the_installed_ray_passes():
    pytest.importorskip("ray")
    ray_cluster.require_ray("ray: x")  # no error: the spec is the distribution's own file

def test_stamps_move_to_the_drivers_timeline_and_durations_do_not():
    rec = RequestRecord(t_send_ns=1_000, t_first_byte_ns=1_100, chunks=[TokenChunk(1_200, 1), TokenChunk(1_300, 1)],
                        t_end_ns=1_400, t_scheduled_ns=990, tool_deltas=[(1_250, ["x"])])
    fail = Failure("timeout", "m", ttft_ms=5.0, t_send_ns=2_000, t_last_ns=None, t_end_ns=2_500)
    run = ShardRun(0, 1, "n", outcomes=[(0, rec), (2, fail)], lag_ns=[7], send_lag_ns=[8],
                   stalls=StallTimeline(((1_050, 30),), 10, 900, 3_000))
    out = shift_run(run, 10_000)
    r, f = out.outcomes[0][1], out.outcomes[1][1]
    assert (r.t_send_ns, r.t_first_byte_ns, r.t_end_ns, r.t_scheduled_ns, r.t_submit_ns) == (
        11_000, 11_100, 11_400, 10_990, 11_000)
    assert [c.t_ns for c in r.chunks] == [11_200, 11_300] and r.tool_deltas == [(11_250, ["x"])]
    assert (f.t_send_ns, f.t_last_ns, f.t_end_ns, f.ttft_ms) == (12_000, None, 12_500, 5.0)
    assert [p for p, _ in out.outcomes] == [0, 2] and out.lag_ns == [7] and out.send_lag_ns == [8]
    assert out.stalls == StallTimeline(((11_050, 30),), 10, 10_900, 13_000)


def test_a_closed_loops_ramp_up_and_drain_records_move_too():
    ramp = RequestRecord(t_send_ns=100, t_first_byte_ns=150, t_end_ns=200)
    drain = Failure("timeout", "m", t_send_ns=300, t_end_ns=400)
    out = shift_run(ShardRun(0, 1, "n", ramp=[(0, ramp)], drain=[(5, drain)]), 1_000)
    assert [(p, o.t_send_ns, o.t_end_ns) for p, o in out.ramp + out.drain] == [(0, 1_100, 1_200), (5, 1_300, 1_400)]


def test_a_failed_node_is_named_with_its_tasks_own_exception_not_rays_wrapper():
    from pytest_llm_latency.client.placement.ray.shards import _lost

    class TaskError(Exception):  # as ray's RayTaskError: a header first, the task's exception as ``cause``
        cause = RuntimeError("the closed loop's books were lost: ActorDiedError")

    wrapped = TaskError("\x1b[36mray::ShardActor.run()\x1b[39m (pid=1, ip=127.0.0.1)\ntraceback")
    assert _lost(1, "127.0.0.1/ab12cd34", wrapped, 3, 15, dead=False) == (
        "worker 1 on node 127.0.0.1/ab12cd34 failed: RuntimeError: the closed loop's books were lost: "
        "ActorDiedError -- after 3 of 15 requests")
    died = Exception("The actor died unexpectedly.\nclass_name: ShardActor")
    assert _lost(0, None, died, None, 15, dead=True) == (
        "worker 0 (no node yet) lost (its node or actor died): Exception: The actor died unexpectedly. -- before "
        "reporting its 15 requests")


def test_a_target_on_the_loopback_is_refused_for_nodes_off_it_naming_the_url_and_the_fix():
    here = [{"NodeManagerAddress": "127.0.0.1"}, {"NodeManagerAddress": "127.0.0.1"}]
    check_reachable("http://127.0.0.1:8000", here)          # the CI case: every node on this loopback
    check_reachable("http://10.0.0.5:8000", here + [{"NodeManagerAddress": "10.0.0.6"}])
    with pytest.raises(ConfigError) as e:
        check_reachable("http://127.0.0.1:8000", here + [{"NodeManagerAddress": "10.0.0.6"}])
    assert "http://127.0.0.1:8000" in str(e.value) and "10.0.0.6" in str(e.value) and "reach" in str(e.value)


@pytest.mark.parametrize("how", ["cli", "env", "target", "workload", "marker"])
def test_ray_without_the_extra_is_a_usage_error_with_the_install_line(pytester, monkeypatch, how):
    monkeypatch.setattr(ray_cluster.importlib.util, "find_spec", lambda name: None)
    args = ["-p", "no:cacheprovider", "--llm-latency-url=http://127.0.0.1:9"]
    if how == "marker":
        pytester.makepyfile(test_m="""
import pytest

@pytest.mark.llm_slo(prompt_tokens=8, output_tokens=4, rate=10, requests=20, ray="127.0.0.1:6379",
                     e2e_p95="1s")
def test_x():
    pass
""")
    else:
        target = "target: {ray: '127.0.0.1:6379'}\n" if how == "target" else ""
        own = "    ray: 127.0.0.1:6379\n" if how == "workload" else ""
        body = "    prompt_tokens: 8\n    output_tokens: 4\n    rate: 10\n    requests: 20\n"
        pytester.makefile(".slo.yaml", load=f"{target}workloads:\n  w:\n{body}{own}    slo: {{e2e_p95: 1s}}\n")
    if how == "cli":
        args.append("--llm-latency-ray=127.0.0.1:6379")
    if how == "env":
        monkeypatch.setenv("LLM_LATENCY_RAY", "127.0.0.1:6379")
    r = pytester.runpytest_inprocess(*args)
    out = r.stdout.str() + r.stderr.str()
    assert "Ray is not installed -- pip install 'pytest-llm-latency[ray]'" in out, out
    assert r.ret != 0
    where = {"cli": "--llm-latency-ray", "env": "LLM_LATENCY_RAY", "target": "target.ray",
             "workload": "workloads.w.ray", "marker": "ray"}[how]
    assert where in out, out


def test_the_clock_offset_is_the_estimate_of_the_shortest_round_trip(monkeypatch):
    """offset = remote_wall - (t_send + t_recv) / 2, from the sample whose round trip was shortest."""
    from pytest_llm_latency.client.placement.ray import shards as ray_shards

    ms = 1_000_000
    driver = iter([0, 10 * ms, 100 * ms, 104 * ms, 200 * ms, 208 * ms])    # (send, recv) x 3: rtt 10, 4, 8 ms
    remote = iter([5 * ms + 57 * ms, 102 * ms + 50 * ms, 204 * ms + 41 * ms])  # the noisy ones say 57 and 41
    monkeypatch.setattr(ray_shards, "CLOCK_SAMPLES", 3)
    monkeypatch.setattr(ray_shards.time, "time_ns", lambda: next(driver))

    class Actor:
        class clock:  # named as the Ray actor handle's method
            @staticmethod
            def remote():
                return next(remote)

    timeouts = []
    fake_ray = type("FakeRay", (), {"get": staticmethod(lambda ref, timeout=None: timeouts.append(timeout) or ref)})
    assert ray_shards.measure_offset(fake_ray, Actor) == (50 * ms, 4 * ms)
    assert timeouts == [ray_shards.READY_SLACK_S] * 3  # every round trip bounded


class FakeRay:
    """``ray.wait``/``ray.get`` on scripted references: each ``wait`` gives the next scripted ready one (or none)."""

    class exceptions:  # as ray's module
        class RayError(Exception):
            pass

        class GetTimeoutError(RayError):
            pass

    def __init__(self, ready: list):
        self.ready = ready
        self.waits: list[float] = []

    def wait(self, refs, num_returns, timeout):
        self.waits.append(timeout)
        nxt = self.ready.pop(0) if self.ready else None
        return ([nxt], []) if nxt is not None else ([], refs)

    @staticmethod
    def get(ref, timeout=None):
        value = ref()
        if isinstance(value, BaseException):
            raise value
        return value


class Counter:
    """A shard actor's ``done`` counter: each call the next of ``counts`` (an exception: raised)."""

    def __init__(self, *counts):
        self.counts = list(counts)
        self.done = self

    def remote(self):
        value = self.counts.pop(0)
        return lambda: value


def test_the_driver_polls_the_nodes_counts_for_progress_and_a_lost_node_keeps_its_last():
    from pytest_llm_latency.client.placement.ray.shards import PROGRESS_S, collect

    lost_exc = FakeRay.exceptions.RayError("actor died")
    r0 = lambda: ShardRun(0, 1, "n0", outcomes=[(i, None) for i in range(10)])  # noqa: E731
    r1 = lambda: lost_exc  # noqa: E731
    ray = FakeRay([None, None, r0, None, r1])
    actors = [Counter(3, 7), Counter(2, 5, 6, FakeRay.exceptions.RayError("gone"))]
    seen: list[int] = []
    results: dict = {}
    failures: dict = {}
    collect(ray, {r0: 0, r1: 1}, actors, float("inf"), results, failures,
            lambda k, exc, done: f"worker {k}: {exc} after {done}", seen.append)
    assert seen == [5, 12, 16, 16, 16]          # every poll's sum; the lost node's last count kept; once at the end
    assert list(results) == [0] and failures == {1: "worker 1: actor died after 6"}
    assert all(t == PROGRESS_S for t in ray.waits)  # bounded waits, one poll period each


def test_a_run_past_its_deadline_names_every_node_still_running():
    from pytest_llm_latency.client.placement.ray.shards import collect

    ray = FakeRay([])
    failures: dict = {}
    collect(ray, {"a": 0, "b": 1}, [Counter(), Counter()], 0.0, {}, failures,
            lambda k, exc, done: f"worker {k}: {exc} ({done})", None)
    assert failures == {0: "worker 0: did not finish in time (None)", 1: "worker 1: did not finish in time (None)"}
    assert ray.waits == [0]


def test_a_count_refusal_on_ray_says_workers_counts_the_nodes():
    with pytest.raises(ConfigError) as e:  # a closed loop of 2 streams on 4 nodes
        make_workload("w", {**OPEN, "rate": None, "concurrency": 2, "workers": 4, "ray": "h:1"})
    msg = str(e.value)
    assert "with ray, workers is the number of nodes: a closed loop at concurrency 2" in msg
    assert "give workers <= 2" in msg and "Ray nodes <=" not in msg and "Ray nodes: auto" not in msg
    with pytest.raises(ConfigError, match="with ray, workers is the number of nodes: samples: auto sends rounds of 2 "):
        make_workload("w", {k: v for k, v in {**OPEN, "rate": None, "requests": None, "samples": "auto",
                                              "concurrency": 2, "workers": 4, "ray": "h:1"}.items() if v is not None})
