"""``core.measure.decode_totals``: a TPOT regression split, on run totals, into engine step time and
tokens per step (TPOT = step time ÷ tokens per step), in both wordings; and the regression
check that states it as a cause."""
import pytest

from pytest_llm_latency.core.measure import spec_decode as sd
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.measure.compare import compare
from pytest_llm_latency.core.measure.decode_totals import DecodeTotals, explain, totals_of
from pytest_llm_latency.core.result.facts import Comparison
from pytest_llm_latency.core.result.result import measured, metric_values
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.files import baseline as bfile
from tests.helpers.records import record


def spec(tps, step_ms=15.0, eff=0.8, rate=None, tokens=3000):
    """A speculating run's totals: ``tokens`` decode tokens in steps of ``step_ms`` emitting ``tps`` each."""
    steps = tokens / tps
    return DecodeTotals(decode_tokens=tokens, decode_ms=steps * step_ms, tokens_per_step=tps, acceptance_rate=rate,
                        step_ms=step_ms, step_efficiency=eff, source=sd.SOURCE_VLLM)


def plain(tpot_ms, eff=None, tokens=1000):
    return DecodeTotals(decode_tokens=tokens, decode_ms=tpot_ms * tokens, decode_efficiency=eff)


def test_acceptance_fell_with_steps_unchanged():
    text = explain("tpot", spec(3.0, rate=0.67), spec(1.2, rate=0.07))
    assert text == ("TPOT +150 % on run totals (Σ decode time ÷ Σ decode tokens, 5 → 12.5 ms; not a percentile): "
                    "engine steps unchanged (0.80 of the ceiling), tokens per step 3.0 → 1.2: draft acceptance fell "
                    "(67% → 7% of the drafted tokens accepted)")


def test_steps_slower_and_acceptance_unchanged():
    text = explain("tpot", spec(3.0, step_ms=15.0, eff=0.8), spec(3.0, step_ms=20.0, eff=0.6))
    assert "engine steps +33 %, 0.80 → 0.60 of the ceiling, tokens per step unchanged (3.0)" in text


def test_steps_without_a_roofline_say_only_the_step_time():
    text = explain("tpot", spec(3.0, eff=None), spec(1.2, eff=None))
    assert "engine steps unchanged (15 → 15 ms)" in text and "of the ceiling" not in text


def test_non_speculative_run_is_the_step_time_with_the_ceiling_and_the_fingerprint():
    text = explain("tpot", plain(10.0, eff=0.80), plain(13.8, eff=0.58),
                   ["model: 'llama-8b-q8' -> 'llama-8b-q4'", "command: ['a'] -> ['b']"])
    assert text.startswith("TPOT +38 % on run totals (Σ decode time ÷ Σ decode tokens, 10 → 13.8 ms; "
                           "not a percentile): step time +38 %, 0.80 → 0.58 of the ceiling")
    assert "neither run reports speculative decoding: one token per engine step" in text
    assert text.endswith("the fingerprint says what changed: model: 'llama-8b-q8' -> 'llama-8b-q4'; "
                         "command: ['a'] -> ['b']")


def test_same_fingerprint_is_said_and_no_fingerprint_is_silent():
    assert explain("tpot", plain(10.0), plain(13.8), []).endswith(
        "the fingerprint shows no change (same model, server and command)")
    assert "fingerprint" not in explain("tpot", plain(10.0), plain(13.8), None)
    assert "step time +38 % (10 → 13.8 ms)" in explain("tpot", plain(10.0), plain(13.8))


def test_speculation_on_one_side_only_is_not_split():
    text = explain("tpot", spec(3.0), plain(12.0))
    assert "the baseline emitted 3.0 tokens per engine step (vLLM /metrics counters), this run reports no " \
           "speculative decoding" in text and "not split" in text


def test_an_old_baseline_without_totals_says_so_plainly():
    text = explain("tpot", None, spec(1.2))
    assert "not split into engine step time and tokens per step: the baseline stores no decode totals" in text


def test_e2e_regression_names_its_decode_part():
    assert explain("e2e", spec(3.0), spec(1.2)).startswith("E2E regressed; its decode part: TPOT +150 %")


def test_totals_round_trip_and_refuse_nothing_to_divide_by():
    t = spec(2.5, rate=0.5)
    back = DecodeTotals.from_json(t.to_json())
    assert back is not None and back.source == t.source
    assert [back.decode_ms, back.tokens_per_step, back.step_ms] == pytest.approx([t.decode_ms, 2.5, 15.0])
    assert DecodeTotals.from_json({"decode_tokens": 0, "decode_ms": 5.0}) is None
    assert DecodeTotals.from_json({}) is None


