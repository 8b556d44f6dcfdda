"""Each check of ``core.checks``, on its own, without a server: what it finds from a measurement
and its facts; and the one verdict function over findings."""
from types import SimpleNamespace

import pytest

from pytest_llm_latency.core.measure.agent_turns import Session, Turn
from pytest_llm_latency.core.checks import CHECKS, evaluate, judge, with_workload
from pytest_llm_latency.core.checks.agent_sessions import check_agent_sessions
from pytest_llm_latency.core.checks.budgets import check_budgets
from pytest_llm_latency.core.checks.cold_starts import check_cold_starts
from pytest_llm_latency.core.checks.diagnosis import check_causes
from pytest_llm_latency.core.checks.error_rate import check_error_rate
from pytest_llm_latency.core.checks.gates import check_prefill_roofline, check_roofline
from pytest_llm_latency.core.checks.measurement_validity import (check_client_health, check_prefix_cache,
                                                                 check_token_counts)
from pytest_llm_latency.core.checks.regression import check_regression
from pytest_llm_latency.core.checks.samples import check_samples
from pytest_llm_latency.core.checks.server import check_server_alive
from pytest_llm_latency.core.checks.sweeps import check_prompt_sweep_parts, check_rate_sweep
from pytest_llm_latency.core.result.facts import AgentRun, ColdStarts, Comparison, GateOutcome, RateSweepRun
from pytest_llm_latency.core.findings import Finding, verdict_of
from pytest_llm_latency.core.measure.prefix_cache import CacheEvidence
from pytest_llm_latency.core.spec.rate_sweep import Step, SweepResult, SweepSpec
from pytest_llm_latency.core.result.result import Failure, measured, unprepared
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record

MS = 1_000_000


def rec(ttft_ms=100.0, gap_ms=10.0, tokens=4, load_ms=None):
    return record(ttft_ms, gap_ms=gap_ms, tokens=tokens, expected=4,
                  server_timings=None if load_ms is None else {"load_ms": load_ms})


def wl(samples=20, rate=0.0, **spec):
    slo = spec.pop("slo", {"ttft_p50": 500})
    return make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": samples,
                               "warmup": 0, "max_error_rate": rate, "slo": slo, **spec})


def kinds(findings):
    """(check, kind) of each finding but the part figures (``part_fields``)."""
    return [(f.check, f.kind) for f in findings if f.kind != "part"]


def part_fields(findings, part: str) -> dict:
    """The figures the checks decided for result part ``part`` (``core.findings.part_update``)."""
    out: dict = {}
    for f in findings:
        if f.kind == "part" and f.data.part == part:
            out.update(dict(f.data.fields))
    return out


# ---------------------------------------------------------------- findings and the verdict
def test_the_verdict_is_error_over_fail_over_pass():
    note, failed, error = (Finding("x", k, "t") for k in ("note", "failed", "error"))
    assert verdict_of([]) == "pass" and verdict_of([note]) == "pass"
    assert verdict_of([note, failed]) == "fail" and verdict_of([Finding("x", "violation", "v")]) == "fail"
    assert verdict_of([failed, error]) == "error"
    with pytest.raises(ValueError, match="not one of"):
        Finding("x", "warning", "t")


def test_an_unjudged_result_has_no_verdict():
    res = measured(wl(), [rec()] * 20, [])
    with pytest.raises(RuntimeError, match="not been judged"):
        res.verdict  # noqa: B018 - never a pass before the checks ran
    assert judge(res).verdict == "pass"


def test_judging_twice_gives_the_same_findings_and_no_duplicate_notes():
    res = measured(wl(rate=0.5), [rec()] * 18, [Failure("http_500", "boom")] * 2)
    res.notes.append("measured note")
    first = list(judge(res).findings)
    again = judge(res)
    assert again.findings == first and again.notes == ["measured note"]  # the checks' notes stay findings
    assert sum("allowed by max_error_rate" in n for n in again.shown_notes) == 1


