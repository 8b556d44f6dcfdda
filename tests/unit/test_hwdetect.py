"""Hardware sources: nvidia-smi parsing (injected runner) and the local-cpu probe's aggregation/caching."""
import functools
import json
import math
import os
import stat

import pytest

from pytest_llm_latency.roofline import hwdetect
from pytest_llm_latency.core.errors import ConfigError

# What `nvidia-smi --query-gpu=name,memory.total --format=csv` prints on real machines.
H100_X8 = "name, memory.total [MiB]\n" + "NVIDIA H100 80GB HBM3, 81559 MiB\n" * 8
A100_40 = "name, memory.total [MiB]\nNVIDIA A100-SXM4-40GB, 40960 MiB\n"
T4 = "name, memory.total [MiB]\nTesla T4, 15360 MiB\n"
L4_X2 = "name, memory.total [MiB]\r\nNVIDIA L4, 23034 MiB\r\nNVIDIA L4, 23034 MiB\r\n"
V100 = "name, memory.total [MiB]\nTesla V100-SXM2-32GB, 32768 MiB\n"
H200 = "name, memory.total [MiB]\nNVIDIA H200, 143771 MiB\n"
NOHEADER_NOUNITS = "NVIDIA L40S, 46068\n"
MIXED = "name, memory.total [MiB]\nNVIDIA GeForce RTX 4090, 24564 MiB\nNVIDIA GeForce RTX 3090, 24576 MiB\n"


def runner_for(text):
    calls = []

    def run(argv):
        calls.append(list(argv))
        return text
    run.calls = calls
    return run


@pytest.mark.parametrize("text, key, count, mib", [
    (H100_X8, "h100-sxm", 8, 81559), (A100_40, "a100-40gb", 1, 40960), (T4, "t4", 1, 15360),
    (L4_X2, "l4", 2, 23034), (V100, "v100", 1, 32768), (H200, "h200", 1, 143771),
    (NOHEADER_NOUNITS, "l40s", 1, 46068),
])
def test_real_nvidia_smi_outputs(text, key, count, mib):
    gpus = hwdetect.parse_nvidia_smi_csv(text)
    assert len(gpus) == count and [g.index for g in gpus] == list(range(count))
    assert gpus[0].memory_mib == mib
    run = runner_for(text)
    hw = hwdetect.detect_nvidia(runner=run)
    assert hw.key == key and hw.devices == 1
    assert run.calls == [["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv"]]
    assert gpus[0].name in hw.source


def test_tensor_parallel_multiplies_per_gpu_bandwidth():
    one = hwdetect.detect_nvidia(runner=runner_for(H100_X8))
    four = hwdetect.detect_nvidia(tp=4, runner=runner_for(H100_X8))
    assert four.mem_bandwidth_gb_s == 4 * one.mem_bandwidth_gb_s == 4 * 3350
    assert four.devices == 4 and "8 GPUs present" in four.source
    with pytest.raises(ConfigError, match="tensor_parallel=16 but nvidia-smi lists 8"):
        hwdetect.detect_nvidia(tp=16, runner=runner_for(H100_X8))
    with pytest.raises(ConfigError, match="differ"):
        hwdetect.detect_nvidia(tp=2, runner=runner_for(MIXED))
    assert hwdetect.detect_nvidia(runner=runner_for(MIXED)).key == "rtx-4090"


def test_unknown_gpu_names_close_matches_and_fix():
    with pytest.raises(ConfigError) as exc:
        hwdetect.detect_nvidia(runner=runner_for("name, memory.total [MiB]\nNVIDIA H800, 81559 MiB\n"))
    msg = str(exc.value)
    assert "'NVIDIA H800'" in msg and "not in the hardware catalog" in msg
    assert "Closest catalog entries:" in msg and "mem_bandwidth_gb_s" in msg


def test_na_memory_and_no_devices():
    assert hwdetect.parse_nvidia_smi_csv("NVIDIA L4, [N/A]\n")[0].memory_mib is None
    with pytest.raises(ConfigError, match="No devices were found"):
        hwdetect.detect_nvidia(runner=runner_for("No devices were found\n"))
    with pytest.raises(ConfigError, match="listed no GPUs"):
        hwdetect.detect_nvidia(runner=runner_for("name, memory.total [MiB]\n"))


def test_missing_nvidia_smi_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no nvidia-smi
    with pytest.raises(ConfigError, match="nvidia-smi was not found.*hardware: h100-sxm"):
        hwdetect.detect_nvidia()


