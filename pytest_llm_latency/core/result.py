"""From request records to a workload result: statistics, violations, verdict.

Short outputs (fewer tokens than the forced length) keep their TTFT/TTFO, which
do not depend on N, but are excluded from TPOT, ITL, E2E and output tok/s, and
counted in the verdict -- never silently averaged in.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import metrics as m
from .errors import EmptySampleError
from .record import RequestRecord
from .stats import Summary, min_samples_for, summarize
from .workload import Budget, Workload

METRIC_LABEL = {"ttft": "TTFT", "ttfo": "TTFO", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E",
                "output_tps": "output tok/s"}


@dataclass(frozen=True)
class Failure:
    kind: str
    message: str


@dataclass(frozen=True)
class Violation:
    budget: Budget
    observed: float
    summary: Summary

    @property
    def message(self) -> str:
        b, s = self.budget, self.summary
        label = f"{METRIC_LABEL[b.metric]} {b.stat}"
        op = "<" if b.is_floor else ">"
        return (f"{label} {self.observed:.1f} {b.unit} {op} budget {b.limit:g} {b.unit} "
                f"(n={s.n}, p50 {s.p50:.1f} {b.unit}, {'min' if b.is_floor else 'max'} "
                f"{(s.min if b.is_floor else s.max):.1f} {b.unit})")


@dataclass
class WorkloadResult:
    workload: Workload
    records: list[RequestRecord] = field(default_factory=list)   # completed requests
    failures: list[Failure] = field(default_factory=list)        # failed requests
    summaries: dict[str, Summary] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)              # why no verdict could be reached
    failed_checks: list[str] = field(default_factory=list)       # other gates that failed (roofline)
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)                     # roofline, server metrics, ...

    @property
    def n(self) -> int:
        return len(self.records)

    @property
    def short_outputs(self) -> int:
        return sum(1 for r in self.records if r.short_output)

    @property
    def failed_requests(self) -> int:
        return len(self.failures)

    @property
    def error_rate(self) -> float:
        """(failed + short) / all requests: a short output did not do what was asked."""
        total = self.n + self.failed_requests
        return (self.failed_requests + self.short_outputs) / total if total else 1.0

    @property
    def verdict(self) -> str:
        if self.errors:
            return "error"
        return "fail" if self.violations or self.failed_checks else "pass"

    # ------------------------------------------------------------------ views
    def __getattr__(self, name: str) -> Summary:
        # result.ttft.p95 etc. (only called for names not found normally)
        summaries = self.__dict__.get("summaries", {})
        if name in summaries:
            return summaries[name]
        if name in METRIC_LABEL:
            raise EmptySampleError(f"no {METRIC_LABEL[name]} values were measured "
                                   f"({'; '.join(self.__dict__.get('errors', [])) or 'empty sample'})")
        raise AttributeError(name)

    def failure_message(self) -> str:
        lines = [v.message for v in self.violations] + self.failed_checks + self.errors
        lines += self.notes
        return "\n".join(lines)


def metric_values(records: list[RequestRecord]) -> dict[str, list[float]]:
    """Per-metric samples over records (short outputs only contribute TTFT/TTFO)."""
    values: dict[str, list[float]] = {k: [] for k in METRIC_LABEL}
    for rec in records:
        scalars = m.per_request(rec)
        keys = ("ttft", "ttfo") if rec.short_output else ("ttft", "ttfo", "tpot", "e2e", "output_tps")
        for k in keys:
            if scalars[k] is not None:
                values[k].append(scalars[k])
        if not rec.short_output:
            values["itl"].extend(m.itl_ms(rec))
    return values


def evaluate(workload: Workload, records: list[RequestRecord], failures: list[Failure]) -> WorkloadResult:
    """Summaries, budget violations and the verdict.  Never a pass on an empty sample."""
    res = WorkloadResult(workload=workload, records=list(records), failures=list(failures))
    for k, vals in metric_values(res.records).items():
        if vals:
            res.summaries[k] = summarize(vals, METRIC_LABEL[k])
    if not res.records:
        kinds = sorted({f.kind for f in failures})
        res.errors.append(f"no successful requests out of {len(failures)}" +
                          (f" ({', '.join(kinds)}): {failures[0].message}" if failures else ": empty sample"))
        return res
    for b in workload.budgets:
        s = res.summaries.get(b.metric)
        if s is None:
            res.errors.append(f"{METRIC_LABEL[b.metric]} {b.stat}: no values to check the budget against "
                              f"(every request was short or produced < 2 tokens)")
            continue
        need = min_samples_for(b.stat)
        if b.metric != "itl" and s.n < need:
            res.errors.append(f"{METRIC_LABEL[b.metric]} {b.stat}: {s.n} samples cannot support a {b.stat} "
                              f"(needs >= {need}); raise samples")
            continue
        observed = s.get(b.stat)
        if (observed < b.limit) if b.is_floor else (observed > b.limit):
            res.violations.append(Violation(b, observed, s))
    short = (f"{res.short_outputs} of {res.n} requests stopped before the forced {workload.output_tokens} output "
             f"tokens (finish_reason {_short_reasons(res.records)}); excluded from TPOT/ITL/E2E -- does the server "
             f"ignore ignore_eos/min_tokens? Allow it with max_error_rate") if res.short_outputs else ""
    if (res.failed_requests or res.short_outputs) and res.error_rate > workload.max_error_rate:
        parts = []
        if res.failed_requests:
            kinds = ", ".join(f"{k} x{c}" for k, c in sorted(failure_kinds(res.failures).items()))
            parts.append(f"{res.failed_requests} of {res.n + res.failed_requests} requests failed ({kinds}): "
                         f"{res.failures[0].message}")
        if short:
            parts.append(short)
        res.errors.append("; ".join(parts) + f" -- error rate {res.error_rate:.1%} > max_error_rate "
                                             f"{workload.max_error_rate:.1%}")
    elif short:
        res.notes.append(short)
    return res


def failure_kinds(failures: list[Failure]) -> dict[str, int]:
    """How many failed requests of each kind (``http_429``, ``reset``...)."""
    out: dict[str, int] = {}
    for f in failures:
        out[f.kind] = out.get(f.kind, 0) + 1
    return out


def _short_reasons(records: list[RequestRecord]) -> str:
    return "/".join(sorted({repr(r.finish_reason) for r in records if r.short_output}))
