"""The decode diagnosis ranked by the run's own evidence (issue 40), on the rows measured on one H200
(SXM, datasheet 4,800 GB/s, read probe 4,243 GB/s) with a PyTorch engine in Llama-3.1-8B's shapes at
batch 1, 512-token prompts, 640 mean context: engine step and TTFT p50 as recorded, the server's running
gauge sampled 1 throughout.  Hand arithmetic in the comments."""
from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_llm_latency.core.roofline.decode_diagnosis import DecodeEvidence, diagnose_decode, efficiency_bases
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.prefill import prefill_model
from tests.helpers.roofline import evaluate_roofline
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.roofline.gpu_probe import probe_gpu_bandwidth
from pytest_llm_latency.roofline.resolve import resolve_model_bytes

CONFIG = str(catalog.__file__).rsplit("/", 1)[0] + "/configs/llama-3.1-8b-instruct.json"
H200 = replace(catalog.hardware("h200"), measured_gb_s=4243.0)
MODEL = resolve_model_bytes(config=CONFIG, dtype="bf16")
ROWS = {  # deployment: (engine step ms = TPOT p50, TTFT p50 ms)
    "graphs": (7.01, 20.4), "fp32": (11.07, 175.0), "eager": (18.56, 19.2)}


def evidence(ttft_ms: float, **kw) -> DecodeEvidence:
    return DecodeEvidence(concurrency=1, running_max=1.0, running_samples=24, waiting_max=0.0, prompt_tokens=512,
                          ttft_ms=ttft_ms, prefill_flops=prefill_model("8b", MODEL.params, 32, 4096).flops(512),
                          peak_tflops=989.0, declared_dtype="bf16", **kw)


def run(row: str, **kw):
    step, ttft = ROWS[row]
    return evaluate_roofline(H200, MODEL, context=640, tpot_p50_ms=step, min_efficiency=0.6,
                             evidence=evidence(ttft, **kw))


def ranked(r):
    return [(x["reason"], x["status"]) for x in r.diagnosis()]


def test_the_eager_row_ranks_the_fixed_cost_per_step_first_and_rules_out_batching_and_prefill():
    r = run("eager")
    assert r.status == "fail"
    first = r.diagnosis()[0]
    assert (first["reason"], first["status"]) == ("fixed cost per step", "likely")
    # 15.09 GB at 4,243 GB/s = 3.56 ms of an 18.56 ms step: 15.0 ms (81 %) is not bytes
    assert "takes 3.56 ms; the step takes 18.6 ms: 15 ms per step is not bytes (81%)" in first["evidence"]
    assert "--enforce-eager" in first["evidence"]
    assert ("batching", "ruled out") in ranked(r) and ("interleaved prefill", "ruled out") in ranked(r)
    assert ("KV cache", "ruled out") in ranked(r)  # 83.9 MB of 15.1 GB: 0.6 %
    batching = next(x for x in r.diagnosis() if x["reason"] == "batching")
    assert "never exceeded 1 (24 samples)" in batching["evidence"]
    # prefill ran at 0.41 of bf16's peak (7.75 TFLOP in 19.2 ms): the arithmetic is as declared
    assert ("weights heavier than declared", "possible") in ranked(r)
    assert "likely: fixed cost per step — reading" in r.message.split("check:\n", 1)[1].splitlines()[0]


def test_the_fp32_row_ranks_heavier_weights_first():
    r = run("fp32")
    first = r.diagnosis()[0]
    assert (first["reason"], first["status"]) == ("weights heavier than declared", "likely")
    assert "prefill ran at 0.045 of the bf16 compute peak (512 tokens in 175.0 ms TTFT" in first["evidence"]
    assert ("fixed cost per step", "possible") in ranked(r)   # part of the step is heavier arithmetic


def test_the_graph_row_names_the_chip_reading_below_its_datasheet():
    r = run("graphs")  # 0.47 of the datasheet's ceiling, 0.53 of what the chip reads
    assert r.status == "fail" and [s for _, s in ranked(r)][0] != "likely"
    b = efficiency_bases(r)
    assert b["decode_efficiency_datasheet"] == pytest.approx(r.efficiency)
    assert b["decode_efficiency_measured"] == pytest.approx(r.efficiency * 4800 / 4243)
    assert f"{r.efficiency:.2f} of the datasheet (4,800 GB/s), {r.efficiency * 4800 / 4243:.2f} of measured " \
           "(4,243 GB/s); the floor applies to the datasheet figure" in r.message


