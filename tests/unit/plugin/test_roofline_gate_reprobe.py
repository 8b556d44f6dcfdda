"""The gate's second look at a measured ceiling, and what it says about the KV cache, with the
probe, the load readings and the server injected (no real probe, no server, no clock)."""
import json
from types import SimpleNamespace

import pytest

from pytest_llm_latency.core.result.result import WorkloadResult
from pytest_llm_latency.core.measure.stats import Summary
from pytest_llm_latency.core.spec.workload import Workload
from pytest_llm_latency.plugin import roofline_gate
from pytest_llm_latency.plugin.options import Settings
from pytest_llm_latency.roofline import hwdetect

# 406 MB of weights (the real-server tier's F32 model) decoding at 50 tok/s (TPOT 20 ms): 20.3 GB/s of reads
META = [{"id": "membound.gguf", "meta": {"n_params": 101_500_000, "size": 406_000_000}}]
TPOT_MS = 20.0


def measure_at(*gb_s_per_call):
    """A fake probe: the k-th call's runs all read at gb_s_per_call[k] (agreeing runs)."""
    calls = []

    def measure(processes, runs):
        gb_s = gb_s_per_call[min(len(calls), len(gb_s_per_call) - 1)]
        calls.append(gb_s)
        window = processes * 1e9 / (gb_s * 1e9)
        return [[(10.0 * i, 10.0 * i + window, 1e9) for _ in range(processes)] for i in range(runs)]
    measure.calls = calls
    return measure


def quiet_load():
    state = [0.0]

    def sample():
        state[0] += 10.0
        return (state[0] / 2, state[0], state[0] / 2)  # all the busy time is ours
    return sample


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_LATENCY_CACHE", str(tmp_path))
    monkeypatch.setattr(hwdetect, "proc_stat_sample", quiet_load(), raising=False)
    return tmp_path / "cpu_bandwidth.json"


def poison(cache, gb_s):
    """The issue's state: a figure taken under load, cached by the old rule or a busy moment."""
    cache.write_text(json.dumps({hwdetect.host_key(): {"mem_bandwidth_gb_s": gb_s, "runs_gb_s": [gb_s],
                                                       "processes": 2, "method": "best-of-runs"}}))


class FakeLlamaCpp:
    def models(self):
        return META


def gate(roof):
    workload = Workload(name="w", klass="custom", prompt_tokens=32, output_tokens=128, roofline=roof)
    tpot = Summary(5, TPOT_MS, TPOT_MS, TPOT_MS, TPOT_MS, TPOT_MS, TPOT_MS, TPOT_MS)
    res = WorkloadResult(workload=workload, records=[object()], summaries={"tpot": tpot}, completed={"tpot": tpot})
    sess = SimpleNamespace(settings=Settings.resolve({}, {}, {}))
    roofline_gate.gate_for(sess, SimpleNamespace(url="http://127.0.0.1:1"), workload, res, {},
                           client=FakeLlamaCpp())
    from pytest_llm_latency.core.checks.gates import check_roofline

    for f in check_roofline(res):  # the gate measures, its check decides (as core.checks.judge applies it)
        if f.kind == "part":
            getattr(res, f.data.part).set(**dict(f.data.fields))
        else:
            {"error": res.errors, "failed": res.failed_checks, "note": res.notes}[f.kind].append(f.text)
    return res


