"""The local-cpu FLOPS probe: timing with an injected clock, and the caching rules it shares with
the bandwidth probe (best of runs; never cached when the runs disagree or the machine is busy)."""
import json

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.roofline import flops_probe, probe_cache
from pytest_llm_latency.roofline import catalog


def clock_from(durations_ns):
    """A fake ns clock: each run takes the next duration."""
    stamps = [0]
    for d in durations_ns:
        stamps += [stamps[-1], stamps[-1] + d]
    it = iter(stamps[1:])
    return lambda: next(it)


def measure_with(durations_ns, flops=2e9):
    """The probe's own worker and aggregation, with an injected clock and matmul."""
    def measure(runs):
        assert runs == len(durations_ns)
        samples = []
        flops_probe.run_worker(lambda: flops, runs, samples.append, clock=clock_from(durations_ns))
        return flops_probe.aggregate(samples, runs)
    return measure


def load(busy_share):
    """A /proc/stat-like meter: 10 s of machine time pass, ``busy_share`` of it used by others."""
    samples = iter([(0.0, 0.0, 0.0), (10.0 * busy_share, 10.0, 0.0)])
    return lambda: next(samples)


def test_runs_timed_with_an_injected_clock():
    assert measure_with([20_000_000, 40_000_000, 25_000_000])(3) == pytest.approx([0.1, 0.05, 0.08])  # 2 GFLOP/20 ms


def test_processes_add_up_over_the_runs_wall_time():
    # two processes of one run: 2 + 2 GFLOP between 0 and 25 ms (they overlap) = 0.16 TFLOP/s
    assert flops_probe.aggregate([(0, 0, 20_000_000, 2e9), (0, 5_000_000, 25_000_000, 2e9)], 1) == \
        pytest.approx([0.16])


def test_a_clock_that_does_not_advance_is_an_error():
    with pytest.raises(ConfigError, match="peak_tflops"):
        flops_probe.aggregate([(0, 5, 5, 2e9)], 1)


def test_agreeing_runs_on_a_quiet_machine_are_cached_as_the_best(tmp_path):
    got = flops_probe.local_cpu_tflops(cache=tmp_path, runs=5, load=load(0.05),
                                       measure=measure_with([20e6, 22e6, 21e6, 25e6, 20.5e6]))
    assert got.value == pytest.approx(0.1) and not got.cached and got.note == ""
    entry = json.loads((tmp_path / "cpu_flops.json").read_text())[probe_cache.host_key()]
    assert entry["tflops"] == pytest.approx(0.1) and entry["method"] == flops_probe.CACHE_METHOD
    again = flops_probe.local_cpu_tflops(cache=tmp_path, measure=lambda runs: pytest.fail("measured again"))
    assert again.cached and again.value == pytest.approx(0.1)


def test_disagreeing_runs_are_not_cached(tmp_path):
    got = flops_probe.local_cpu_tflops(cache=tmp_path, runs=3, load=load(0.0), measure=measure_with([20e6, 40e6, 21e6]))
    assert got.value == pytest.approx(0.1) and "the runs disagree" in got.note and "2.00x" in got.note
    assert not (tmp_path / "cpu_flops.json").exists()


def test_a_busy_machine_is_not_cached(tmp_path):
    got = flops_probe.local_cpu_tflops(cache=tmp_path, runs=2, load=load(0.6), measure=measure_with([20e6, 20e6]))
    assert "the machine was busy: other processes used 60%" in got.note
    assert not (tmp_path / "cpu_flops.json").exists()


def test_a_second_look_keeps_a_higher_cached_figure(tmp_path):
    flops_probe.local_cpu_tflops(cache=tmp_path, runs=1, load=load(0.0), measure=measure_with([10e6]))  # 0.2
    got = flops_probe.local_cpu_tflops(cache=tmp_path, runs=1, load=load(0.0), measure=measure_with([20e6]),
                                       refresh=True, only_if_higher=True)
    assert got.value == pytest.approx(0.1) and "cached 200.0 GFLOP/s is higher" in got.note
    assert json.loads((tmp_path / "cpu_flops.json").read_text())[probe_cache.host_key()]["tflops"] == pytest.approx(0.2)


def test_the_rules_are_the_bandwidth_probes():
    from pytest_llm_latency.roofline import hwdetect

    assert hwdetect.SPREAD_LIMIT is probe_cache.SPREAD_LIMIT and hwdetect.BUSY_LIMIT is probe_cache.BUSY_LIMIT
    assert hwdetect.ProbeResult(30.0, (30.0, 10.0), 2, 0.0).not_cached_reason == \
        probe_cache.not_cached_reason((30.0, 10.0), 0.0, "GB/s")


def test_peak_from_the_catalog_the_dtype_and_an_override():
    h100 = catalog.hardware("h100-sxm")
    assert flops_probe.resolve_peak(h100).tflops == 989
    assert flops_probe.resolve_peak(h100, dtype="fp8").tflops == 1979
    assert flops_probe.resolve_peak(h100.tensor_parallel(2), dtype="bf16").tflops == 2 * 989
    t4 = flops_probe.resolve_peak(catalog.hardware("t4"))
    assert t4.tflops is None and "no peak FLOP/s" in t4.source  # a catalog null is never guessed
    assert flops_probe.resolve_peak(catalog.hardware("t4"), dtype="fp16").tflops == 65
    assert flops_probe.resolve_peak(t4 and catalog.hardware("t4"), peak_tflops=50).tflops == 50


def test_the_real_matmul_probe_measures_something():
    # the real probe (a spawned numpy process, ~1 s): what the injected tests stand in for
    runs = flops_probe.numpy_matmul_runs(2, processes=2)
    assert len(runs) == 2 and all(0 < x < 100 for x in runs)  # TFLOP/s of a CPU
