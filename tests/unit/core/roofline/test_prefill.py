"""The prefill roofline's arithmetic (core.roofline.prefill, core.roofline.prefill_fit) and its workload keys."""
import statistics

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.prefill import (Peak, PrefillBudgets, ServerPrefill, prefill_ceiling,
    prefill_model, format_prefill_ceiling)
from tests.helpers.roofline import evaluate_prefill
from pytest_llm_latency.core.roofline.prefill_fit import linearity, medians_by_x, theil_sen
from pytest_llm_latency.core.spec.workload import make_workload

LENGTHS = (256, 1024, 4096)
JITTER = (-0.3, 0.1, 0.0, 0.2, -0.1)  # ms, deterministic: five samples per length


def line_points(a_ms, ms_per_token, lengths=LENGTHS):
    return [(n, a_ms + ms_per_token * n + j) for n in lengths for j in JITTER]


# ---------------------------------------------------------------------------- the fit

def test_one_outlier_moves_neither_slope_nor_intercept():
    clean = line_points(5.0, 0.04)
    dirty = list(clean)
    dirty[7] = (dirty[7][0], dirty[7][1] * 10)  # one request at 1024 tokens took 10x (a GC pause, a retry)
    fit = theil_sen([x for x, _ in dirty], [y for _, y in dirty])
    assert fit.slope == pytest.approx(0.04, rel=0.01)
    assert fit.intercept == pytest.approx(5.0, abs=0.5)
    assert max(abs(r) for i, r in enumerate(fit.residuals) if i != 7) < 1.0  # the outlier alone misses the line
    assert fit.residuals[7] == pytest.approx(dirty[7][1] - clean[7][1], rel=0.05)
    # least squares, for contrast, is dragged off by the same point: the test could fail
    ls = statistics.linear_regression([x for x, _ in dirty], [y for _, y in dirty])
    assert abs(ls.intercept - 5.0) > 10 * abs(fit.intercept - 5.0) and abs(ls.intercept - 5.0) > 5


def test_the_fit_needs_two_prompt_lengths():
    with pytest.raises(ConfigError, match="two or more prompt lengths"):
        theil_sen([512, 512, 512], [10.0, 11.0, 12.0])


def test_ttft_that_does_not_grow_is_not_prefill():
    with pytest.raises(ConfigError, match="does not grow with prompt length"):
        evaluate_prefill([(256, 9.0), (1024, 9.0), (4096, 8.9)])


# ---------------------------------------------------------------------------- MFU

def llama8b():
    return prefill_model("Llama-3.1-8B", 8.03e9, layers=32, hidden=4096)


def physics_points(model, peak_tflops, mfu, overhead_ms=3.0):
    """TTFT exactly as a compute-bound server at ``mfu`` of ``peak_tflops`` would give it."""
    return [(n, overhead_ms + 1000.0 * model.flops(n) / (mfu * peak_tflops * 1e12)) for n in LENGTHS for _ in JITTER]


def test_mfu_against_a_hand_computation():
    model = llama8b()
    pts = physics_points(model, 989.0, 0.4)
    r = evaluate_prefill(pts, model=model, peak=Peak(989.0, "H100-SXM"), budgets=PrefillBudgets(min_efficiency=0.35))
    # by hand: the chord of FLOPs(n) = 2·P·n + 2·L·W·n(n+1) between 256 and 4096 tokens
    flops_per_token = 2 * 8.03e9 + 2 * 32 * 4096 * (256 + 4096 + 1)
    t256 = 3.0 + 1000 * (2 * 8.03e9 * 256 + 2 * 32 * 4096 * 256 * 257) / (0.4 * 989e12)
    t4096 = 3.0 + 1000 * (2 * 8.03e9 * 4096 + 2 * 32 * 4096 * 4096 * 4097) / (0.4 * 989e12)
    tok_s = 1000 * (4096 - 256) / (t4096 - t256)
    assert r.flops_per_token == pytest.approx(flops_per_token)
    assert r.tok_s == pytest.approx(tok_s, rel=1e-9)
    assert r.mfu == pytest.approx(tok_s * flops_per_token / 989e12, rel=1e-9)
    assert r.mfu == pytest.approx(0.4, rel=1e-6)
    assert r.ceiling_tok_s == pytest.approx(989e12 / flops_per_token)
    assert r.overhead_ms == pytest.approx(3.0, abs=1e-6)  # the attention term is in the fit: no n² bias
    assert r.status == "pass" and r.linearity.shape == "linear"


def test_a_failed_efficiency_budget_shows_the_arithmetic_and_what_to_check():
    model = llama8b()
    r = evaluate_prefill(physics_points(model, 989.0, 0.2), model=model, peak=Peak(989.0, "H100-SXM"),
                         budgets=PrefillBudgets(min_efficiency=0.35))
    assert r.status == "fail"
    first = r.message.splitlines()[0]
    assert first.startswith(f"prefill {r.tok_s:,.0f} tok/s = 0.20 of the compute ceiling (H100-SXM 989 TFLOPS ÷ "
                            f"{r.flops_per_token / 1e9:.3g} GFLOP/token")
    assert first.endswith("; budget ≥ 0.35")
    for check in ("attention backend", "dtype", "chunked-prefill token budget", "tensor parallel", "CPU offload"):
        assert check in r.message