def test_every_check_is_run_in_the_fixed_order():
    names = [c.__name__ for c in CHECKS]
    assert names[0] == "check_samples" and names[-1] == "check_causes" and len(set(names)) == len(names)


# ---------------------------------------------------------------- one test per check
def test_samples_empty_nothing_answering_and_preparation():
    assert kinds(check_samples(measured(wl(), [], []))) == [("samples", "error")]
    refused = measured(wl(), [], [Failure("connect", "no")] * 3)
    assert "nothing answered at the start" in check_samples(refused)[0].text and not refused.summaries
    refused.facts.server_failed = True  # then the refusals are the server's failures: judgeable
    assert check_samples(refused) == []
    assert kinds(check_samples(unprepared(wl(), Failure("http_503", "x")))) == [("samples", "failed")]
    assert kinds(check_samples(unprepared(wl(), Failure("http_400", "x")))) == [("samples", "error")]
    assert check_samples(measured(wl(), [rec()], [])) == []


def test_budgets_violation_too_few_samples_and_fraction():
    slow = measured(wl(slo={"ttft_p50": 50}), [rec()] * 20, [])
    (v,) = check_budgets(slow)
    assert v.kind == "violation" and v.data.budget.key == "ttft_p50" and v.text == v.data.message
    assert check_budgets(measured(wl(slo={"ttft_p50": 500}), [rec()] * 20, [])) == []
    few = check_budgets(measured(wl(samples=3, confidence=None, slo={"ttft_p99": 500}), [rec()] * 3, []))
    assert kinds(few) == [("budgets", "error")] and "cannot support a p99" in few[0].text
    g = measured(wl(slo={"ttft_p50": 50, "goodput_min": 0.5}), [rec()] * 20, [])
    found = check_budgets(g)
    assert ("goodput", "failed") in kinds(found) and part_fields(found, "load") == {"goodput_fraction": 0.0}
    assert g.load.goodput_fraction is None  # the check returns it; judge sets it


def test_error_rate_fail_error_and_note():
    fault = measured(wl(), [rec()] * 18, [Failure("http_500", "boom")] * 2)
    assert kinds(check_error_rate(fault)) == [("error_rate", "failed")]
    rejected = measured(wl(), [rec()] * 18, [Failure("http_400", "bad")] * 2)
    assert kinds(check_error_rate(rejected)) == [("error_rate", "error")]
    allowed = check_error_rate(measured(wl(rate=0.5), [rec()] * 18, [Failure("http_500", "boom")] * 2))
    assert kinds(allowed) == [("error_rate", "note")] and "allowed by max_error_rate" in allowed[0].text
    short = check_error_rate(measured(wl(), [rec(tokens=2)] + [rec()] * 19, []))
    assert kinds(short) == [("error_rate", "error")] and "stopped before the forced 4" in short[0].text


def test_cold_starts_note_fail_and_the_cold_request():
    cold = rec(load_ms=5000.0)
    res = measured(wl(), [cold] + [rec()] * 19, [])
    res.facts.cold = ColdStarts([1], [cold], 20)
    assert kinds(check_cold_starts(res)) == [("cold_starts", "note")]
    strict = measured(wl(cold_starts="fail"), [cold], [])
    strict.facts.cold = ColdStarts([1], [cold], 1)
    assert kinds(check_cold_starts(strict)) == [("cold_starts", "failed")]
    budget = measured(wl(slo={"ttft_p50": 500, "cold_ttft_max": 1000}), [rec()] * 20, [])
    budget.facts.cold = ColdStarts(outcome=rec(ttft_ms=3000.0, load_ms=2500.0))
    (f,) = check_cold_starts(budget)
    assert f.kind == "failed" and f.text.startswith("cold-start TTFT 3000.0 ms > budget cold_ttft_max 1000 ms")
    budget.facts.cold = ColdStarts(outcome=Failure("http_400", "no"))
    assert kinds(check_cold_starts(budget)) == [("cold_starts", "error")]


