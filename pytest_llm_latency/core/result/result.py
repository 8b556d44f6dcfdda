"""From request records to a workload result: the measurement (``measured``: records, failures,
statistics, ``facts``) and the views of its judgement (``violations``, ``errors``,
``failed_checks``, ``causes``: filled by ``core.checks.judge`` only; ``verdict`` is
``core.findings.verdict_of`` its findings).

Short outputs keep their TTFT/TTFO but are left out of TPOT, ITL, E2E and output tok/s, and
counted in the verdict; a failed request is a miss (+inf) in every percentile it would have
contributed to: docs/concepts.md#failed-requests-are-misses-never-left-out.  What makes a
``fail`` and an ``error`` (decided by ``core/checks``): docs/verdicts.md#pass-fail-error.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..measure import metrics as m
from ..errors import EmptySampleError, MeasurementError
from .facts import Facts
from ..findings import VERDICTS, Verdict  # noqa: F401  (re-exported: pytest_llm_latency.Verdict)
from ..measure.record import RequestRecord, TraceTag
from .result_parts import WithParts
from ..measure.stats import INF, Summary, fmt_stat, summarize
from ..measure.verdict import BudgetVerdict, SequentialVerdicts
from ..spec.workload import Budget, Workload

METRIC_LABEL = {"ttft": "TTFT", "ttfo": "TTFO", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E",
                "output_tps": "output tok/s", "reasoning_tokens": "reasoning tokens"}

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
    return (kind in SERVER_FAULT_KINDS or 500 <= _http_status(kind) <= 599
            or (kind in UNREACHABLE_KINDS and server_answered))


def _http_status(kind: str) -> int:
    """``http_503`` -> 503; 0 for any other kind."""
    return int(kind[5:]) if kind.startswith("http_") and kind[5:].isdigit() else 0


#: rejected for what was asked, the same way every time: the run stops at the first (``client/load/engine.py``)
REJECTION_KINDS = frozenset({"context_length", "unknown_model", "no_model", "auth", "content_type"})


def is_deterministic_rejection(kind: str) -> bool:
    """A 4xx that every other request of the run would get too (context length, unknown model,
    auth, a 400/404/422...): sending them would only cost time.  Not 408/429 (load)."""
    return kind in REJECTION_KINDS or (400 <= _http_status(kind) <= 499 and kind not in ("http_408", "http_429"))


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
    trace: TraceTag | None = None         # trace replay: the row it replayed
    prompt_tokens: int | None = None      # its prompt length (server count, else planned), when known
    # the worker process that sent it, "pid@host" (client/placement/processes/workers.py)
    worker: str | None = None
    structured: str | None = None         # its role in a structured workload (RequestRecord.structured)
    mix_class: str | None = None          # its class in a mixed workload (RequestRecord.mix_class)

    @classmethod
    def from_error(cls, exc: MeasurementError) -> Failure:
        """From a ``MeasurementError``, keeping what its partial record measured."""
        rec = getattr(exc, "partial", None)
        if rec is None or not isinstance(rec, RequestRecord):
            return cls(exc.kind, exc.message)
        return cls(exc.kind, exc.message, m.ttft_ms(rec), m.ttfo_ms(rec), tuple(m.itl_ms(rec)),
                   t_send_ns=rec.t_send_ns, t_last_ns=rec.t_last_token_ns, t_end_ns=rec.t_end_ns,
                   prompt_tokens=rec.prompt_tokens if rec.prompt_tokens is not None else rec.expected_prompt_tokens)


@dataclass(frozen=True)
class Violation:
    budget: Budget
    observed: float
    summary: Summary
    verdict: BudgetVerdict | None = None  # a statistical verdict: fail, or inconclusive judged as a fail

    @property
    def message(self) -> str:
        b, s, v = self.budget, self.summary, self.verdict
        n = f"n={s.n}" + (f", {s.censored} failed counted as misses" if s.censored else "")
        if v is not None and v.method not in ("point", "extreme"):
            return verdict_text(v, b) + f" ({n})"
        op = "<" if b.is_floor else ">"
        return (f"{METRIC_LABEL[b.metric]} {b.stat} {fmt_stat(self.observed)} {b.unit} {op} budget {b.limit:g} "
                f"{b.unit} ({n}, p50 {fmt_stat(s.p50)} {b.unit}, {'min' if b.is_floor else 'max'} "
                f"{fmt_stat(s.min if b.is_floor else s.max)} {b.unit})")


@dataclass
class WorkloadResult(WithParts):
    workload: Workload
    records: list[RequestRecord] = field(default_factory=list)   # completed requests
    failures: list[Failure] = field(default_factory=list)        # failed requests
    summaries: dict[str, Summary] = field(default_factory=dict)  # failures counted as misses
    completed: dict[str, Summary] = field(default_factory=dict)  # completed requests only (roofline physics)
    # views of the findings, filled only by core.checks.judge
    violations: list[Violation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)              # why no verdict could be reached
    failed_checks: list[str] = field(default_factory=list)       # other gates that failed (roofline, error rate)
    notes: list[str] = field(default_factory=list)                # the measurement's (``shown_notes``: + the checks')
    causes: list[str] = field(default_factory=list)              # why a budget failed (core.result.why)
    prepared: bool = True  # False: prompt preparation failed, no sample was sent (``preparation_failed``)
    verdicts: list[BudgetVerdict] = field(default_factory=list)  # per budget, at a confidence (core.measure.verdict)
    sequential: SequentialVerdicts | None = None  # samples: auto: the decisions taken while sampling
    facts: Facts = field(default_factory=Facts)   # what the checks decide on, besides the samples
    findings: list | None = None  # core.findings.Finding, set by core.checks.judge (None: not judged yet)

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
        """``core.checks.verdict_of`` the findings; a result must be judged first (never a pass unjudged)."""
        if self.findings is None:
            raise RuntimeError(f"workload {self.workload.name!r}: the result has not been judged yet "
                               f"(call pytest_llm_latency.core.checks.judge on the measurement)")
        from ..findings import verdict_of

        return verdict_of(self.findings)

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
        """TTFT (ms; ``core.measure.metrics.ttft_ms``)."""
        return self.metric("ttft")

    @property
    def ttfo(self) -> Summary:
        """TTFO (ms; ``core.measure.metrics.ttfo_ms``)."""
        return self.metric("ttfo")

    @property
    def tpot(self) -> Summary:
        """TPOT (ms; ``core.measure.metrics.tpot_ms``)."""
        return self.metric("tpot")

    @property
    def itl(self) -> Summary:
        """ITL, every gap of every request (ms; ``core.measure.metrics.itl_ms``)."""
        return self.metric("itl")

    @property
    def e2e(self) -> Summary:
        """E2E (ms; ``core.measure.metrics.e2e_ms``)."""
        return self.metric("e2e")

    @property
    def output_tps(self) -> Summary:
        """Output tok/s of a request (``core.measure.metrics.output_tps``)."""
        return self.metric("output_tps")

    @property
    def reasoning_tokens(self) -> Summary:
        """Reasoning tokens of a request, a count (``core.measure.metrics.reasoning_tokens``)."""
        return self.metric("reasoning_tokens")

    @property
    def shown_notes(self) -> list[str]:
        """The notes a user sees: the measurement's (``notes``), then the checks' (their findings of
        kind ``note``, in check order; kept apart so that judging again never edits ``notes``)."""
        mine = list(self.notes)
        return mine + [f.text for f in self.findings or () if f.kind == "note" and f.text not in mine]

    def failure_message(self) -> str:
        lines = [v.message for v in self.violations] + self.failed_checks + self.causes + self.errors
        lines += [f"note: {n}" for n in self.shown_notes]
        return "\n".join(lines)


def metric_values(records: Sequence[RequestRecord], failures: Sequence[Failure] = (),
                  output_tokens: int | None = None) -> dict[str, list[float]]:
    """Per-metric samples: completed records (short outputs only contribute TTFT/TTFO and their
    reasoning tokens) and failed requests as misses (+inf; 0 for output tok/s), see the module docstring."""
    values: dict[str, list[float]] = {k: [] for k in METRIC_LABEL}
    for rec in records:
        scalars = m.per_request(rec)
        for k in ("ttft", "ttfo", "reasoning_tokens") if rec.short_output else \
                ("ttft", "ttfo", "tpot", "e2e", "output_tps", "reasoning_tokens"):
            if (v := scalars[k]) is not None:
                values[k].append(v)
            elif k == "reasoning_tokens":  # it reasoned, but how much cannot be known: a miss, never a pass
                values[k].append(INF)
        if not rec.short_output:
            values["itl"].extend(m.itl_ms(rec))
    for f in failures:
        for k, v in (("ttft", f.ttft_ms), ("ttfo", f.ttfo_ms), ("tpot", None), ("e2e", None),
                     ("reasoning_tokens", None)):
            values[k].append(INF if v is None else v)
        values["output_tps"].append(0.0)
        owed = (output_tokens - 1 - len(f.itl_ms)) if output_tokens is not None else 1
        values["itl"].extend(list(f.itl_ms) + [INF] * max(owed, 0))
    return values


def _summaries(values: dict[str, list[float]], misses: int) -> dict[str, Summary]:
    return {k: summarize(v, METRIC_LABEL[k], censored=misses if k == "output_tps" else 0)
            for k, v in values.items() if v}


def measured(workload: Workload, records: list[RequestRecord], failures: list[Failure], *,
             sequential: SequentialVerdicts | None = None) -> WorkloadResult:
    """A measurement, not yet judged (``core.checks.judge``): the records, the failures and their
    statistics (failures counted as misses; ``completed``: completed requests only)."""
    res = WorkloadResult(workload=workload, records=list(records), failures=list(failures), sequential=sequential)
    res.summaries = miss_summaries(res)
    res.completed = _summaries(metric_values(res.records, [], workload.output_tokens), 0)
    return res


def miss_summaries(res: WorkloadResult) -> dict[str, Summary]:
    """Per-metric statistics of ``res``'s samples, failures counted as misses."""
    values = metric_values(res.records, res.failures, res.workload.output_tokens)
    return _summaries(values, len(res.failures))


