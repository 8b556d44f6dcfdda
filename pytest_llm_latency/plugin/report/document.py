"""The result document of a run: one JSON object per latency result, built once from the typed
``WorkloadResult`` (``result_entry``), and the run around them (``ResultDocument``).  Every report
renders it (docs/reports.md); under pytest-xdist an entry crosses to the controller as this JSON value
on the test report, never rebuilt from flat properties.  Shape: ``data/results.schema.json`` (version
``VERSION``; docs/result-json.md: what moved); a statistic that is a miss (+inf) is null, ``censored`` counts them."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...core.measure.metrics import COUNT_METRICS, METRICS
from ...core.result.result import WorkloadResult, failure_kinds
from ...core.result.result_parts import PART_NAMES
from ...core.measure.stats import STATS
from .entry import ResultEntry, entries_of

#: the results document's format version (1: up to 0.x with ``extra``; 2: typed parts)
VERSION = 3
STAT_KEYS = STATS + ("min", "n", "censored")
JSON_METRICS = METRICS + ("output_tps",) + COUNT_METRICS
BOUND_FIELDS = ("status", "estimate", "lower", "upper", "n", "confidence", "method", "would_decide", "stopped_by")


def metric_key(metric: str) -> str:
    """``ttft`` -> ``ttft_ms`` (``output_tps`` and the counts, ``reasoning_tokens``, keep their names)."""
    return metric if metric == "output_tps" or metric in COUNT_METRICS else f"{metric}_ms"


def number(v: Any) -> Any:
    """A float rounded to 4 places; +inf/nan (a miss) None."""
    if isinstance(v, float):
        return round(v, 4) if math.isfinite(v) else None
    return v


def result_entry(res: WorkloadResult, nodeid: str, *, detail: bool = False, settings=None) -> dict[str, Any]:
    """The JSON object of one result.  ``detail``: with every request and the CDF points (the
    JSON file, the HTML page and baselines ask for them; JUnit never shows them)."""
    w = res.workload
    out: dict[str, Any] = {"nodeid": nodeid, "workload": w.name, "class": w.klass, "verdict": res.verdict,
                           "n": res.n, "short_outputs": res.short_outputs, "failed_requests": res.failed_requests,
                           "prompt_tokens": w.prompt_tokens, "output_tokens": w.output_tokens,
                           "concurrency": w.concurrency}
    for metric in JSON_METRICS:
        s = res.summaries.get(metric)
        if metric in COUNT_METRICS and not (res.measurement.reasoning_requests or any(b.metric == metric
                                                                                        for b in w.budgets)):
            continue  # a model that did not reason, without a budget on it, adds no key
        out[metric_key(metric)] = None if s is None else {k: number(getattr(s, k)) for k in STAT_KEYS}
    budgets = {b.key if b.is_acceptance or b.is_count else f"{b.key}_{'tok_s' if b.is_floor else 'ms'}": b.limit
               for b in w.budgets}
    budgets.update({b.key if b.is_floor else f"{b.key}_ms": b.limit for b in (w.agent.budgets if w.agent else ())})
    budgets.update({f"{pb.bucket_key(b)}_ms": b.limit for pb in w.prompt_budgets for b in pb.buckets})
    out["budgets"] = budgets
    bounds = {v.key: {f: number(getattr(v, f)) for f in BOUND_FIELDS if getattr(v, f) is not None}
              for v in res.verdicts}
    if bounds:
        out["bounds"] = bounds
    out.update(violations=[v.message for v in res.violations] + list(res.failed_checks), errors=list(res.errors),
               notes=res.shown_notes, causes=list(res.causes), findings=findings(res),
               failures=dict(sorted(failure_kinds(res.failures).items())))
    for name in PART_NAMES:
        part = getattr(res, name).to_json()
        if part:
            out[name] = part
    if detail:
        from ..baseline import detail_fields
        from .detail import detail as requests_and_cdf

        out.update(requests_and_cdf(res))
        if settings is not None:
            out.update(detail_fields(res, settings))
    return out


#: the order the renderers say a result's findings in (a failed check is said with the violations)
SAID_ORDER = {"violation": 0, "failed": 0, "cause": 1, "error": 2, "note": 3}


def findings(res: WorkloadResult) -> list[dict[str, str]]:
    """What the checks said, each with its check's name (``core.checks``), in ``SAID_ORDER``: the
    lists ``violations``, ``causes``, ``errors`` and ``notes`` say the same texts without their checks.
    The measurement's own notes are the check ``measurement``'s."""
    said = [("measurement", "note", t) for t in res.notes]
    said += [(f.check, f.kind, f.data.message if f.kind == "violation" else f.text) for f in res.findings or ()
             if f.kind in SAID_ORDER and not (f.kind == "note" and f.text in res.notes)]
    said.sort(key=lambda f: SAID_ORDER[f[1]])
    return [{"check": c, "kind": k, "text": t} for c, k, t in said]


@dataclass
class ResultDocument:
    """One per run: where it ran and every latency result (entries of ``result_entry``)."""
    plugin_version: str
    target: dict[str, Any]
    seed: Any = None
    nonce: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "plugin_version": self.plugin_version, "target": dict(self.target),
                "seed": self.seed, "nonce": self.nonce, "results": list(self.results)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ResultDocument":
        """Back from ``to_json`` (a version-3 document; an older one is refused, naming it)."""
        if data.get("version") != VERSION:
            raise ValueError(f"results JSON version {data.get('version')!r} is not {VERSION}: read it with the "
                             f"plugin that wrote it (docs/result-json.md says what moved in versions 2 and 3)")
        unknown = sorted(set(data) - {"version", "plugin_version", "target", "seed", "nonce", "results"})
        if unknown:
            raise ValueError(f"results JSON: unknown key(s) {', '.join(unknown)}")
        return cls(plugin_version=data.get("plugin_version", ""), target=dict(data.get("target") or {}),
                   seed=data.get("seed"), nonce=data.get("nonce"), results=list(data.get("results") or []))

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "ResultDocument":
        """A results document as the renderers take it: any version, a malformed field left out
        (``report.entry``); ``from_json`` is the strict reading."""
        target = data.get("target")
        return cls(plugin_version=str(data.get("plugin_version") or ""),
                   target=dict(target) if isinstance(target, dict) else {}, seed=data.get("seed"),
                   nonce=data.get("nonce"), results=[r for r in data.get("results") or [] if isinstance(r, dict)])

    def entries(self) -> list[ResultEntry]:
        """The results typed, as the renderers read them (``report.entry``)."""
        return entries_of(self.results)
