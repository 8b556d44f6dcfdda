"""A server sweep's arms as the renderers show them (JSON ``arms``, ``core.result.sweep_parts.ArmsInfo``, typed
as ``entry.ArmRow``): the table's header and cells (the terminal and the HTML page show the same; a mixed
workload's classes as rows under each arm), and the HTML chart of TTFT p95 against ITL p99 per arm, or against
the stall figure a stall budget names (with its budget line; a mix: of the class carrying it), or the stall p99.
Formatting only: the verdicts, the arms meeting every budget and the recommendation are the judging layer's."""
from __future__ import annotations

import re
from typing import Sequence

from .entry import Entry, ResultEntry, entries_of, entry_of

COLUMNS = ("arm", "setting", "requests", "failed", "TTFT p95", "ITL p99", "TPOT p95", "verdict")
#: before the verdict where an arm (or a class in it) measured stalls (its ``stall`` figures)
STALL_COLUMN = "stall p99"
#: a stall budget's key, as the JSON's ``budgets`` (``itl_stall_p99_ms``) or a class's (``itl_stall_p99``) name it
_STALL_KEY = re.compile(r"^(?:itl_stall_(?P<stat>mean|p50|p90|p95|p99)|stall_max)(?:_ms)?$")


def _cell(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _stalls(e: ResultEntry) -> bool:
    return any(a.stall_p99_ms is not None or any(c.stall_p99_ms is not None for c in a.classes) for a in e.arm_rows)


def columns(r: Entry) -> tuple[str, ...]:
    """The arms table's header: ``COLUMNS``, with ``stall p99`` before the verdict where an arm has one."""
    e = entry_of(r)
    return COLUMNS[:-1] + (STALL_COLUMN,) + COLUMNS[-1:] if _stalls(e) else COLUMNS


def _count(v: int | None) -> str:
    return "-" if v is None else str(v)


def arm_rows(r: Entry) -> list[tuple[str, ...]]:
    """One row of cells per arm, under ``columns(r)``; the verdict marks the recommended arm.  A mixed workload's
    arm is followed by a row per class (``  [chat]``): that class's own figures and verdict in the arm, what its
    budgets are judged on (the arm's row pools the classes)."""
    e = entry_of(r)
    stalls = _stalls(e)
    out = []
    for a in e.arm_rows:
        verdict = a.verdict.upper() + (" (recommended)" if a.name == e.arms.recommended else "")
        setting = a.setting if a.is_url or a.setting else "(no extra flags)"
        out.append((a.name, setting, _count(a.requests), _count(a.failed), _cell(a.ttft_p95_ms),
                    _cell(a.itl_p99_ms, 2), _cell(a.tpot_p95_ms, 2))
                   + ((_cell(a.stall_p99_ms, 2),) if stalls else ()) + (verdict,))
        for c in a.classes:
            out.append((f"  [{c.name}]", "", _count(c.requests), _count(c.failed), _cell(c.stat("ttft_p95_ms")),
                        _cell(c.stat("itl_p99_ms"), 2), _cell(c.stat("tpot_p95_ms"), 2))
                       + ((_cell(c.stall_p99_ms, 2),) if stalls else ()) + (c.verdict.upper(),))
    return out


def arm_notes(r: Entry) -> list[str]:
    """Below the table: the recommendation, each arm's first violation (and its classes'), what a mixed
    workload's rows are, and whose figures the test's row shows."""
    e = entry_of(r)
    lines = [e.arms.recommendation] if e.arms.recommendation else []
    for a in e.arm_rows:
        said = [c for c in a.classes if c.why]
        if a.why and not any(a.why.startswith(f"{c.name}: ") for c in said):  # a class's: said on its line
            lines.append(f"{a.name}: {a.why}")
        lines += [f"{a.name} [{c.name}]: {c.why}" for c in said]
    if any(a.classes for a in e.arm_rows):
        lines.append("[class] rows: the class's own figures in that arm, which its budgets are judged on; an arm's "
                     "row pools its classes")
    if e.arms.reported:
        lines.append(f"the test's own figures are arm {e.arms.reported}'s")
    return lines


def _lines(header: Sequence[str], rows: list[tuple[str, ...]], indent: str) -> list[str]:
    widths = [max(len(h), *(len(c[i]) for c in rows)) for i, h in enumerate(header)]
    left = (0, 1, len(header) - 1)

    def fmt(cells: Sequence[str]) -> str:
        return indent + "  ".join(c.ljust(w) if i in left else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(c) for c in rows]


def sweep_lines(results: Sequence[Entry]) -> list[str]:
    """The terminal's server-sweep section: per sweep its arms' table and notes (times in ms)."""
    out: list[str] = []
    for r in entries_of(results):
        rows = arm_rows(r)
        if not rows:
            continue
        mode = ("one managed server, restarted per arm with its flags" if r.arms.mode == "flags"
                else "servers running at once")
        out.append(f"  {r.nodeid}: {len(r.arm_rows)} arms ({mode}), {r.arms.blocks} block(s) of {r.arms.block_size} "
                   f"request(s) per arm:")
        out += _lines(columns(r), rows, "    ")
        out += [f"    {line}" for line in arm_notes(r)]
    return ["server sweep (times in ms; each arm judged on the workload's budgets):"] + out if out else []


def _stall_budget(r: ResultEntry) -> tuple[str | None, str, float] | None:
    """The stall budget the chart draws: ``(None, stat, limit)`` the workload's own, else ``(class, stat, limit)``
    the first class's that has one (a mixed workload); None: no stall budget."""
    for key, limit in r.budgets.items():
        m = _STALL_KEY.match(key)
        if m:
            return None, m.group("stat") or "max", limit
    for a in r.arm_rows:
        for c in a.classes:
            for key, limit in c.budgets.items():
                m = _STALL_KEY.match(key)
                if m:
                    return c.name, m.group("stat") or "max", limit
    return None


def sweep_chart(r: ResultEntry) -> str:
    """TTFT p95 against ITL p99 per arm, or against the stall figure: a stall budget's statistic with its budget
    line (a mixed workload: of the class that carries it, that class's TTFT p95 too), else the stall p99 where
    every arm has one; "" for a result without arms."""
    if not r.arm_rows:
        return ""
    from .charts import ArmPoint, arms_chart  # the HTML page's: the terminal table needs no SVG

    budget = _stall_budget(r)
    if budget is not None and budget[0] is not None:  # a class's stall budget: that class in every arm
        name, stat, limit = budget
        classes = [next((c for c in a.classes if c.name == name), None) for a in r.arm_rows]
        points = [ArmPoint(a.name, c.stat("ttft_p95_ms") if c else None,
                           _figure(c.stall, f"stall_ms_{stat}") if c else None, a.verdict,
                           a.name == r.arms.recommended) for a, c in zip(r.arm_rows, classes)]
        x_budget = next((c.budgets["ttft_p95"] for c in classes if c and "ttft_p95" in c.budgets), None)
        return arms_chart(f"Server sweep: class {name}'s TTFT p95 against its stall {stat} per arm ({name} carries "
                          f"the stall budget)", points, y_label=f"{name} stall {stat} (ms)", x_budget=x_budget,
                          y_budget=limit)
    pooled = " (classes pooled)" if any(a.classes for a in r.arm_rows) else ""
    b = r.budgets
    x_budget = b["ttft_p95_ms"] if "ttft_p95_ms" in b else None
    if budget is not None:  # the workload's own stall budget
        _, stat, limit = budget
        points = [ArmPoint(a.name, a.ttft_p95_ms, _figure(a.stall, f"stall_ms_{stat}"), a.verdict,
                           a.name == r.arms.recommended) for a in r.arm_rows]
        return arms_chart(f"Server sweep: TTFT p95 against stall {stat} per arm{pooled}", points,
                          y_label=f"stall {stat} (ms)", x_budget=x_budget, y_budget=limit)
    use_stall = all(a.stall_p99_ms is not None for a in r.arm_rows)
    points = [ArmPoint(a.name, a.ttft_p95_ms, a.stall_p99_ms if use_stall else a.itl_p99_ms, a.verdict,
                       a.name == r.arms.recommended) for a in r.arm_rows]
    return arms_chart("Server sweep: TTFT p95 against " + ("stall p99" if use_stall else "ITL p99") + " per arm"
                      + pooled, points, y_label="stall p99 (ms)" if use_stall else "ITL p99 (ms)",
                      x_budget=x_budget, y_budget=b["itl_p99_ms"] if "itl_p99_ms" in b and not use_stall else None)


def _figure(figures: dict[str, float], key: str) -> float | None:
    """One stall figure of an arm or class (``None``: not measured)."""
    return figures[key] if key in figures else None
