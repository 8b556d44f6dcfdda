"""The roofline gate end to end on the reference target (H100 profile, decode efficiency 0.7)."""
import json
import xml.etree.ElementTree as ET

import pytest

SLO = """
target: {{url: "reference://h100-sxm/llama-3.1-8b?efficiency=0.7"}}
roofline: {{{roof}}}
workloads:
  decode: {{class: custom, prompt_tokens: 64, output_tokens: 64, samples: 5, warmup: 1}}
"""


def run(pytester, roof, *args):
    pytester.makefile(".slo.yaml", gate=SLO.format(roof=roof))
    return pytester.runpytest("-p", "no:cacheprovider", "--junitxml=j.xml", "--llm-latency-json=r.json", *args)


def props(pytester):
    root = ET.parse(pytester.path / "j.xml").getroot()
    return {p.get("name"): p.get("value") for p in root.iter("property")}


def test_gate_passes_at_half_and_reports_efficiency(pytester):
    r = run(pytester, "min_decode_efficiency: 0.5")
    r.assert_outcomes(passed=1)
    p = props(pytester)
    assert 0.66 < float(p["llm.roofline.decode_efficiency"]) < 0.73
    assert float(p["llm.roofline.ceiling_tok_s"]) == pytest.approx(3350e9 / (16.06e9 + 96 * 131072), rel=1e-3)
    assert p["llm.roofline.hardware"] == "H100-SXM" and float(p["llm.roofline.model_bytes"]) > 16e9
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]
    assert res["roofline"]["decode_efficiency"] == pytest.approx(float(p["llm.roofline.decode_efficiency"]))


def test_gate_fails_at_0_8_with_the_arithmetic(pytester):
    r = run(pytester, "min_decode_efficiency: 0.8")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*decode 1*tok/s = 0.7* of ceiling 208.* tok/s*",
                            "*(H100-SXM 3350 GB/s ÷ (16.06 GB weights + 12.6 MB KV @ 96 ctx)); budget ≥ 0.80*"])


def test_cli_min_efficiency_overrides_the_file(pytester):
    run(pytester, "min_decode_efficiency: 0.8", "--llm-latency-min-decode-efficiency=0.5").assert_outcomes(passed=1)


def test_faster_than_the_ceiling_is_a_configuration_error(pytester):
    # the server behaves like an H100; claiming an L40S puts it at ~2.7x the L40S ceiling
    r = run(pytester, "min_decode_efficiency: 0.5, hardware: l40s")
    r.assert_outcomes(errors=1)  # could not be judged: a pytest error, as the table says
    r.stdout.fnmatch_lines(["*could not be judged*", "*ceiling*"])
    assert props(pytester)["llm.verdict"] == "error"


def test_unknown_hardware_is_a_collection_error_with_close_matches(pytester):
    r = run(pytester, "min_decode_efficiency: 0.5, hardware: h100-sxn")
    r.stdout.fnmatch_lines(["*gate.slo.yaml:2 roofline.hardware: unknown hardware 'h100-sxn'; did you mean h100-sxm*"])
    assert r.ret == pytest.ExitCode.INTERRUPTED


def test_a_bandwidth_cached_under_load_is_probed_again_before_a_configuration_error(pytester, monkeypatch):
    """The issue's case end to end: a local-cpu figure cached while the machine was loaded makes a
    real run look faster than the ceiling; the gate probes once more (injected probe and load
    readings) and judges with the machine's figure, which replaces the cache."""
    from pytest_llm_latency.roofline import hwdetect

    cache = pytester.path / "cache"
    cache.mkdir()
    monkeypatch.setenv("LLM_LATENCY_CACHE", str(cache))
    (cache / "cpu_bandwidth.json").write_text(json.dumps({hwdetect.host_key(): {
        "mem_bandwidth_gb_s": 1000.0, "runs_gb_s": [1000.0], "processes": 2, "method": "best-of-runs"}}))
    probes = []

    def measure(processes, runs):  # every run reads at 3350 GB/s: the H100 the reference target emulates
        probes.append(processes)
        window = processes / 3350.0
        return [[(i, i + window, 1e9) for _ in range(processes)] for i in range(runs)]

    ticks = iter(range(0, 10_000, 10))
    monkeypatch.setattr(hwdetect, "numpy_read_measure", measure)
    monkeypatch.setattr(hwdetect, "proc_stat_sample", lambda: (0.0, float(next(ticks)), 0.0), raising=False)  # quiet
    r = run(pytester, "min_decode_efficiency: 0.5, hardware: local-cpu")
    r.assert_outcomes(passed=1)
    assert len(probes) == 1
    p = props(pytester)
    assert 0.66 < float(p["llm.roofline.decode_efficiency"]) < 0.73 and p["llm.roofline.kv_cache"] == "counted"
    entry = json.loads((cache / "cpu_bandwidth.json").read_text())[hwdetect.host_key()]
    assert entry["mem_bandwidth_gb_s"] == pytest.approx(3350.0)


AB = """
target: {url: "reference://h100-sxm/llama-3.1-8b?efficiency=0.35"}
roofline: {min_decode_efficiency: 0.6}
workloads:
  decode:
    class: custom
    prompt_tokens: 64
    output_tokens: 64
    samples: 6
    warmup: 1
    baseline_target: {url: "reference://h100-sxm/llama-3.1-8b?efficiency=0.7"}
"""


def test_a_failed_floor_sets_the_baseline_arms_step_ratio_beside_its_reasons(pytester):
    """A/B in one run: the candidate decodes at half the baseline arm's speed (0.35 against 0.7 of the
    ceiling), so the failed floor's diagnosis carries the step ratio, about 2x, from the same run."""
    pytester.makefile(".slo.yaml", ab=AB)
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-json=r.json")
    r.assert_outcomes(failed=1)
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]
    said = " ".join(d["evidence"] for d in res["roofline"]["diagnosis"])
    ratio = float(said.split("against the baseline target ", 1)[1].split(": step ", 1)[1].split("x", 1)[0])
    assert 1.8 < ratio < 2.2, said