def test_a_poisoned_cache_gets_one_fresh_probe_and_the_gate_proceeds(env, monkeypatch):
    poison(env, 12.0)  # 12 GB/s: the ceiling would be 29.5 tok/s, decode 50 tok/s = 1.69x
    measure = measure_at(30.0)
    monkeypatch.setattr(hwdetect, "numpy_read_measure", measure)
    res = gate({"hardware": "local-cpu", "min_decode_efficiency": 0.3})
    assert measure.calls == [30.0]  # exactly one fresh probe
    assert res.errors == [] and res.failed_checks == [] and res.roofline.status == "pass"
    assert res.roofline.decode_efficiency == pytest.approx(50 * 406e6 / 30e9, rel=1e-6)
    said = "decode was 1.69x the ceiling at 12.0 GB/s (cached), so the bandwidth was probed again: 30.0 GB/s"
    assert said in res.roofline.message
    assert any(said in note for note in res.notes), "a re-probe is a visible note (a warning)"
    assert json.loads(env.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == pytest.approx(30.0)


def test_a_fresh_probe_that_is_no_higher_leaves_the_configuration_error(env, monkeypatch):
    poison(env, 12.0)
    measure = measure_at(11.0)
    monkeypatch.setattr(hwdetect, "numpy_read_measure", measure)
    res = gate({"hardware": "local-cpu", "min_decode_efficiency": 0.3})
    assert measure.calls == [11.0] and res.roofline.status == "config_error"
    assert "roofline configuration error" in res.errors[0]
    assert "so the bandwidth was probed again: 11.0 GB/s, not higher" in res.errors[0]
    assert json.loads(env.read_text())[hwdetect.host_key()]["mem_bandwidth_gb_s"] == pytest.approx(12.0)


def test_a_higher_fresh_figure_that_still_is_too_low_is_reported_with_it(env, monkeypatch):
    poison(env, 12.0)
    monkeypatch.setattr(hwdetect, "numpy_read_measure", measure_at(15.0))
    res = gate({"hardware": "local-cpu", "min_decode_efficiency": 0.3})
    assert res.roofline.status == "config_error"
    assert "ceiling" in res.errors[0] and "15.0 GB/s" in res.errors[0] and "probed again" in res.errors[0]


def test_catalog_hardware_is_not_probed_again(env, monkeypatch):
    measure = measure_at(30.0)
    monkeypatch.setattr(hwdetect, "numpy_read_measure", measure)
    res = gate({"mem_bandwidth_gb_s": 10.0, "min_decode_efficiency": 0.3})
    assert res.roofline.status == "config_error" and measure.calls == []


def test_judge_with_fresh_probe_passes_other_outcomes_through():
    hw = SimpleNamespace(key="local-cpu", mem_bandwidth_gb_s=30.0)
    seen = []
    ok = SimpleNamespace(status="pass")
    out = roofline_gate.measure_with_fresh_probe(hw, lambda h: seen.append(h) or ok, lambda: pytest.fail("probed"))
    assert out is ok and seen == [hw]


def test_llamacpp_meta_says_the_kv_cache_is_not_counted(env):
    res = gate({"mem_bandwidth_gb_s": 30.0})
    msg = res.roofline.message
    assert any("KV cache not counted" in note for note in res.notes), "a visible note (a warning)"
    assert "(custom 30 GB/s ÷ (406.0 MB weights, KV cache not counted)); report only" in msg
    assert ("KV cache not counted: llama.cpp /v1/models meta gives weights only; set roofline.layers/kv_heads/"
            "head_dim or roofline.kv_bytes_per_token (+ window) or roofline.gguf to include it") in msg
    assert res.roofline.kv_cache.startswith("not counted: llama.cpp /v1/models meta gives weights only")


def test_llamacpp_meta_with_the_kv_shape_counts_it(env):
    res = gate({"mem_bandwidth_gb_s": 30.0, "layers": 4, "kv_heads": 4, "head_dim": 64})
    assert res.roofline.kv_cache == "counted" and "KV cache not counted" not in res.roofline.message
    assert not any("KV cache" in note for note in res.notes)
    kv = 2 * 4 * 4 * 64 * 2  # f16, llama.cpp's default cache type
    assert res.roofline.model_bytes == pytest.approx(406e6 + kv * (32 + 128 / 2))
    errors = gate({"mem_bandwidth_gb_s": 30.0, "layers": 4}).errors  # a partial shape is not dropped silently
    assert len(errors) == 1 and "missing kv_heads, head_dim" in errors[0]


def test_a_failed_second_probe_keeps_the_configuration_error_and_says_why():
    from pytest_llm_latency.core.errors import ConfigError
    from pytest_llm_latency.core.roofline.hardware import Hardware

    hw = Hardware(key="local-cpu", name="local CPU", mem_bandwidth_gb_s=12.0, source="cached numpy read probe")
    seen = []

    def evaluate(h):
        seen.append(h)
        return SimpleNamespace(status="config_error", decode_efficiency=1.69)

    def reprobe():
        raise ConfigError("hardware 'local-cpu': the bandwidth probe did not finish")
    roofline_gate.measure_with_fresh_probe(hw, evaluate, reprobe)
    assert seen[-1].note == "probing again failed: hardware 'local-cpu': the bandwidth probe did not finish"
