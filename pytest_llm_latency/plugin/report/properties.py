"""JUnit ``item.user_properties``: one result entry of the run's document
(``report.document.result_entry``) rendered as flat scalars, named as docs/reports.md#junit says.
Nothing here decides or measures anything; it only reads the entry."""
from __future__ import annotations

from typing import Any

from ...core.result.result_parts import PART_NAMES
from .document import JSON_METRICS, STAT_KEYS, metric_key
from .entry import Entry, entry_of

PREFIX = "llm."
_NUMBERED = (("violations", "violation"), ("errors", "error"), ("causes", "cause"), ("notes", "notes"))


def junit_properties(entry: Entry, prefix: str = PREFIX) -> list[tuple[str, Any]]:
    """The flat ``(name, value)`` pairs of one result entry, names under ``prefix``."""
    e = entry_of(entry)
    props: list[tuple[str, Any]] = [(prefix + k, v) for k, v in e.scalars]
    for metric in JSON_METRICS:
        key = metric_key(metric)
        if key in e.stats:
            s = e.stats[key]
            props += [(f"{prefix}{key}.{stat}", float("inf") if s.value(stat) is None else s.value(stat))
                      for stat in STAT_KEYS if stat in s.given]
            props += [(f"{prefix}{key}.{stat}", getattr(s, stat)) for stat in ("n", "censored")]
    props += [(f"{prefix}budget.{k}", v) for k, v in e.budgets.items()]
    for key, bound in e.bounds.items():
        props += [(f"{prefix}bound.{key}.{name}", v) for name, v in bound.items()]
    for list_key, name in _NUMBERED:
        props += [(f"{prefix}{name}.{i}", text) for i, text in enumerate(getattr(e, list_key), 1)]
    props += [(f"{prefix}failures.{k}", v) for k, v in e.failures.items()]
    for part in PART_NAMES:
        for k, v in getattr(e, part).to_json().items():
            if isinstance(v, (int, float, str)):  # bools too, as 0/1
                props.append((f"{prefix}{part}.{k}", int(v) if isinstance(v, bool) else v))
    for row in e.buckets:
        props += [(f"{prefix}by_prompt.{row.key}.{k}", v) for k, v in row.scalars]
    props += [(f"{prefix}disagg.ttft_split.{p.part}_ms", p.ms) for p in e.split]
    props += [(f"{prefix}disagg.kv_transfer_bucket.{k}", v) for k, v in e.disagg.kv_transfer_buckets.items()]
    for c in e.classes:  # a mixed workload's classes: llm.mix.chat.status, llm.mix.chat.ttft_p95_ms, ...
        at = f"{prefix}mix.{c.name}."
        props += [(at + k, v) for k, v in c.scalars] + [(at + k, v) for k, v in c.stats.items()]
        props += [(f"{at}budget.{k}", status) for k, status in c.budgets]
    if e.arm_rows:  # a server sweep: the arms meeting every budget, and each arm's figures
        props.append((f"{prefix}arms.meeting", ", ".join(e.arms.meeting)))
        for arm in e.arm_rows:
            props += [(f"{prefix}arms.{arm.name}.{k}", v) for k, v in arm.scalars]
    return props
