"""A mixed workload judged per class (issue 37, ``core.spec.mix_spec``; docs/sharing-a-server.md).

Each class is one sub-result: its own requests (``RequestRecord.mix_class`` / ``Failure.mix_class``) and
failures, the workload's statistics settings and the class's budgets, with the run's facts and client
health (one run, one client).  ``CLASS_CHECKS`` judge it as they judge any workload, and every finding comes
back named by its class ("chat: TTFT p95 612.0 ms > budget 500 ms ..."): one test item, one verdict line per
class, the class's figures in ``res.mix`` (``core.result.mix_parts.MixInfo``).  The checks that judge the run
as a whole (error rate, server, roofline, regression, diagnosis) run on the whole mix as for any workload."""
from __future__ import annotations

import copy
from dataclasses import dataclass

from ..findings import Finding, part_update
from ..result.observed import observed as budget_observed
from ..result.result import METRIC_LABEL, Violation, WorkloadResult, measured
from ..spec.mix_spec import MixClass
from ..spec.mix_workload import class_workload
from ..measure.prefill_overlap import prefill_windows, send_order
from .budgets import check_budgets
from .samples import check_samples, judgeable
from .stalls import check_stalls

CHECK = "mix"
#: what judges one class, in this order
CLASS_CHECKS = (check_samples, check_budgets, check_stalls)
#: the class figures the JSON keeps (ms), failures counted as misses
FIGURES = tuple(f"{m}_{s}" for m in ("ttft", "tpot", "itl", "e2e") for s in ("p50", "p95", "p99"))


@dataclass(frozen=True)
class ClassViolation(Violation):
    """A class's miss: the ordinary message after the class's name."""
    mix_class: str = ""
    text: str = ""           # the class's own violation message

    @property
    def message(self) -> str:
        return f"{self.mix_class}: {self.text}"


def class_result(res: WorkloadResult, c: MixClass, windows: list | None = None) -> WorkloadResult:
    """``res``'s requests of class ``c`` as a measurement of their own (not judged); its streams stall on
    every class's prefills: ``windows``, the whole run's (``core.measure.prefill_overlap``)."""
    records = [r for r in res.records if r.mix_class == c.name]
    failures = [f for f in res.failures if f.mix_class == c.name]
    sub = measured(class_workload(res.workload, c, len(records) + len(failures)), records, failures)
    sub.facts = copy.copy(res.facts)  # one run: its server, cold starts and client are every class's
    sub.facts.prefill_windows = prefill_windows(res.records, res.failures) if windows is None else windows
    sub.facts.request_order = send_order(res.records, res.failures)  # its streams named as in the run's table
    sub.client, sub.measurement, sub.load = res.client, res.measurement, res.load.copy()
    return sub


def check_mix(res: WorkloadResult) -> list[Finding]:
    mix = res.workload.mix
    if mix is None or not judgeable(res):
        return [part_update(CHECK, "mix", classes=[])]
    rows: list[dict] = []
    out: list[Finding] = [part_update(CHECK, "mix", classes=rows)]
    windows = prefill_windows(res.records, res.failures)
    total = len(res.records) + len(res.failures)
    for c in mix.classes:
        sub = class_result(res, c, windows)
        row = _row(c, sub)
        if mix.from_rows:  # a trace's rows name their class: its weight is its share of the requests
            row["weight"] = round(row["requests"] / total, 4) if total else 0.0
        rows.append(row)
        for check in CLASS_CHECKS:
            for f in check(sub):
                out += _named(c.name, f, sub, row)
        if sub.stall:  # the class's streams against every class's long prefills
            row["stall"] = sub.stall.to_json()
        row["status"] = "error" if row["errors"] else "fail" if row["violations"] else "pass"
        row["budgets"] = [_budget_row(sub, b.key, row) for b in c.budgets]
        del row["failed_keys"], row["error_keys"]
    return out


def _named(name: str, f: Finding, sub: WorkloadResult, row: dict) -> list[Finding]:
    """The class's finding as the mix's: named by the class, its figures kept in the class's row."""
    if f.kind == "part":
        getattr(sub, f.data.part).set(**dict(f.data.fields))
        return []
    if f.kind == "violation":
        v = f.data
        cv = ClassViolation(v.budget, v.observed, v.summary, v.verdict, mix_class=name, text=v.message)
        row["violations"].append(v.message)
        row["failed_keys"].append(v.budget.key)
        return [Finding(CHECK, "violation", cv.message, cv)]
    if f.kind in ("error", "failed"):
        row["errors" if f.kind == "error" else "violations"].append(f.text)
        row["error_keys" if f.kind == "error" else "failed_keys"].append(_budget_of(f, sub))
    return [Finding(f.check if f.kind == "failed" else CHECK, f.kind, f"{name}: {f.text}")]


def _budget_of(f: Finding, sub: WorkloadResult) -> str:
    """The budget a class's error or failed-check finding is about (its text starts with the budget's label,
    key or metric: ``TTFT p95: 6 samples ...``, ``goodput 0.625 < budget 0.9``), else ``*``: every budget."""
    for b in sub.workload.budgets:
        label = f"{METRIC_LABEL.get(b.metric, b.metric)} {b.stat}"
        if f.text.startswith((label + ":", b.key + ":")) or (f.kind == "failed" and f.check == b.metric):
            return b.key
    return "*"


def _row(c: MixClass, sub: WorkloadResult) -> dict:
    stats = {}
    for key in FIGURES:
        metric, stat = key.rsplit("_", 1)
        s = sub.summaries.get(metric)
        if s is not None:
            stats[f"{key}_ms"] = round(s.get(stat), 3)
    describe = lambda v: v if isinstance(v, int) else v.describe()  # noqa: E731
    return {"name": c.name, "weight": c.weight, "requests": len(sub.records) + len(sub.failures),
            "completed": len(sub.records), "failed": len(sub.failures), "prompt_tokens": describe(c.prompt_tokens),
            "output_tokens": describe(c.output_tokens), "stats": stats, "violations": [], "errors": [],
            "failed_keys": [], "error_keys": []}


def _budget_row(sub: WorkloadResult, key: str, row: dict) -> dict:
    b = next(b for b in sub.workload.budgets if b.key == key)
    observed = budget_observed(sub, b)  # its stall figures: against every class's long prefills (check_stalls)
    observed = None if observed is None else round(observed, 3)
    verdict = next((v for v in sub.verdicts if v.key == key), None)  # judged at the workload's confidence
    status = "fail" if key in row["failed_keys"] else "error" if {key, "*"} & set(row["error_keys"]) else \
        "inconclusive" if verdict is not None and verdict.status in ("inconclusive", "not_decided") else "pass"
    out = {"key": key, "limit": b.limit, "unit": b.unit, "observed": observed, "status": status}
    if verdict is not None and verdict.method not in ("point", "extreme"):
        out.update(lower=verdict.lower, upper=verdict.upper, confidence=verdict.confidence, method=verdict.method)
    return out
