"""Hardware sources: nvidia-smi parsing (injected runner) and the local-cpu probe's aggregation/caching."""
import functools
import json
import math
import os
import stat

import pytest

from pytest_llm_latency.roofline import hwdetect
from pytest_llm_latency.roofline.probe_cache import write_cache
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


def load_meter(others_share, own_s=5.0):
    """A fake ``/proc/stat`` reader: each call advances the machine's CPU time by 10 s, of which
    ``own_s`` is this process and its workers and ``others_share`` x 10 s other processes."""
    state = {"busy": 100.0, "total": 1000.0, "own": 1.0}

    def sample():
        out = (state["busy"], state["total"], state["own"])
        state["busy"] += own_s + others_share * 10.0
        state["total"] += 10.0
        state["own"] += own_s
        return out
    return sample


def test_probe_takes_the_best_run_with_one_process_per_core():
    calls = []
    r = hwdetect.probe_cpu_bandwidth(runs=5, measure=fake_measure([30, 10, 31, 50, 29], calls),
                                     load=load_meter(0.0))
    assert r.mem_bandwidth_gb_s == pytest.approx(50)  # the old median rule said 30
    assert [round(x) for x in r.runs_gb_s] == [30, 10, 31, 50, 29]
    assert calls == [(hwdetect.usable_cores(), 5)] and r.processes == hwdetect.usable_cores()
    assert r.busy_share == pytest.approx(0.0)


def test_others_busy_share_leaves_out_this_process_and_its_workers():
    # 20 s of machine time passed; 14 s busy, 10 s of it ours: others had 4 / 20
    assert hwdetect.others_busy_share((100.0, 1000.0, 3.0), (114.0, 1020.0, 13.0)) == pytest.approx(0.2)
    assert hwdetect.others_busy_share((0.0, 0.0, 0.0), (5.0, 10.0, 9.0)) == 0.0  # clamped: rounding of own time
    assert hwdetect.others_busy_share(None, (1.0, 2.0, 0.0)) is None
    assert hwdetect.others_busy_share((1.0, 2.0, 0.0), (1.0, 2.0, 0.0)) is None  # no time passed


def test_proc_stat_sample_reads_this_machine():
    sample = hwdetect.proc_stat_sample()
    if sample is None:
        pytest.skip("no /proc/stat here")
    busy, total, own = sample
    assert 0 <= busy <= total and own > 0


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_LATENCY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(hwdetect, "proc_stat_sample", load_meter(0.0))  # a quiet machine unless a test says
    return tmp_path / "cache" / "cpu_bandwidth.json"


def test_probe_result_is_cached_per_host(cache, monkeypatch):
    calls = []
    gb_s, cached, note, _ = hwdetect.local_cpu_bandwidth(measure=fake_measure([25.0], calls))
    assert (round(gb_s, 6), cached, note) == (25.0, False, "") and len(calls) == 1
    entry = json.loads(cache.read_text())[hwdetect.host_key()]
    assert entry["mem_bandwidth_gb_s"] == pytest.approx(25.0) and entry["processes"] == hwdetect.usable_cores()
    assert entry["method"] == "best-of-runs" and entry["busy_share"] == pytest.approx(0.0)

    gb_s, cached, _, _ = hwdetect.local_cpu_bandwidth(measure=fake_measure([99.0], calls))
    assert (round(gb_s, 6), cached) == (25.0, True) and len(calls) == 1  # not measured again

    gb_s, cached, _, _ = hwdetect.local_cpu_bandwidth(refresh=True, measure=fake_measure([40.0], calls))
    assert (round(gb_s, 6), cached) == (40.0, False) and len(calls) == 2

    monkeypatch.setattr(hwdetect.socket, "gethostname", lambda: "other-host")
    gb_s, cached, _, _ = hwdetect.local_cpu_bandwidth(measure=fake_measure([12.0], calls))
    assert (round(gb_s, 6), cached) == (12.0, False)
    assert len(json.loads(cache.read_text())) == 2  # both hosts kept
    assert sorted(os.listdir(cache.parent)) == ["cpu_bandwidth.json"]  # no temp files left