def unprepared(workload: Workload, failure: Failure) -> WorkloadResult:
    """A tokenize/probe request failed before any sample (``prepared`` False).  Judged
    (``core.checks.samples``) a fail when the server failed (it would fail the samples the same
    way: the verdict must not depend on which request met the fault first), an error when nothing
    answered or the request was rejected as wrong."""
    return WorkloadResult(workload=workload, failures=[failure], prepared=False)


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


def failed_text(failures: list[Failure], total: int) -> str:
    kinds = ", ".join(f"{k} x{c}" for k, c in sorted(failure_kinds(failures).items()))
    return f"{len(failures)} of {total} requests failed ({kinds}): {failures[0].message}"


def failure_kinds(failures: list[Failure]) -> dict[str, int]:
    """How many failed requests of each kind (``http_429``, ``reset``...)."""
    return dict(Counter(f.kind for f in failures))


def short_reasons(records: list[RequestRecord]) -> str:
    return "/".join(sorted({repr(r.finish_reason) for r in records if r.short_output}))


def sent_by(outcome: "RequestRecord | Failure", worker: str) -> "RequestRecord | Failure":
    """``outcome`` naming the worker process (or Ray node) that sent it (``pid@host``); a ``Failure``
    is frozen: a copy."""
    if isinstance(outcome, Failure):
        return replace(outcome, worker=worker)
    outcome.worker = worker
    return outcome