def test_efficiency_of_measured_judges_against_the_probe():
    step, ttft = ROWS["graphs"]
    on_measured = evaluate_roofline(H200.judged_on("measured"), MODEL, context=640, tpot_p50_ms=step,
                                    min_efficiency=0.5, evidence=evidence(ttft))
    assert on_measured.ceiling.hardware.mem_bandwidth_gb_s == 4243.0 and on_measured.status == "pass"
    assert efficiency_bases(on_measured)["efficiency_of"] == "measured"
    with pytest.raises(ConfigError, match="needs a measured bandwidth"):
        catalog.hardware("h200").judged_on("measured")


def test_a_server_that_states_a_heavier_dtype_is_named_outright():
    r = run("graphs", server_dtype="fp32", server_dtype_source="llama.cpp /props")
    assert r.diagnosis()[0] == {"reason": "weights heavier than declared", "status": "likely", "evidence":
                                "the server serves fp32 (llama.cpp /props), the SLO says bf16: 2x the bytes per weight"}


def test_other_traffic_on_the_server_makes_batching_likely():
    r = run("graphs", )
    busy = diagnose_decode(r, replace(r.evidence, running_max=6.0))
    assert ("batching", "likely") in [(x.reason, x.status) for x in busy]


def test_the_gpu_probe_takes_the_best_run_and_says_what_is_missing():
    fake = {"backend": "torch", "device_name": "NVIDIA H200", "buffer_bytes": 8 << 30,
            "read_runs_gb_s": [4100.0, 4243.0, 4200.0], "copy_gb_s": 4280.0}
    p = probe_gpu_bandwidth(measure=lambda device, runs: fake)
    assert (p.read_gb_s, p.copy_gb_s, p.not_cached_reason) == (4243.0, 4280.0, None)
    with pytest.raises(ConfigError, match=r"pytest-llm-latency\[gpu\]"):
        probe_gpu_bandwidth(measure=lambda d, n: (_ for _ in ()).throw(ConfigError(
            "hardware 'local-gpu': the GPU probe needs PyTorch or CuPy and neither is importable here: "
            "pip install 'pytest-llm-latency[gpu]' (PyTorch)")))


def test_without_torch_the_worker_names_the_extra():
    import importlib.util

    if importlib.util.find_spec("torch") or importlib.util.find_spec("cupy"):
        pytest.skip("PyTorch or CuPy is installed here")
    from pytest_llm_latency.roofline.gpu_probe import worker_measure

    with pytest.raises(ConfigError, match=r"neither is importable here: pip install 'pytest-llm-latency\[gpu\]'"):
        worker_measure(0, 1)


def test_a_gguf_type_the_server_states_is_weighed_by_its_bits():
    heavier = run("graphs", server_dtype="F32", server_dtype_source="llama.cpp /props").diagnosis()[0]
    assert (heavier["reason"], heavier["status"]) == ("weights heavier than declared", "likely")
    lighter = {d["reason"]: d for d in run("graphs", server_dtype="Q4_K_M",
                                           server_dtype_source="Ollama /api/show").diagnosis()}
    said = lighter["weights heavier than declared"]
    assert said["status"] == "ruled out"
    assert "lighter than the SLO's bf16: the ceiling counts 3.3x the bytes it reads" in said["evidence"]
    assert "declare dtype: Q4_K_M" in said["evidence"]
    same = {d["reason"]: d for d in run("graphs", server_dtype="BF16").diagnosis()}
    assert same["weights heavier than declared"]["status"] == "ruled out"


def test_a_baseline_sets_the_step_and_ttft_ratios_beside_the_reason():
    # the graph engine as the A/B baseline arm: eager's step 18.56 / 7.01 = 2.65x, TTFT 19.2 / 20.4 = 0.94x
    graph_step, graph_ttft = ROWS["graphs"]
    r = run("eager", baseline_step_ms=graph_step, baseline_ttft_ms=graph_ttft,
            baseline_label="baseline target graphs")
    first = r.diagnosis()[0]
    assert first["reason"] == "fixed cost per step"
    assert "; against the baseline target graphs: step 2.65x, TTFT 0.94x" in first["evidence"]
    fp32 = run("fp32", baseline_step_ms=graph_step, baseline_ttft_ms=graph_ttft).diagnosis()[0]
    assert "against the baseline: step 1.58x, TTFT 8.58x" in fp32["evidence"]
    assert "against" not in run("eager").diagnosis()[0]["evidence"]
