"""The workload's latency budgets: point percentiles, statistical verdicts (``confidence``),
the fraction floors ``goodput_min`` / ``fluidity_min`` (``core.result.goodput``) and the
speculative-decoding floors (``core.checks.acceptance_budgets``); the stall budgets are judged by
``core.checks.stalls``.

Writes the per-budget statistical verdicts to ``res.verdicts`` and the fractions it computed
to ``res.load`` (figures for the report; the findings are the decision)."""
from __future__ import annotations

from ..measure.coldstart import COLD_BUDGET
from ..result.result import METRIC_LABEL, Violation, WorkloadResult, metric_values, verdict_text
from ..measure.stats import min_samples_for
from ..measure.verdict import budget_verdict
from ..spec.workload import Budget
from ..findings import Finding, part_update
from .acceptance_budgets import check_acceptance_budget
from .client_skew import check_skew
from .samples import judgeable

CHECK = "budgets"


def check_budgets(res: WorkloadResult) -> list[Finding]:
    if not judgeable(res):
        return []
    workload = res.workload
    values = metric_values(res.records, res.failures, workload.output_tokens)
    out: list[Finding] = []
    for b in workload.budgets:
        if b.key == COLD_BUDGET:
            continue  # one request after an unload (check_cold_starts), not the samples
        if b.is_fraction:
            out += _fraction(res, b)
            continue
        if b.is_acceptance:
            out += check_acceptance_budget(res, b)
            continue
        if b.is_kv_transfer:
            continue  # the pools' histograms, not the samples (core.checks.kv_transfer)
        if b.is_stall:
            continue  # the gaps a long prefill stalled, not a per-request metric (core.checks.stalls)
        s = res.summaries.get(b.metric)
        if s is None:
            out.append(Finding(CHECK, "error", f"{METRIC_LABEL[b.metric]} {b.stat}: no values to check the budget "
                                               f"against (every request was short or produced < 2 tokens)"))
            continue
        refused = check_skew(res, b, s.get(b.stat))
        if refused is not None:  # the client's own error could flip it: not judged
            out.append(refused)
            continue
        if workload.confidence is not None:
            out += _statistically(res, b, values[b.metric], s)
            continue
        need = min_samples_for(b.stat)
        if b.metric != "itl" and s.n < need:
            out.append(Finding(CHECK, "error", f"{METRIC_LABEL[b.metric]} {b.stat}: {s.n} samples cannot support a "
                                               f"{b.stat} (needs >= {need}); raise samples"))
            continue
        observed = s.get(b.stat)
        if (observed < b.limit) if b.is_floor else (observed > b.limit):
            v = Violation(b, observed, s)
            out.append(Finding(CHECK, "violation", v.message, v))
    return out


def _fraction(res: WorkloadResult, b: Budget) -> list[Finding]:
    from ..result.goodput import fluidity, goodput

    workload = res.workload
    if b.metric == "goodput":
        g = goodput(res.records, len(res.failures), workload.budgets, 1.0)
        observed = None if g is None else g.fraction
        how = "" if g is None else f" ({g.good} of {g.total} requests met every per-request budget)"
    else:
        observed = fluidity(res.records, res.failures, workload)
        how = " (mean over requests of the tokens that met their deadline)"
    if observed is None:
        return [Finding(CHECK, "error", f"{b.metric}: no requests to compute it from")]
    figure = [part_update(CHECK, "load", **{"goodput_fraction" if b.metric == "goodput" else "fluidity_index":
                                             round(observed, 4)})]
    if observed < b.limit:
        return figure + [Finding(b.metric, "failed", f"{b.metric} {observed:.3f} < budget {b.limit:g}{how}")]
    return figure


def _statistically(res: WorkloadResult, b: Budget, vals: list[float], s) -> list[Finding]:
    w = res.workload
    if res.sequential is not None:
        v = res.sequential.final(b, vals)
    else:
        v = budget_verdict(b.key, b.metric, b.stat, b.limit, b.is_floor, vals, w.confidence)
    res.verdicts.append(v)
    if v.status == "fail" or (v.status == "inconclusive" and w.inconclusive == "fail"):
        viol = Violation(b, v.estimate, s, v)
        return [Finding(CHECK, "violation", viol.message, viol)]
    if (v.status == "inconclusive" and w.inconclusive == "warn") or v.status == "not_decided":
        # not_decided: another budget failed first and sampling stopped (samples: auto); never a violation
        return [Finding(CHECK, "note", verdict_text(v, b))]
    return []
