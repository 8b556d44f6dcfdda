"""Flat ``item.user_properties`` for one workload result, and back.

JUnit XML carries them as ``<property name="llm.ttft_ms.p95" value="..."/>``.
The JSON report and the terminal summary are rebuilt from the same flat
properties on the controller, so they also work under pytest-xdist.

A statistic that is a miss (failed requests counted as +inf) is the float
``inf`` here (``"inf"`` in JUnit XML) and ``null`` in JSON, which has no
Infinity; ``censored`` counts the misses in each metric's sample.  Notes are
``llm.notes.<i>`` (1-based), in order.
"""
from __future__ import annotations

import math

from typing import Any, Iterable

from ...core.metrics import METRICS
from ...core.result import WorkloadResult, failure_kinds
from ...core.stats import STATS

PREFIX = "llm."
STAT_KEYS = STATS + ("min", "n", "censored")
JSON_METRICS = METRICS + ("output_tps",)
BOUND_FIELDS = ("status", "estimate", "lower", "upper", "n", "confidence", "method", "would_decide", "stopped_by")


def _unit(metric: str) -> str:
    return "output_tps" if metric == "output_tps" else f"{metric}_ms"


def flatten(res: WorkloadResult, nodeid: str) -> list[tuple[str, Any]]:
    w = res.workload
    props: list[tuple[str, Any]] = [
        ("llm.nodeid", nodeid), ("llm.workload", w.name), ("llm.class", w.klass), ("llm.verdict", res.verdict),
        ("llm.n", res.n), ("llm.short_outputs", res.short_outputs), ("llm.failed_requests", res.failed_requests),
        ("llm.prompt_tokens", w.prompt_tokens), ("llm.output_tokens", w.output_tokens),
        ("llm.concurrency", w.concurrency),
    ]
    for metric in JSON_METRICS:
        s = res.summaries.get(metric)
        if s is None:
            continue
        for stat in STAT_KEYS:
            v = getattr(s, stat)
            props.append((f"llm.{_unit(metric)}.{stat}", v if stat in ("n", "censored") or math.isinf(v)
                          else round(v, 4)))
    for b in w.budgets:
        props.append((f"llm.budget.{b.key}_{'tok_s' if b.is_floor else 'ms'}", b.limit))
    for v in res.verdicts:  # statistical verdicts: llm.bound.<budget>.<field>
        for name in BOUND_FIELDS:
            value = getattr(v, name)
            if value is not None:
                props.append((f"llm.bound.{v.key}.{name}", round(value, 4) if isinstance(value, float)
                              and math.isfinite(value) else value))
    for ab in (w.agent.budgets if w.agent else ()):  # agent sessions (core.agent_spec)
        props.append((f"llm.budget.{ab.key}" if ab.is_floor else f"llm.budget.{ab.key}_ms", ab.limit))
    for i, v in enumerate(res.violations, 1):
        props.append((f"llm.violation.{i}", v.message))
    for i, e in enumerate(res.errors, 1):
        props.append((f"llm.error.{i}", e))
    for i, c in enumerate(res.failed_checks, 1):
        props.append((f"llm.check.{i}", c))
    for i, cause in enumerate(res.causes, 1):
        props.append((f"llm.cause.{i}", cause))
    for i, note in enumerate(res.notes, 1):
        props.append((f"llm.notes.{i}", note))
    for kind, count in sorted(failure_kinds(res.failures).items()):
        props.append((f"llm.failures.{kind}", count))
    for key, value in res.extra.items():
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            props.append((f"llm.{key}", value))
    return props


def unflatten(props: Iterable[tuple[str, Any]]) -> dict | None:
    """Rebuild the JSON result object from flat properties (None if not a latency test)."""
    flat = {k[len(PREFIX):]: v for k, v in props if isinstance(k, str) and k.startswith(PREFIX)}
    if "verdict" not in flat:
        return None
    out: dict[str, Any] = {"nodeid": flat.get("nodeid"), "workload": flat.get("workload"),
                           "class": flat.get("class"), "n": flat.get("n"), "verdict": flat["verdict"]}
    for metric in JSON_METRICS:
        key = _unit(metric)
        stats = {s: _json_number(flat[f"{key}.{s}"]) for s in STAT_KEYS if f"{key}.{s}" in flat}
        out[key] = stats or None
    out["budgets"] = {k[len("budget."):]: v for k, v in flat.items() if k.startswith("budget.")}
    bounds: dict[str, dict] = {}
    for k, v in flat.items():
        if k.startswith("bound.") and k.count(".") == 2:
            _, key, name = k.split(".")
            bounds.setdefault(key, {})[name] = _json_number(v)
    if bounds:
        out["bounds"] = bounds
    out["violations"] = [flat[k] for k in sorted((k for k in flat if k.startswith("violation.")),
                                                 key=lambda k: int(k.split(".")[1]))]
    out["errors"] = [flat[k] for k in sorted((k for k in flat if k.startswith("error.")),
                                             key=lambda k: int(k.split(".")[1]))]
    out["violations"] += [flat[k] for k in sorted((k for k in flat if k.startswith("check.")),
                                                  key=lambda k: int(k.split(".")[1]))]
    out["notes"] = _numbered(flat, "notes.")
    out["causes"] = _numbered(flat, "cause.")
    out["failures"] = {k[len("failures."):]: v for k, v in flat.items() if k.startswith("failures.")}
    out["short_outputs"] = flat.get("short_outputs", 0)
    out["failed_requests"] = flat.get("failed_requests", 0)
    known = {"nodeid", "workload", "class", "n", "verdict", "short_outputs", "failed_requests"}
    out["extra"] = {k: _json_number(v) for k, v in flat.items()
                    if k not in known and "." not in k}
    out["server_metrics"] = {k[len("metrics."):]: _json_number(v) for k, v in flat.items()
                             if k.startswith("metrics.")}
    prefill = {k[len("prefill."):]: _json_number(v) for k, v in flat.items() if k.startswith("prefill.")}
    if prefill:  # the prefill roofline of a prompt_sweep workload (core.prefill.PrefillResult.as_properties)
        out["prefill"] = prefill
    return out


def _numbered(flat: dict, head: str) -> list:
    keys = [k for k in flat if k.startswith(head) and k[len(head):].isdigit()]
    return [flat[k] for k in sorted(keys, key=lambda k: int(k[len(head):]))]


def _json_number(v: Any) -> Any:
    """``inf`` (a miss) becomes None: JSON has no Infinity; ``censored`` says how many."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, str) and v.strip().lower() in ("inf", "+inf", "infinity", "nan"):
        return None
    return v


def split_results(props: Iterable[tuple[str, Any]]) -> list[list[tuple[str, Any]]]:
    """Group a test's properties per result: ``llm.*`` is the first, ``llm.k.*`` the k-th;
    each group comes back with plain ``llm.`` keys for ``unflatten``."""
    groups: dict[int, list[tuple[str, Any]]] = {}
    for key, value in props:
        if not isinstance(key, str) or not key.startswith(PREFIX):
            continue
        head, _, rest = key[len(PREFIX):].partition(".")
        if head.isdigit() and rest:
            groups.setdefault(int(head), []).append((PREFIX + rest, value))
        else:
            groups.setdefault(1, []).append((key, value))
    return [groups[k] for k in sorted(groups)]
