"""Pure core: metrics, stats, workloads/budgets, prompts, verdicts (injected clock, no I/O)."""
import subprocess
import sys

import numpy as np
import pytest

from pytest_llm_latency.core.measure import metrics
from pytest_llm_latency.core.errors import ConfigError, EmptySampleError
from pytest_llm_latency.core.prompts.synthesis import build_prompts
from pytest_llm_latency.core.measure.record import RecordBuilder
from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.measure.stats import PERCENTILE_METHOD, min_samples_for, summarize
from pytest_llm_latency.core.spec.workload import make_workload, parse_duration_ms
from tests.helpers.records import record as build_record

MS = 1_000_000


class Clock:
    def __init__(self):
        self.t = 0

    def __call__(self):
        return self.t


def record(ttft_ms, gaps_ms, tokens=None, expected=None, usage=None):
    """Exact per-chunk counts (``tokens``, default one each), usage ``usage``, the end 5 ms on."""
    return build_record(ttft_ms, gaps_ms, chunk_tokens=tokens or [1] * (len(gaps_ms) + 1), expected=expected,
                        completion_tokens=usage, tail_ms=5.0)


def test_metric_formulas():
    r = record(100, [10, 20, 30])
    assert metrics.ttft_ms(r) == 100 and metrics.ttfo_ms(r) == 100
    assert metrics.tpot_ms(r) == pytest.approx(60 / 3)
    assert metrics.itl_ms(r) == [10, 20, 30]
    assert metrics.e2e_ms(r) == 165
    assert metrics.output_tps(r) == pytest.approx(4 / 0.165)


def test_tpot_uses_usage_n_not_chunk_count():
    r = record(100, [30], tokens=[1, 3])  # 2 chunks, 4 tokens
    assert metrics.tpot_ms(r) == pytest.approx(30 / 3)
    assert metrics.itl_ms(r) == pytest.approx([10, 10, 10])


def test_tpot_undefined_below_two_tokens():
    assert metrics.tpot_ms(record(100, [], usage=1)) is None


def test_ttfo_skips_reasoning():
    c = Clock()
    b = RecordBuilder(c)
    c.t = 50 * MS
    b.token_chunk(c.t, reasoning=True)
    c.t = 80 * MS
    b.token_chunk(c.t)
    r = b.finish(c.t)
    assert metrics.ttft_ms(r) == 50 and metrics.ttfo_ms(r) == 80


def test_stats_match_numpy_and_empty_raises():
    vals = [5.0, 1.0, 3.0, 9.0, 7.0]
    s = summarize(vals)
    assert s.p95 == pytest.approx(np.percentile(vals, 95, method=PERCENTILE_METHOD))
    assert (s.n, s.mean, s.max, s.min) == (5, 5.0, 9.0, 1.0)
    with pytest.raises(EmptySampleError):
        summarize([])
    with pytest.raises(EmptySampleError):
        summarize([1.0, float("nan")])


def test_min_samples_for_percentiles():
    assert (min_samples_for("p50"), min_samples_for("p90"), min_samples_for("p95"), min_samples_for("p99")) == \
        (1, 10, 20, 100)


@pytest.mark.parametrize("value,ms", [(500, 500), ("500ms", 500), ("1.5s", 1500), ("250us", 0.25), (" 2 s ", 2000)])
def test_durations(value, ms):
    assert parse_duration_ms(value, "x") == pytest.approx(ms)


@pytest.mark.parametrize("value,needle", [("500sm", "cannot read duration '500sm'"), (-5, "positive"),
                                          ("fast", "cannot read"), (True, "expected a duration")])