def test_above_the_ceiling_is_a_configuration_error_not_a_pass():
    model = llama8b()
    r = evaluate_prefill(physics_points(model, 989.0, 0.5), model=model, peak=Peak(362.0, "L40S"),
                         budgets=PrefillBudgets(min_efficiency=0.35))
    assert r.mfu == pytest.approx(0.5 * 989 / 362, rel=1e-6)
    assert r.status == "config_error" and "prefix" in r.message


def test_without_the_attention_shape_the_term_is_left_out_and_said_so():
    model = prefill_model("m", 1e9)
    pts = [(n, 2.0 + 1000 * 2e9 * n / 1e12) for n in (128, 512, 2048)]
    r = evaluate_prefill(pts, model=model, peak=Peak(2.0, "cpu"))
    assert r.flops_per_token == 2e9 and r.mfu == pytest.approx(0.5)
    assert "attention not counted" in r.message


def test_an_unknown_peak_is_said_not_guessed():
    r = evaluate_prefill(physics_points(llama8b(), 989.0, 0.5), model=llama8b(), peak=Peak(None, "T4"))
    assert r.mfu is None and "no peak FLOP/s is known for T4" in r.message


def test_other_budgets_and_server_overhead():
    model = llama8b()
    r = evaluate_prefill(physics_points(model, 989.0, 0.5, overhead_ms=40.0), model=model, peak=Peak(989.0, "H100"),
                         budgets=PrefillBudgets(tps_min=1e6, overhead_max_ms=20.0),
                         server=ServerPrefill("llama.cpp timings", 30000.0, 38.5))
    assert r.status == "fail" and len(r.failed) == 2
    assert "TTFT overhead 40.0 ms > ttft_overhead_max 20 ms" in r.message
    assert "client − server = 38.5 ms overhead" in r.message
    assert r.as_properties()["server_overhead_ms"] == 38.5


# ---------------------------------------------------------------------------- linearity

def test_a_cached_shared_prefix_makes_ttft_sublinear():
    pts = [(n, 2.0 + 0.03 * (n - 448)) for n in (512, 1024, 2048) for _ in range(3)]  # 448 tokens never computed
    r = evaluate_prefill(pts, model=llama8b(), peak=Peak(989.0, "H100"))
    assert r.linearity.shape == "sublinear" and "not prefill" in r.message


def test_quadratic_blowup_beyond_the_attention_model_is_flagged():
    model = llama8b()
    pts = [(n, 2.0 + 0.03 * n + 2e-5 * n * n) for n in LENGTHS]  # eager attention: n² dominates
    r = evaluate_prefill(pts, model=model, peak=Peak(989.0, "H100"), budgets=PrefillBudgets(require_linear=True))
    assert r.linearity.shape == "superlinear" and "quadratic blow-up" in r.message
    assert r.status == "fail"
    fit = theil_sen([x for x, _ in pts], [y for _, y in pts])
    assert linearity(fit, medians_by_x([x for x, _ in pts], [y for _, y in pts])).shape == "superlinear"


# ---------------------------------------------------------------------------- ceiling (CLI arithmetic)

def test_prefill_ceiling_for_a_prompt():
    c = prefill_ceiling(llama8b(), Peak(989.0, "H100-SXM", "catalog"), 1000)
    flops = 2 * 8.03e9 * 1000 + 2 * 32 * 4096 * 1000 * 1001
    assert c.ms == pytest.approx(1000 * flops / 989e12)
    assert c.tok_s == pytest.approx(1000 / (c.ms / 1000))
    assert "H100-SXM 989 TFLOPS" in format_prefill_ceiling(c)


# ---------------------------------------------------------------------------- workload keys

def test_prompt_sweep_workload():
    w = make_workload("p", {"prompt_sweep": [4096, 256, 1024], "roofline": {"min_prefill_efficiency": 0.35},
                            "slo": {"ttft_overhead_max": "50ms"}})
    assert w.prompt_sweep == (256, 1024, 4096) and w.prompt_tokens == 4096 and w.output_tokens == 1
    assert w.prefill_slo["min_prefill_efficiency"][0] == 0.35 and w.prefill_slo["ttft_overhead_max"][0] == 50.0
    assert w.budgets == ()


@pytest.mark.parametrize("spec, match", [
    ({"prompt_sweep": [256]}, "two or more different prompt lengths"),
    ({"prompt_sweep": [256, 1024], "concurrency": 4}, "concurrency 1"),
    ({"prompt_sweep": [256, 1024], "prompt_tokens": 512, "output_tokens": 1}, "not both"),
    ({"prompt_sweep": [256, 1024], "shared_prefix_tokens": 256}, "shortest prompt_sweep length"),
    ({"prompt_sweep": [256, 1024], "roofline": {"min_prefill_efficiency": 1.5}}, r"fraction .* in \(0, 1\]"),
    ({"class": "chat", "slo": {"prefill_tps_min": 5000}}, "need a prompt_sweep"),
    ({"class": "chat", "roofline": {"min_prefill_efficiency": 0.3}},
     "roofline.min_prefill_efficiency: prefill budgets need"),
])
def test_bad_sweeps_name_the_key(spec, match):
    with pytest.raises(ConfigError, match=match):
        make_workload("p", spec)