def test_client_health_prefix_cache_and_token_counts():
    res = measured(wl(), [rec()] * 20, [])
    assert check_client_health(res) == check_prefix_cache(res) == check_token_counts(res) == []
    res.facts.client_fell_behind, res.client.client_lag_ms_p99 = True, 80.0
    assert "the client fell behind (CPU-starved: lag p99 80 ms)" in check_client_health(res)[0].text
    res.facts.prefix_cache = CacheEvidence(cached_tokens=1800, prompt_tokens=2000, requests=2, source="cache_n")
    assert kinds(check_prefix_cache(res)) == [("prefix_cache", "note"), ("prefix_cache", "error")]
    from pytest_llm_latency.core.result.facts import PerChunkItl

    res.facts.per_chunk_itl = PerChunkItl(3, 20, " (no usage)")
    assert check_token_counts(res) == []  # no ITL budget: per-chunk ITL is only a note
    itl = measured(wl(slo={"itl_p50": 20}), [rec()] * 20, [])
    itl.facts.per_chunk_itl = PerChunkItl(3, 20, " (no usage)")
    (f,) = check_token_counts(itl)
    assert f.kind == "error" and f.text.startswith("itl_p50 cannot be judged: 3 of 20 streams gave no per-chunk")


def test_agent_sessions_budgets_on_the_measured_sessions():
    from pytest_llm_latency.core.spec.agent_spec import AgentBudget

    turns = [Turn(0, k, 100 * k, 0, 900.0, 1000.0, None, None, True) for k in (1, 2)]
    spec = SimpleNamespace(steps=2, budgets=(AgentBudget("turn_ttft_p50", "turn_ttft", "p50", 500.0),))
    res = measured(wl(), [rec()] * 20, [])
    res.facts.agent = AgentRun(spec, tuple(Session(i, list(turns)) for i in range(10)))
    found = check_agent_sessions(res)
    assert ("agent_sessions", "failed") in kinds(found) and part_fields(found, "agent")["sessions"] == 10


def test_prompt_sweep_parts_are_tagged_and_rate_sweep_capacity():
    part = measured(wl(), [rec()] * 5, [])
    part.facts.client_fell_behind, part.client.client_lag_ms_p99 = True, 90.0
    res = measured(wl(), [rec()] * 5, [])
    res.facts.sweep_parts = [("prompt 64: ", part), ("prompt 128: ", unprepared(wl(), Failure("http_400", "x")))]
    texts = [f.text for f in check_prompt_sweep_parts(res)]
    assert texts[0].startswith("prompt 64: the client fell behind")
    assert texts[1].startswith("prompt 128: could not prepare the run")
    spec = SweepSpec(rate_min=1.0, rate_max=8.0)
    none = SweepResult(spec, [Step(1.0, False)])
    res.facts.rate_sweep = RateSweepRun(none, "TTFT p95 over")
    assert check_rate_sweep(res)[0].text == "sweep: no rate meets the SLO: capacity below rate_min 1 req/s " \
                                            "(TTFT p95 over)"
    res.facts.rate_sweep = RateSweepRun(SweepResult(spec, [Step(2.0, True), Step(4.0, False)]), "", 3.0)
    assert check_rate_sweep(res)[0].text == "sweep: capacity 2 req/s < capacity_min 3 req/s"
    res.facts.rate_sweep = RateSweepRun(SweepResult(spec, [Step(4.0, True)]), "", 3.0)
    assert check_rate_sweep(res) == []


def test_server_alive_gates_and_regression():
    res = measured(wl(), [rec()] * 20, [])
    assert check_server_alive(res) == check_roofline(res) == check_regression(res) == []
    res.facts.server_died = "exit code -9"
    assert check_server_alive(res)[0].text == "the managed server died during the test: exit code -9"
    res.facts.gates = [GateOutcome("roofline", "fail", "decode 0.1x"), GateOutcome("roofline", "pass", "ok"),
                       GateOutcome("prefill", "config_error", "no peak")]
    assert kinds(check_roofline(res)) == [("roofline", "failed")]
    assert kinds(check_prefill_roofline(res)) == [("prefill", "error")]
    comp = lambda status: SimpleNamespace(status=status, metric="ttft", message=lambda label: f"{status} vs {label}")  # noqa: E731
    res.facts.comparisons = [Comparison("baseline", (comp("regression"), comp("ok"), comp("improvement")))]
    res.facts.baseline_target_empty = "baseline target B measured no sample: x"
    assert [(f.kind, f.text) for f in check_regression(res)] == [
        ("failed", "baseline target B measured no sample: x"), ("failed", "regression vs baseline"),
        ("note", "improvement vs baseline")]