def test_bad_durations(value, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_duration_ms(value, "f.slo.yaml:3 workloads.chat.slo.ttft_p95")


def test_builtin_classes_and_overrides():
    w = make_workload("chat", {})
    assert (w.prompt_tokens, w.output_tokens) == (512, 128)
    assert {b.key: b.limit for b in w.budgets} == {"ttft_p95": 500, "tpot_p95": 50}
    a = make_workload("tools", {"class": "agent", "slo": {"ttft_p95": None, "itl_p99": "80ms"}})
    assert {b.key for b in a.budgets} == {"tpot_p95", "e2e_p95", "itl_p99"} and a.system_prompt_tokens > 0
    ls = make_workload("long_summarization", {})
    assert ls.prompt_tokens == 6000 and ls.output_tokens == 512


@pytest.mark.parametrize("spec,needle", [
    ({"clas": "chat"}, "did you mean 'class'"),
    ({"class": "chatt"}, "unknown workload class 'chatt'; did you mean 'chat'"),
    ({"slo": {"ttft_p959": 5}}, "unknown budget 'ttft_p959'"),
    ({"samples": "20"}, "expected an integer >= 1"),
    ({"class": "custom", "prompt_tokens": 5}, "set prompt_tokens and output_tokens"),
    ({"shared_prefix_tokens": 600}, "must be smaller than prompt_tokens"),
])
def test_workload_errors(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        make_workload("chat", spec)


def test_prompts_exact_deterministic_and_salted():
    count = lambda t: len(t.split()) + 1  # noqa: E731
    a = build_prompts(count, n=4, prompt_tokens=300, seed=5)
    b = build_prompts(count, n=4, prompt_tokens=300, seed=5)
    assert [p.text for p in a] == [p.text for p in b]
    assert all(count(p.text) == 300 for p in a)
    assert len({p.text[:16] for p in a}) == 4  # unique salt at the start
    assert build_prompts(count, n=1, prompt_tokens=300, seed=6)[0].text != a[0].text
    shared = build_prompts(lambda t: len(t) + 2, n=3, prompt_tokens=800, seed=1, shared_prefix_tokens=400)
    assert all(len(p.text) + 2 == 800 for p in shared)
    assert len({p.text[:390] for p in shared}) == 1 and len({p.text[:420] for p in shared}) == 3


def test_verdict_never_passes_on_empty_sample():
    w = make_workload("chat", {"samples": 20})
    res = evaluate(w, [], [])
    assert res.verdict == "error" and "empty sample" in res.failure_message()


def test_short_outputs_excluded_from_tpot_and_counted():
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": 2,
                            "slo": {"tpot_p50": 100}})
    ok = record(100, [10, 10, 10], expected=4)
    short = record(100, [500], expected=4)
    res = evaluate(w, [ok, short], [])
    assert res.short_outputs == 1 and res.summaries["tpot"].n == 1 and res.summaries["ttft"].n == 2
    assert "1 of 2 requests stopped before" in res.failure_message()


def test_percentile_needs_enough_samples():  # the point estimate's rule (at a confidence: wide bounds instead)
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": 10,
                            "confidence": None, "slo": {"ttft_p99": 1000}})
    res = evaluate(w, [record(100, [10, 10, 10], expected=4)] * 10, [])
    assert res.verdict == "error" and "cannot support a p99" in res.errors[0]


def test_core_is_pure():
    code = ("import sys, pytest_llm_latency.core.measure.metrics, pytest_llm_latency.core.result.result, "
            "pytest_llm_latency.core.prompts.synthesis, pytest_llm_latency.core.spec.workload, "
            "pytest_llm_latency.core.roofline.ceiling;"
            "bad=[m for m in ('pytest','httpx','yaml','numpy') if m in sys.modules]; print(bad); "
            "sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_plugin_import_is_light():
    code = ("import sys, pytest_llm_latency.plugin.hooks;"
            "bad=[m for m in ('httpx','numpy','yaml') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_measurement_runs_with_the_garbage_collector_off_and_restores_it():
    import gc

    from pytest_llm_latency.client.runner import _no_gc_pauses

    assert gc.isenabled()
    with _no_gc_pauses():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with _no_gc_pauses():
            pass
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