def test_baseline_file_keys_are_the_totals_fields():
    from dataclasses import fields
    assert set(bfile.DECODE_TOTALS_NUMBERS + bfile.DECODE_TOTALS_TEXTS) == {f.name for f in fields(DecodeTotals)}


# ------------------------------------------------------------------ the regression check states it
def _run(step_ms, tps, accepted_per_req, n=30, tokens=31):
    """``n`` requests of ``tokens`` tokens whose decode took steps of ``step_ms`` emitting ``tps`` tokens."""
    gap = step_ms / tps
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": tokens, "samples": n,
                            "warmup": 0, "slo": {"ttft_p50": 500}})
    recs = [record(50, gap_ms=gap, tokens=tokens) for _ in range(n)]
    res = measured(w, recs, [])
    acc = sd.from_counters({}, {sd.VLLM_COUNTERS["accepted_tokens"]: accepted_per_req * n,
                                sd.VLLM_COUNTERS["draft_tokens"]: 3 * accepted_per_req * n},
                           sd.decode_tokens(recs))
    res.spec_decode.set(**sd.as_part(acc, sd.decode_time_ms(recs)))
    res.roofline.set(status="pass", step_efficiency=0.8, tokens_per_step=acc.tokens_per_step)
    return res


def test_check_regression_explains_a_tpot_regression_as_a_cause():
    base = _run(15.0, 3.0, 20)       # 30 decode tokens a request, 20 accepted: 10 steps, 3.0 per step
    cand = _run(15.0, 1.2, 5)        # 5 accepted: 25 steps, 1.2 per step
    b, c = metric_values(base.records)["tpot"], metric_values(cand.records)["tpot"]
    comp = compare("tpot_p50", b, c, 0.05, n_boot=200)
    assert comp.status == "regression"
    cand.facts.comparisons.append(Comparison("baseline", (comp,), base_totals=totals_of(base),
                                             fingerprint_changes=()))
    judge(cand)
    assert cand.verdict == "fail"
    [cause] = [c for c in cand.causes if c.startswith("cause: decode vs baseline")]
    assert "TPOT +150 % on run totals" in cause and "engine steps unchanged (0.80 of the ceiling)" in cause
    assert "tokens per step 3.0 → 1.2: draft acceptance fell" in cause
    assert cand.baseline.explanation in cause


def test_no_regression_no_explanation():
    base = _run(15.0, 3.0, 20)
    vals = metric_values(base.records)["tpot"]
    comp = compare("tpot_p50", vals, vals, 0.05, n_boot=100)
    base.facts.comparisons.append(Comparison("baseline", (comp,), base_totals=totals_of(base)))
    judge(base)
    assert base.verdict == "pass" and not base.causes and base.baseline.explanation is None


def test_totals_of_a_plain_run_take_the_ceiling_fraction_on_run_totals_not_tpot_p50():
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 9, "samples": 4, "warmup": 0,
                            "slo": {"ttft_p50": 500}})
    recs = [record(50, gap_ms=5, tokens=9) for _ in range(3)] + [record(50, gap_ms=15, tokens=9)]
    res = measured(w, recs, [])
    res.roofline.set(status="pass", ceiling_tok_s=100.0, decode_efficiency=2.0)  # from TPOT p50 (5 ms)
    t = totals_of(res)
    assert t is not None and not t.speculates and t.tpot_ms == pytest.approx(7.5, rel=0.01)
    assert t.decode_efficiency == pytest.approx(1000 / 7.5 / 100.0, rel=0.01)   # Σ time ÷ Σ tokens, not p50
    res.roofline.status = "config_error"
    assert totals_of(res).decode_efficiency is None                            # a gate that did not judge


def test_a_broken_baseline_figure_is_dropped_not_divided_by():
    back = DecodeTotals.from_json({"decode_tokens": 600, "decode_ms": 2000.0, "tokens_per_step": 0.0, "step_ms": 0,
                                   "step_efficiency": -1.0, "source": "x"})
    assert back is not None and back.tokens_per_step is None and back.step_ms is None and back.step_efficiency is None
    assert not back.speculates
    assert "TPOT +" in explain("tpot", back, spec(2.0))    # said, no ZeroDivisionError