def test_causes_only_for_a_failed_budget():
    ok = evaluate(wl(), [rec()] * 20, [])
    assert check_causes(ok) == [] and ok.causes == []
    slow = evaluate(wl(slo={"itl_p99": 1}, concurrency=1), [rec()] * 20, [])
    assert all(f.kind == "cause" for f in check_causes(slow))


def test_judging_for_other_budgets_starts_from_the_measurement():
    res = evaluate(wl(slo={"ttft_p50": 50}), [rec()] * 20, [])
    assert res.verdict == "fail"
    other = judge(with_workload(res, wl(slo={"ttft_p50": 500})))
    assert other.verdict == "pass" and not other.violations and res.verdict == "fail"


def test_roofline_and_prefill_gates_are_decided_by_their_check_not_the_measurement():
    """The gates measure (status report or config_error); ``check_roofline`` / ``check_prefill_roofline``
    apply the floor and budgets, and set the parts' judged status and message."""
    from pytest_llm_latency.core.roofline.hardware import Hardware
    from pytest_llm_latency.core.roofline.modelbytes import ModelBytes
    from pytest_llm_latency.core.roofline.prefill import PrefillBudgets, measure_prefill
    from pytest_llm_latency.core.roofline.ceiling import measure_roofline

    h100 = Hardware(key="h100-sxm", name="H100-SXM", mem_bandwidth_gb_s=3350, peak_bf16_tflops=989, source="sheet")
    llama = ModelBytes(weight_bytes=16.06e9, kv_bytes_per_token=131072, name="Llama-3-8B", params=8.03e9,
                       bytes_per_param=2.0, source="8.03e9 params x 2 B")
    ceiling = measure_roofline(h100, llama, context=4000, tpot_p50_ms=10.0).ceiling_tok_s
    for eff, want in ((0.5, "pass"), (0.2, "fail")):
        m = measure_roofline(h100, llama, context=4000, tpot_p50_ms=1000 / (eff * ceiling), min_efficiency=0.3)
        assert m.status == "report"  # measured, not judged
        res = measured(wl(), [rec()] * 20, [])
        res.facts.gates = [GateOutcome("roofline", m.status, m.message, m, ("caveat",))]
        found = check_roofline(res)
        part = part_fields(found, "roofline")
        assert part["status"] == want and res.roofline.status is None  # returned, not written
        if want == "fail":
            texts = [f.text for f in found if f.kind == "failed"]
            assert kinds(found) == [("roofline", "failed")] and "0.20" in texts[0] and "message" not in part
        else:  # a pass: the message is information, the caveat a note
            assert [f for f in found if f.kind != "part"] == [Finding("roofline", "note", "caveat")]
            assert "0.50" in part["message"]
        assert judge(res).roofline.status == want
    pts = [(256, 10.0 + 256 / 50), (1024, 10.0 + 1024 / 50), (4096, 10.0 + 4096 / 50)] * 2  # 50,000 tok/s
    p = measure_prefill(pts, budgets=PrefillBudgets(tps_min=100_000.0))
    assert p.status == "report" and p.failed == ()
    res = measured(wl(), [rec()] * 20, [])
    res.facts.gates = [GateOutcome("prefill", p.status, p.message, p)]
    found = check_prefill_roofline(res)
    failed = [f for f in found if f.kind == "failed"]
    assert kinds(found) == [("prefill", "failed")] and "prefill_tps_min" in failed[0].text
    assert part_fields(found, "prefill")["status"] == "fail"