def test_failing_nvidia_smi_reports_its_message(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                    "driver.\" >&2\nexit 9\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="nvidia-smi failed: NVIDIA-SMI has failed"):
        hwdetect.detect_nvidia()


def test_resolve_hardware_sources(tmp_path, monkeypatch):
    assert hwdetect.resolve_hardware("l40s").mem_bandwidth_gb_s == 864
    assert hwdetect.resolve_hardware("l40s", tp=2).mem_bandwidth_gb_s == 1728
    assert hwdetect.resolve_hardware(mem_bandwidth_gb_s=123.0).mem_bandwidth_gb_s == 123.0
    assert hwdetect.resolve_hardware("auto", runner=runner_for(T4)).key == "t4"
    with pytest.raises(ConfigError, match="not both"):
        hwdetect.resolve_hardware("l40s", mem_bandwidth_gb_s=100)
    with pytest.raises(ConfigError, match="no hardware given"):
        hwdetect.resolve_hardware(None)
    with pytest.raises(ConfigError, match="roofline.hardware: unknown hardware 'l40'.*did you mean.*l40s.*local-cpu"):
        hwdetect.resolve_hardware("l40", where="roofline.hardware")
    with pytest.raises(ConfigError, match="tensor_parallel does not apply"):
        hwdetect.resolve_hardware("local-cpu", tp=2)


# ---------------------------------------------------------------------------- the probe's logic

def test_aggregate_run_is_all_bytes_over_the_wall_window():
    samples = [(10.0, 11.0, 10e9), (10.5, 12.0, 10e9)]
    assert hwdetect.aggregate_run(samples) == pytest.approx(20e9 / 2.0 / 1e9)
    with pytest.raises(ValueError):
        hwdetect.aggregate_run([(1.0, 1.0, 5.0)])


def fake_measure(per_run_gb_s, calls=None):
    """Each run: every process reads 1 GB in the same window sized to give the wanted aggregate."""
    def measure(processes, runs):
        if calls is not None:
            calls.append((processes, runs))
        out = []
        for i in range(runs):
            window = processes * 1e9 / (per_run_gb_s[i % len(per_run_gb_s)] * 1e9)
            out.append([(100.0 + i, 100.0 + i + window, 1e9) for _ in range(processes)])
        return out
    return measure


def test_probe_takes_the_median_of_runs_with_one_process_per_core():
    calls = []
    r = hwdetect.probe_cpu_bandwidth(runs=5, measure=fake_measure([30, 10, 31, 50, 29], calls))
    assert r.mem_bandwidth_gb_s == pytest.approx(30)
    assert [round(x) for x in r.runs_gb_s] == [30, 10, 31, 50, 29]
    assert calls == [(hwdetect.usable_cores(), 5)] and r.processes == hwdetect.usable_cores()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_LATENCY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "cpu_bandwidth.json"


def test_probe_result_is_cached_per_host(cache, monkeypatch):
    calls = []
    gb_s, cached = hwdetect.local_cpu_bandwidth(measure=fake_measure([25.0], calls))
    assert (round(gb_s, 6), cached) == (25.0, False) and len(calls) == 1
    entry = json.loads(cache.read_text())[hwdetect.host_key()]
    assert entry["mem_bandwidth_gb_s"] == pytest.approx(25.0) and entry["processes"] == hwdetect.usable_cores()

    gb_s, cached = hwdetect.local_cpu_bandwidth(measure=fake_measure([99.0], calls))
    assert (round(gb_s, 6), cached) == (25.0, True) and len(calls) == 1  # not measured again

    gb_s, cached = hwdetect.local_cpu_bandwidth(refresh=True, measure=fake_measure([40.0], calls))
    assert (round(gb_s, 6), cached) == (40.0, False) and len(calls) == 2

    monkeypatch.setattr(hwdetect.socket, "gethostname", lambda: "other-host")
    gb_s, cached = hwdetect.local_cpu_bandwidth(measure=fake_measure([12.0], calls))
    assert (round(gb_s, 6), cached) == (12.0, False)
    assert len(json.loads(cache.read_text())) == 2  # both hosts kept
    assert sorted(os.listdir(cache.parent)) == ["cpu_bandwidth.json"]  # no temp files left


def test_corrupt_cache_is_measured_again_and_rewritten(cache):
    cache.parent.mkdir(parents=True)
    cache.write_text("{truncated")
    gb_s, cached = hwdetect.local_cpu_bandwidth(measure=fake_measure([21.0]))
    assert not cached and json.loads(cache.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == pytest.approx(21)


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "c.json"
    hwdetect._atomic_write_json(path, {"a": 1})
    with pytest.raises(TypeError):
        hwdetect._atomic_write_json(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["c.json"]


def test_local_cpu_hardware_from_cache(cache):
    hw = hwdetect.resolve_hardware("local-cpu", measure=fake_measure([33.0]))
    assert hw.key == "local-cpu" and hw.mem_bandwidth_gb_s == pytest.approx(33.0) and "probe" in hw.source
    again = hwdetect.resolve_hardware("local-cpu", measure=fake_measure([1.0]))
    assert again.mem_bandwidth_gb_s == pytest.approx(33.0) and "cached" in again.source


def test_small_real_probe_returns_a_positive_finite_figure_and_caches_it(cache):
    measure = functools.partial(hwdetect.numpy_read_measure, array_mb=16, passes=2)
    gb_s, cached = hwdetect.local_cpu_bandwidth(measure=measure, runs=2)
    assert math.isfinite(gb_s) and gb_s > 0 and not cached
    assert json.loads(cache.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == gb_s


def test_importing_hwdetect_does_not_import_numpy():
    import subprocess
    import sys
    code = "import sys, pytest_llm_latency.roofline.hwdetect, pytest_llm_latency.cli.ceiling; print('numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
