"""From request records to a workload result: statistics, violations, verdict.

Short outputs (fewer tokens than the forced length) keep their TTFT/TTFO, which
do not depend on N, but are excluded from TPOT, ITL, E2E and output tok/s, and
counted in the verdict -- never silently averaged in.

A failed request is a *miss* in every percentile it would have contributed to
(``stats`` censors it at +inf): TTFT/TTFO keep the measured value when the first
token did arrive, TPOT and E2E are +inf, output tok/s is 0, and ITL keeps the gaps
that were measured plus +inf for every gap the forced output length still owed.
So failures can only make a percentile worse.

The verdict:
  * ``fail``  -- a budget is missed, a gate failed, or *server* failures (timeouts,
    stalls, resets, protocol violations, error events, dropped streams, 5xx, 429 after
    retries, a server that stopped answering mid-run) exceed ``max_error_rate``;
  * ``error`` -- the run could not be judged: bad configuration, nothing answering at
    the start (every request refused), requests the server rejects as malformed (4xx,
    auth, unknown model, context length, wrong content type), no usage reported, short
    outputs beyond ``max_error_rate``, too few samples for a percentile;
  * ``pass``  -- otherwise.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from . import metrics as m
from .coldstart import COLD_BUDGET
from .errors import EmptySampleError, MeasurementError
from .record import RequestRecord
from .result_parts import (AgentSessions, BaselineComparison, ClientHealth, ColdStartInfo, LoadInfo, Measurement,
                           PrefillInfo, PrefixCacheInfo, RooflineInfo, ServerInfo, copy_parts)
from .stats import INF, Summary, fmt_stat, min_samples_for, summarize
from .verdict import BudgetVerdict, SequentialVerdicts, judge
from .workload import Budget, Workload

METRIC_LABEL = {"ttft": "TTFT", "ttfo": "TTFO", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E",
                "output_tps": "output tok/s"}

# The server failed: a fail when over max_error_rate.
SERVER_FAULT_KINDS = frozenset({"idle_timeout", "total_timeout", "reset", "protocol", "stream_error", "no_done",
                                "http_429", "http_408"})
# Nothing answered: an error when it is every request of the run (nothing listening, wrong host),
# a server fault when the server did answer other requests (it went away mid-run).
UNREACHABLE_KINDS = frozenset({"connect", "connect_timeout", "http"})


def is_server_fault(kind: str, server_answered: bool) -> bool:
    """Is a failed request of this kind the server's failure (-> fail), rather than a run
    that cannot be judged (-> error)?  5xx, 429 after retries, timeouts, stalls, resets,
    protocol violations, error events and dropped streams are; 4xx, auth, unknown model,
    context length, content type, no usage, tokenize and target start-up are not."""
    if kind in SERVER_FAULT_KINDS:
        return True
    if kind.startswith("http_") and kind[5:].isdigit() and 500 <= int(kind[5:]) <= 599:
        return True
    return kind in UNREACHABLE_KINDS and server_answered


#: rejected for what was asked, the same way every time: the run stops at the first (``client/load.py``)
REJECTION_KINDS = frozenset({"context_length", "unknown_model", "no_model", "auth", "content_type"})


def is_deterministic_rejection(kind: str) -> bool:
    """A 4xx that every other request of the run would get too (context length, unknown model,
    auth, a 400/404/422...): sending them would only cost time.  Not 408/429 (load)."""
    if kind in REJECTION_KINDS:
        return True
    return kind.startswith("http_") and kind[5:].isdigit() and 400 <= int(kind[5:]) <= 499 \
        and kind not in ("http_408", "http_429")


@dataclass(frozen=True)
class Failure:
    kind: str
    message: str
    ttft_ms: float | None = None          # measured when the first token did arrive
    ttfo_ms: float | None = None
    itl_ms: tuple[float, ...] = ()        # gaps measured before the failure
    # when it happened (clock ns, as RequestRecord), for the report's timeline; None when unknown
    t_send_ns: int | None = None
    t_last_ns: int | None = None          # last token before the failure
    t_end_ns: int | None = None           # the failure was seen

    @classmethod
    def from_error(cls, exc: MeasurementError) -> Failure:
        """From a ``MeasurementError``, keeping what its partial record measured."""
        rec = getattr(exc, "partial", None)
        if rec is None or not isinstance(rec, RequestRecord):
            return cls(exc.kind, exc.message)
        return cls(exc.kind, exc.message, m.ttft_ms(rec), m.ttfo_ms(rec), tuple(m.itl_ms(rec)),
                   t_send_ns=rec.t_send_ns, t_last_ns=rec.t_last_token_ns, t_end_ns=rec.t_end_ns)


@dataclass(frozen=True)
class Violation:
    budget: Budget
    observed: float
    summary: Summary
    verdict: BudgetVerdict | None = None  # a statistical verdict: fail, or inconclusive judged as a fail

    @property
    def message(self) -> str:
        b, s, v = self.budget, self.summary, self.verdict
        label = f"{METRIC_LABEL[b.metric]} {b.stat}"
        op = "<" if b.is_floor else ">"
        n = f"n={s.n}" + (f", {s.censored} failed counted as misses" if s.censored else "")
        if v is not None and v.method not in ("point", "extreme"):
            return verdict_text(v, b) + f" ({n})"
        return (f"{label} {fmt_stat(self.observed)} {b.unit} {op} budget {b.limit:g} {b.unit} "
                f"({n}, p50 {fmt_stat(s.p50)} {b.unit}, {'min' if b.is_floor else 'max'} "
                f"{fmt_stat(s.min if b.is_floor else s.max)} {b.unit})")


#: A workload's verdict (see the module docstring).  A ``Literal`` of plain strings, not an
#: Enum: the verdict crosses xdist workers in JUnit properties (execnet refuses a str subclass)
#: and is written to JSON, JUnit and baselines as it is; mypy still checks every value.
Verdict = Literal["pass", "fail", "error"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)


@dataclass
class WorkloadResult:
    workload: Workload
    records: list[RequestRecord] = field(default_factory=list)   # completed requests
    failures: list[Failure] = field(default_factory=list)        # failed requests
    summaries: dict[str, Summary] = field(default_factory=dict)  # failures counted as misses
    completed: dict[str, Summary] = field(default_factory=dict)  # completed requests only (roofline physics)
    violations: list[Violation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)              # why no verdict could be reached
    failed_checks: list[str] = field(default_factory=list)       # other gates that failed (roofline, error rate)
    notes: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)              # why a budget failed (core.why)
    prepared: bool = True  # False: prompt preparation failed, no sample was sent (``preparation_failed``)
    verdicts: list[BudgetVerdict] = field(default_factory=list)  # per budget, at a confidence (core.verdict)
    sequential: SequentialVerdicts | None = None  # samples: auto: the decisions taken while sampling
    # the typed parts (core.result_parts): JSON objects of the same names
    measurement: Measurement = field(default_factory=Measurement)
    load: LoadInfo = field(default_factory=LoadInfo)
    client: ClientHealth = field(default_factory=ClientHealth)
    server: ServerInfo = field(default_factory=ServerInfo)
    prefix_cache: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)
    cold_start: ColdStartInfo = field(default_factory=ColdStartInfo)
    roofline: RooflineInfo = field(default_factory=RooflineInfo)
    prefill: PrefillInfo = field(default_factory=PrefillInfo)
    baseline: BaselineComparison = field(default_factory=BaselineComparison)
    agent: AgentSessions = field(default_factory=AgentSessions)

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
    def verdict(self) -> Verdict:
        if self.errors:
            return "error"
        return "fail" if self.violations or self.failed_checks else "pass"

    # ------------------------------------------------------------------ views
    # result.ttft.p95 etc.: ms (output_tps: tokens/s), failures counted as misses.  A metric
    # with no values raises EmptySampleError naming why, never a statistic of nothing.
    def metric(self, name: str) -> Summary:
        """The summary of metric ``name`` (a key of ``METRIC_LABEL``)."""
        s = self.summaries.get(name)
        if s is not None:
            return s
        if name not in METRIC_LABEL:
            raise KeyError(f"unknown metric {name!r}: one of {', '.join(METRIC_LABEL)}")
        why = self.errors + self.failed_checks
        raise EmptySampleError(f"no {METRIC_LABEL[name]} values were measured ({'; '.join(why) or 'empty sample'})")

    @property
    def ttft(self) -> Summary:
        """TTFT (ms; ``core.metrics.ttft_ms``)."""
        return self.metric("ttft")

    @property
    def ttfo(self) -> Summary:
        """TTFO (ms; ``core.metrics.ttfo_ms``)."""
        return self.metric("ttfo")

    @property
    def tpot(self) -> Summary:
        """TPOT (ms; ``core.metrics.tpot_ms``)."""
        return self.metric("tpot")

    @property
    def itl(self) -> Summary:
        """ITL, every gap of every request (ms; ``core.metrics.itl_ms``)."""
        return self.metric("itl")

    @property
    def e2e(self) -> Summary:
        """E2E (ms; ``core.metrics.e2e_ms``)."""
        return self.metric("e2e")

    @property
    def output_tps(self) -> Summary:
        """Output tok/s of a request (``core.metrics.output_tps``)."""
        return self.metric("output_tps")

    def failure_message(self) -> str:
        lines = [v.message for v in self.violations] + self.failed_checks + self.causes + self.errors
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def metric_values(records: Sequence[RequestRecord], failures: Sequence[Failure] = (),
                  output_tokens: int | None = None) -> dict[str, list[float]]:
    """Per-metric samples: completed records (short outputs only contribute TTFT/TTFO) and
    failed requests as misses (+inf; 0 for output tok/s), see the module docstring."""
    values: dict[str, list[float]] = {k: [] for k in METRIC_LABEL}
    for rec in records:
        scalars = m.per_request(rec)
        keys = ("ttft", "ttfo") if rec.short_output else ("ttft", "ttfo", "tpot", "e2e", "output_tps")
        for k in keys:
            v = scalars[k]
            if v is not None:
                values[k].append(v)
        if not rec.short_output:
            values["itl"].extend(m.itl_ms(rec))
    for f in failures:
        values["ttft"].append(INF if f.ttft_ms is None else f.ttft_ms)
        values["ttfo"].append(INF if f.ttfo_ms is None else f.ttfo_ms)
        values["tpot"].append(INF)
        values["e2e"].append(INF)
        values["output_tps"].append(0.0)
        owed = (output_tokens - 1 - len(f.itl_ms)) if output_tokens is not None else 1
        values["itl"].extend(list(f.itl_ms) + [INF] * max(owed, 0))
    return values


def _summaries(values: dict[str, list[float]], misses: int) -> dict[str, Summary]:
    return {k: summarize(v, METRIC_LABEL[k], censored=misses if k == "output_tps" else 0)
            for k, v in values.items() if v}


def evaluate(workload: Workload, records: list[RequestRecord], failures: list[Failure], *,
             server_failed: bool = False, sequential: SequentialVerdicts | None = None) -> WorkloadResult:
    """Summaries, budget violations and the verdict.  Never a pass on an empty sample.

    ``server_failed``: the server is known to have failed during the run (a managed
    server died), so requests it refused count as server faults even if none got through.
    ``sequential``: the decisions ``samples: auto`` took while sampling (kept as they were)."""
    res = WorkloadResult(workload=workload, records=list(records), failures=list(failures), sequential=sequential)
    values = metric_values(res.records, res.failures, workload.output_tokens)
    res.summaries = _summaries(values, len(failures))
    res.completed = _summaries(metric_values(res.records, [], workload.output_tokens), 0)
    total = res.n + res.failed_requests
    answered = server_failed or bool(res.records) or any(f.kind not in UNREACHABLE_KINDS for f in failures)
    faults = [f for f in failures if is_server_fault(f.kind, answered)]
    others = [f for f in failures if not is_server_fault(f.kind, answered)]
    if not total:
        res.errors.append("no successful requests out of 0: empty sample")
        return res
    if not res.records and not faults:
        kinds = sorted({f.kind for f in failures})
        why = "" if answered else " -- nothing answered at the start: is the server running and the URL right?"
        res.errors.append(f"no successful requests out of {len(failures)} ({', '.join(kinds)}): "
                          f"{failures[0].message}{why}")
        res.summaries.clear()  # nothing was measured: result.ttft raises, never an all-miss statistic
        return res
    for b in workload.budgets:
        if b.key == COLD_BUDGET:
            continue  # one request after an unload, judged by the runner (core.coldstart), not the samples
        if b.is_fraction:
            _judge_fraction(res, workload, b)
            continue
        s = res.summaries.get(b.metric)
        if s is None:
            res.errors.append(f"{METRIC_LABEL[b.metric]} {b.stat}: no values to check the budget against "
                              f"(every request was short or produced < 2 tokens)")
            continue
        if workload.confidence is not None:
            _judge_statistically(res, b, values[b.metric], s)
            continue
        need = min_samples_for(b.stat)
        if b.metric != "itl" and s.n < need:
            res.errors.append(f"{METRIC_LABEL[b.metric]} {b.stat}: {s.n} samples cannot support a {b.stat} "
                              f"(needs >= {need}); raise samples")
            continue
        observed = s.get(b.stat)
        if (observed < b.limit) if b.is_floor else (observed > b.limit):
            res.violations.append(Violation(b, observed, s))
    _judge_error_rate(res, workload, faults, others, total)
    return res


def _judge_fraction(res: WorkloadResult, workload: Workload, b: Budget) -> None:
    """``goodput_min`` / ``fluidity_min``: a floor on a fraction of the run (``core.goodput``)."""
    from .goodput import fluidity, goodput

    if b.metric == "goodput":
        g = goodput(res.records, len(res.failures), workload.budgets, 1.0)
        observed = None if g is None else g.fraction
        how = "" if g is None else f" ({g.good} of {g.total} requests met every per-request budget)"
    else:
        observed = fluidity(res.records, res.failures, workload)
        how = " (mean over requests of the tokens that met their deadline)"
    if observed is None:
        res.errors.append(f"{b.metric}: no requests to compute it from")
        return
    res.load.set(**{"goodput_fraction" if b.metric == "goodput" else "fluidity_index": round(observed, 4)})
    if observed < b.limit:
        res.failed_checks.append(f"{b.metric} {observed:.3f} < budget {b.limit:g}{how}")


def _judge_statistically(res: WorkloadResult, b: Budget, vals: list[float], s: Summary) -> None:
    w = res.workload
    if res.sequential is not None:
        v = res.sequential.final(b, vals)
    else:
        v = judge(b.key, b.metric, b.stat, b.limit, b.is_floor, vals, w.confidence)
    res.verdicts.append(v)
    if v.status == "fail" or (v.status == "inconclusive" and w.inconclusive == "fail"):
        res.violations.append(Violation(b, v.estimate, s, v))
    elif (v.status == "inconclusive" and w.inconclusive == "warn") or v.status == "not_decided":
        res.notes.append(verdict_text(v, b))  # not_decided: another budget failed first; never a violation


def verdict_text(v: BudgetVerdict, b: Budget) -> str:
    """``TTFT p95 612.0 ms (95% bounds 540.0..701.0 ms) > budget 500 ms``, or the inconclusive form."""
    label = f"{METRIC_LABEL[b.metric]} {b.stat} {fmt_stat(v.estimate)} {b.unit}{v.interval(b.unit)}"
    at = f"at {v.n} samples"
    if v.status == "not_decided":
        metric, _, stat = (v.stopped_by or "").rpartition("_")
        return (f"{label} -- not decided: sampling stopped when {METRIC_LABEL.get(metric, metric)} {stat} failed "
                f"{at} (budget {b.limit:g} {b.unit})")
    if v.status == "inconclusive":
        more = f"~{v.would_decide} samples would decide" if v.would_decide else "no practical sample size would decide"
        return f"{label} -- inconclusive {at} (budget {b.limit:g} {b.unit}); {more}"
    op = {("pass", False): "<=", ("fail", False): ">", ("pass", True): ">=", ("fail", True): "<"}[v.status, b.is_floor]
    return f"{label} {op} budget {b.limit:g} {b.unit}: {v.status} {at}"


def rejudge(res: WorkloadResult, workload: Workload | None = None, *, server_failed: bool = False) -> WorkloadResult:
    """Judge ``res``'s requests again (other budgets, or knowing the server failed), keeping
    what was added after ``evaluate`` (notes, typed parts, gate results, preparation errors).
    The causes of failed budgets are the caller's to add again (``core.why.explain``).
    A result whose preparation failed has no samples to apply budgets to: only its failure
    is judged again."""
    if not res.prepared:
        judged = preparation_failed(workload or res.workload, res.failures[0], server_answered=server_failed)
        judged.notes = list(res.notes)
        copy_parts(res, judged)
        return judged
    base = evaluate(res.workload, res.records, res.failures, sequential=res.sequential)
    judged = evaluate(workload or res.workload, res.records, res.failures, server_failed=server_failed,
                      sequential=res.sequential if workload is None else None)
    copy_parts(res, judged)
    judged.notes[:0] = [n for n in res.notes if n not in base.notes and n not in judged.notes]
    judged.errors.extend(e for e in res.errors if e not in base.errors and e not in judged.errors)
    judged.failed_checks.extend(c for c in res.failed_checks if c not in base.failed_checks)
    return judged


def preparation_failed(workload: Workload, failure: Failure, *, server_answered: bool = False) -> WorkloadResult:
    """A tokenize/probe request failed before any sample: a fail when the server failed (it
    would fail the samples the same way: the verdict must not depend on which request met
    the fault first), an error when nothing answered or the request was rejected as wrong.
    ``server_answered``: the server was up before (a managed server that died)."""
    res = WorkloadResult(workload=workload, failures=[failure], prepared=False)
    text = (f"could not prepare the run (a request before the first sample failed: model check, tokenize or "
            f"probe; {failure.kind}): {failure.message}")
    if is_server_fault(failure.kind, server_answered=server_answered):
        res.failed_checks.append(f"server failed before any sample: {text}")
    else:
        res.errors.append(text)
    return res


def _failed_text(failures: list[Failure], total: int) -> str:
    kinds = ", ".join(f"{k} x{c}" for k, c in sorted(failure_kinds(failures).items()))
    return f"{len(failures)} of {total} requests failed ({kinds}): {failures[0].message}"


def _judge_error_rate(res: WorkloadResult, workload: Workload, faults: list[Failure], others: list[Failure],
                      total: int) -> None:
    limit = workload.max_error_rate
    short = (f"{res.short_outputs} of {res.n} requests stopped before the forced {workload.output_tokens} output "
             f"tokens (finish_reason {_short_reasons(res.records)}); excluded from TPOT/ITL/E2E -- does the server "
             f"ignore ignore_eos/min_tokens? Allow it with max_error_rate") if res.short_outputs else ""
    fault_rate = len(faults) / total
    rate = f"error rate {res.error_rate:.1%} > max_error_rate {limit:.1%}"
    if faults and fault_rate > limit:
        parts = [f"server failed: {_failed_text(faults, total)}"]
        if others:
            parts.append(f"also {_failed_text(others, total)}")
        if short:
            parts.append(short)
        res.failed_checks.append("; ".join(parts) + f" -- server error rate {fault_rate:.1%} > max_error_rate "
                                                    f"{limit:.1%}")
    elif (res.failed_requests or res.short_outputs) and res.error_rate > limit:
        parts = []
        if res.failures:
            parts.append(_failed_text(res.failures, total))
        if short:
            parts.append(short)
        res.errors.append("; ".join(parts) + f" -- {rate}")
    else:
        if res.failures:
            res.notes.append(f"{_failed_text(res.failures, total)} -- allowed by max_error_rate {limit:.1%}; "
                             f"counted as misses (+inf) in the percentiles")
        if short:
            res.notes.append(short)


def failure_kinds(failures: list[Failure]) -> dict[str, int]:
    """How many failed requests of each kind (``http_429``, ``reset``...)."""
    out: dict[str, int] = {}
    for f in failures:
        out[f.kind] = out.get(f.kind, 0) + 1
    return out


def _short_reasons(records: list[RequestRecord]) -> str:
    return "/".join(sorted({repr(r.finish_reason) for r in records if r.short_output}))
