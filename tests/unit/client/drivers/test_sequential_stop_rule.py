"""``samples: auto`` stops once the test's verdict is certain (issue 25, defect 2): one budget
decided *fail* fails the test whatever the others show, so sampling stops there and the open
budgets are ``not_decided`` -- visible, never violations.  The stop rule is pure
(``core.measure.verdict.SequentialVerdicts.check``), driven here by an injected sample stream."""
import random

from pytest_llm_latency.client.runner import send_samples, stop_info
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.measure.verdict import SequentialVerdicts
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.plugin.report.document import result_entry
from pytest_llm_latency.plugin.report.terminal import bound_lines
from tests.helpers.records import record

MS = 1_000_000


def wl(**kw):
    spec = {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": "auto",
            "slo": {"ttft_p95": "500ms", "tpot_p50": "10ms"}}
    spec.update(kw)
    return make_workload("w", spec)


def stream(rng, ttft_mu, tpot_mu):
    """An endless stream of (ttft, tpot) draws: the injected samples."""
    while True:
        yield max(1.0, rng.gauss(ttft_mu, 20.0)), max(0.1, rng.gauss(tpot_mu, 1.0))


def feed(seq, w, draws):
    """The runner's loop without a server: one value per round, checked from min_samples on.
    Returns the values sent when ``check`` said stop (or max_samples)."""
    vals = {"ttft": [], "tpot": []}
    for ttft, tpot in draws:
        vals["ttft"].append(ttft)
        vals["tpot"].append(tpot)
        n = len(vals["ttft"])
        if n >= w.min_samples and seq.check(vals):
            break
        if n >= w.samples:
            break
    return vals


def test_a_decided_fail_stops_sampling_and_leaves_the_others_not_decided():
    w = wl()  # TTFT p95 far over its budget; TPOT p50 sits on its budget (never decided quickly)
    seq = SequentialVerdicts(w.budgets, w.confidence, w.min_samples, w.samples)
    vals = feed(seq, w, stream(random.Random(1), 700.0, 10.0))
    n = len(vals["ttft"])
    assert n < 20 < w.samples  # stopped long before max_samples (200), at the fail
    assert seq.stopped_by == "ttft_p95" and seq.decided["ttft_p95"].status == "fail"
    assert "tpot_p50" not in seq.decided and seq.open_budgets() == ["tpot_p50"]
    tpot_b = w.budget_map()["tpot_p50"]
    v = seq.final(tpot_b, vals["tpot"])
    assert (v.status, v.stopped_by, v.n, v.would_decide) == ("not_decided", "ttft_p95", n, None)
    assert seq.stop_reason(n, w.samples) == f"ttft_p95 failed at {n} samples: sampling stopped; not decided: tpot_p50"


def test_without_a_fail_the_undecided_budget_runs_to_max_samples_and_stays_inconclusive():
    w = wl(max_samples=60)  # TTFT p95 clearly met (passes at its first look), TPOT p50 on its budget
    seq = SequentialVerdicts(w.budgets, w.confidence, w.min_samples, w.samples)
    vals = feed(seq, w, stream(random.Random(2), 100.0, 10.0))
    assert len(vals["ttft"]) == 60 and seq.stopped_by is None
    v = seq.final(w.budget_map()["tpot_p50"], vals["tpot"])
    assert v.status in ("inconclusive", "pass", "fail")  # a decision on the budget is allowed (<= 5%) ...
    if v.status == "inconclusive":  # ... the usual case keeps the inconclusive semantics
        assert seq.stop_reason(60, 60) == "max_samples reached (60) with budgets undecided"


def test_a_pass_decided_first_is_kept_when_a_later_fail_stops_sampling():
    w = wl(slo={"ttft_p95": "2s", "e2e_p95": "1s", "tpot_p50": "10ms"})
    seq = SequentialVerdicts(w.budgets, w.confidence, w.min_samples, w.samples)
    vals = {"ttft": [], "tpot": [], "e2e": []}
    rng = random.Random(3)
    for i in range(w.samples):
        vals["ttft"].append(rng.gauss(100.0, 5.0))  # far below its budget: passes at its first look
        vals["tpot"].append(rng.gauss(10.0, 1.0))   # on its budget: open
        # E2E p95 on its budget (5% above 1 s) for 80 requests, then the server slows down
        vals["e2e"].append(rng.gauss(1000.0 - 1.645 * 20.0, 20.0) if i < 80 else rng.gauss(2000.0, 20.0))
        if i + 1 >= w.min_samples and seq.check(vals):
            break
    assert seq.decided["ttft_p95"].status == "pass" and seq.decided["ttft_p95"].n < 80
    assert seq.stopped_by == "e2e_p95" and 80 < len(vals["ttft"]) < w.samples
    assert seq.final(w.budget_map()["ttft_p95"], vals["ttft"]).status == "pass"
    assert seq.final(w.budget_map()["tpot_p50"], vals["tpot"]).status == "not_decided"


# ------------------------------------------------------------------ through the runner and the result
def rec(ttft_ms: float, gap_ms: float, tokens: int = 4):
    return record(ttft_ms, gap_ms=gap_ms, tokens=tokens)


def prompts(n):
    return [Prompt(system="", user=f"u{i}", expected_tokens=10, counted_tokens=10) for i in range(n)]


def test_the_runner_stops_at_the_fail_and_the_result_reports_the_open_budget_as_not_decided():
    w = wl()
    draws = stream(random.Random(4), 700.0, 10.0)

    def one(_p):
        ttft, tpot = next(draws)
        return rec(ttft, tpot)

    outs, seq = send_samples(one, prompts(w.samples), w)
    assert len(outs) < 20  # not 200: the verdict was certain at the first fail
    res = evaluate(w, outs, [], sequential=seq)
    assert res.verdict == "fail"
    assert [v.budget.key for v in res.violations] == ["ttft_p95"]  # the open budget is no violation
    status = {v.key: v.status for v in res.verdicts}
    assert status == {"ttft_p95": "fail", "tpot_p50": "not_decided"}
    msg = res.failure_message()
    assert f"not decided: sampling stopped when TTFT p95 failed at {len(outs)} samples" in msg
    assert "inconclusive" not in msg
    info = stop_info(w, seq, len(outs))
    assert info["stop_reason"] == f"ttft_p95 failed at {len(outs)} samples: sampling stopped; not decided: tpot_p50"
    # JSON bounds and the terminal carry the status and which budget stopped sampling
    res.measurement.set(**info)
    doc = result_entry(res, "t.py::w")
    assert doc["bounds"]["tpot_p50"]["status"] == "not_decided"
    assert doc["bounds"]["tpot_p50"]["stopped_by"] == "ttft_p95"
    text = "\n".join(bound_lines(doc))
    assert "tpot_p50 <= 10 ms" in text and "NOT DECIDED at n=" in text
    assert "(sampling stopped when ttft_p95 failed)" in text
