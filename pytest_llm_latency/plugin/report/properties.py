"""JUnit ``item.user_properties``: a rendering of one result entry of the run's document
(``report.document.result_entry``) as flat scalars.

JUnit XML carries them as ``<property name="llm.ttft_ms.p95" value="..."/>``: ``llm.<key>`` for
the entry's scalars, ``llm.<metric>.<stat>``, ``llm.budget.<budget>``, ``llm.bound.<budget>.<field>``,
``llm.<part>.<field>`` for the typed parts (``llm.load.throughput_rps``), numbered lists
(``llm.violation.<i>``, ``llm.error.<i>``, ``llm.cause.<i>``, ``llm.notes.<i>``, 1-based) and
``llm.failures.<kind>``; each prompt-length bucket's scalars as ``llm.by_prompt.<bucket key>.<field>``
(``llm.by_prompt.ttft_p95_by_prompt[<1024].estimate_ms``).  A statistic that is a miss (null in
JSON) is ``inf`` here.  Values that are not scalars (the request table, CDF points, per-turn
rows, timelines) stay out of JUnit: they are in the JSON file.  Nothing here decides or measures
anything; it only reads the entry.
"""
from __future__ import annotations

from typing import Any

from ...core.result_parts import PART_NAMES
from .document import JSON_METRICS, metric_key

PREFIX = "llm."
_SCALARS = ("nodeid", "workload", "class", "verdict", "n", "short_outputs", "failed_requests", "prompt_tokens",
            "output_tokens", "concurrency")
_NUMBERED = (("violations", "violation"), ("errors", "error"), ("causes", "cause"), ("notes", "notes"))


def junit_properties(entry: dict[str, Any], prefix: str = PREFIX) -> list[tuple[str, Any]]:
    """The flat ``(name, value)`` pairs of one result entry, names under ``prefix``."""
    props: list[tuple[str, Any]] = [(prefix + k, entry[k]) for k in _SCALARS if entry.get(k) is not None]
    for metric in JSON_METRICS:
        stats = entry.get(metric_key(metric))
        for stat, v in (stats or {}).items():
            props.append((f"{prefix}{metric_key(metric)}.{stat}", float("inf") if v is None else v))
    props += [(f"{prefix}budget.{k}", v) for k, v in (entry.get("budgets") or {}).items()]
    for key, fields in (entry.get("bounds") or {}).items():
        props += [(f"{prefix}bound.{key}.{name}", v) for name, v in fields.items() if v is not None]
    for list_key, name in _NUMBERED:
        props += [(f"{prefix}{name}.{i}", text) for i, text in enumerate(entry.get(list_key) or (), 1)]
    props += [(f"{prefix}failures.{k}", v) for k, v in (entry.get("failures") or {}).items()]
    for part in PART_NAMES:
        for k, v in (entry.get(part) or {}).items():
            if isinstance(v, (int, float, str)):  # bools too, as 0/1
                props.append((f"{prefix}{part}.{k}", int(v) if isinstance(v, bool) else v))
    for row in (entry.get("by_prompt") or {}).get("buckets") or ():
        props += [(f"{prefix}by_prompt.{row['key']}.{k}", v) for k, v in row.items()
                  if k not in ("key", "budget", "bucket") and isinstance(v, (int, float, str))]
    return props