def test_runs_that_disagree_widely_are_not_cached_and_say_why(cache):
    calls = []
    # the case: a loaded moment inside the probe (21.9 GB/s) next to quiet ones
    bw = hwdetect.local_cpu_bandwidth(measure=fake_measure([45.0, 21.9, 44.0], calls), runs=3)
    assert bw.value == pytest.approx(45.0) and not bw.cached
    assert bw.note.startswith("not cached: the runs disagree") and "2.05x" in bw.note and "limit 1.5x" in bw.note
    assert not cache.exists()
    again = hwdetect.local_cpu_bandwidth(measure=fake_measure([40.0, 39.0], calls), runs=2)
    assert len(calls) == 2 and not again.cached and again.note == ""  # measured again; this one agrees: cached
    assert json.loads(cache.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == pytest.approx(40.0)


@pytest.mark.parametrize("others, cached", [(0.5, False), (0.26, False), (0.1, True)])
def test_a_busy_machine_is_not_cached_and_says_why(cache, others, cached):
    bw = hwdetect.local_cpu_bandwidth(measure=fake_measure([30.0]), load=load_meter(others))
    assert bw.value == pytest.approx(30.0)
    assert cache.exists() is cached
    if not cached:
        assert bw.note == (f"not cached: the machine was busy: other processes used {others:.0%} of its CPU "
                           "time during the probe (limit 25%)")


def test_an_old_median_cache_entry_is_measured_again(cache):
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({hwdetect.host_key(): {"mem_bandwidth_gb_s": 21.9, "runs_gb_s": [21.9]}}))
    calls = []
    bw = hwdetect.local_cpu_bandwidth(measure=fake_measure([40.0], calls))
    assert len(calls) == 1 and not bw.cached and bw.value == pytest.approx(40.0)
    assert json.loads(cache.read_text())[hwdetect.host_key()]["method"] == "best-of-runs"


def test_a_second_look_replaces_the_cache_only_with_a_higher_figure(cache):
    hwdetect.local_cpu_bandwidth(measure=fake_measure([40.0]))
    lower = hwdetect.local_cpu_bandwidth(refresh=True, only_if_higher=True, measure=fake_measure([30.0]))
    assert lower.value == pytest.approx(30.0) and "the cached 40.0 GB/s is higher" in lower.note
    assert json.loads(cache.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == pytest.approx(40.0)
    higher = hwdetect.local_cpu_bandwidth(refresh=True, only_if_higher=True, measure=fake_measure([52.0]))
    assert higher.value == pytest.approx(52.0) and higher.note == ""
    assert json.loads(cache.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == pytest.approx(52.0)
    busy = hwdetect.local_cpu_bandwidth(refresh=True, only_if_higher=True, measure=fake_measure([60.0]),
                                        load=load_meter(0.6))
    assert busy.value == pytest.approx(60.0) and "busy" in busy.note  # higher, but not a quiet figure
    assert json.loads(cache.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == pytest.approx(52.0)


def test_corrupt_cache_is_measured_again_and_rewritten(cache):
    cache.parent.mkdir(parents=True)
    cache.write_text("{truncated")
    gb_s, cached, _, _ = hwdetect.local_cpu_bandwidth(measure=fake_measure([21.0]))
    assert not cached and json.loads(cache.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == pytest.approx(21)


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "c.json"
    write_cache(path, {"a": 1})
    with pytest.raises(TypeError):
        write_cache(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["c.json"]


def test_local_cpu_hardware_from_cache(cache):
    hw = hwdetect.resolve_hardware("local-cpu", measure=fake_measure([33.0]))
    assert hw.key == "local-cpu" and hw.mem_bandwidth_gb_s == pytest.approx(33.0) and "probe" in hw.source
    again = hwdetect.resolve_hardware("local-cpu", measure=fake_measure([1.0]))
    assert again.mem_bandwidth_gb_s == pytest.approx(33.0) and again.source.startswith("cached")
    assert hw.note == again.note == ""


def test_why_a_figure_was_not_cached_reaches_the_roofline_message(cache):
    from pytest_llm_latency.core.roofline.modelbytes import ModelBytes
    from pytest_llm_latency.core.roofline.ceiling import decode_ceiling
    from tests.helpers.roofline import evaluate_roofline
    from pytest_llm_latency.core.roofline.roofline_text import format_ceiling

    hw = hwdetect.resolve_hardware("local-cpu", measure=fake_measure([45.0, 21.9, 44.0]), runs=3)
    assert hw.mem_bandwidth_gb_s == pytest.approx(45.0) and "best of 3 run(s), 21.9-45.0 GB/s" in hw.source
    model = ModelBytes(weight_bytes=406e6, kv_bytes_per_token=0.0)
    msg = evaluate_roofline(hw, model, context=96, tpot_p50_ms=20.0).message
    assert "hardware note: not cached: the runs disagree" in msg
    assert "hardware note: not cached: the runs disagree" in format_ceiling(decode_ceiling(hw, model))


def test_small_real_probe_returns_a_positive_finite_figure_and_caches_it(cache):
    measure = functools.partial(hwdetect.numpy_read_measure, array_mb=16, passes=2)
    gb_s, cached, note, runs = hwdetect.local_cpu_bandwidth(measure=measure, runs=2)  # quiet load: the fixture
    assert math.isfinite(gb_s) and gb_s > 0 and not cached and runs.startswith("best of 2 run(s)")
    if note:  # two runs on a shared machine may disagree; then nothing is cached, and it says so
        assert note.startswith("not cached: the runs disagree") and not cache.exists()
    else:
        assert json.loads(cache.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == gb_s


def test_importing_hwdetect_does_not_import_numpy():
    import subprocess
    import sys
    code = ("import sys, pytest_llm_latency.roofline.hwdetect, pytest_llm_latency.cli.ceiling; "
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
