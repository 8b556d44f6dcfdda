"""A server sweep's arms as the renderers show them (JSON ``arms``, ``core.result.sweep_parts.ArmsInfo``, typed
as ``entry.ArmRow``): the table's header and cells (the terminal and the HTML page show the same), and the
HTML chart of TTFT p95 against ITL p99 (or the stall p99, where every arm measured one) per arm.
Formatting only: the verdicts, the arms meeting every budget and the recommendation are the judging layer's."""
from __future__ import annotations

from typing import Sequence

from .entry import Entry, ResultEntry, entries_of, entry_of

COLUMNS = ("arm", "setting", "requests", "failed", "TTFT p95", "ITL p99", "TPOT p95", "verdict")
#: before the verdict where an arm measured stalls (its ``stall`` figures)
STALL_COLUMN = "stall p99"


def _cell(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _stalls(e: ResultEntry) -> bool:
    return any(a.stall_p99_ms is not None for a in e.arm_rows)


def columns(r: Entry) -> tuple[str, ...]:
    """The arms table's header: ``COLUMNS``, with ``stall p99`` before the verdict where an arm has one."""
    e = entry_of(r)
    return COLUMNS[:-1] + (STALL_COLUMN,) + COLUMNS[-1:] if _stalls(e) else COLUMNS


def arm_rows(r: Entry) -> list[tuple[str, ...]]:
    """One row of cells per arm, under ``columns(r)``; the verdict marks the recommended arm."""
    e = entry_of(r)
    stalls = _stalls(e)
    out = []
    for a in e.arm_rows:
        verdict = a.verdict.upper() + (" (recommended)" if a.name == e.arms.recommended else "")
        setting = a.setting if a.is_url or a.setting else "(no extra flags)"
        out.append((a.name, setting, "-" if a.requests is None else str(a.requests),
                    "-" if a.failed is None else str(a.failed), _cell(a.ttft_p95_ms), _cell(a.itl_p99_ms, 2),
                    _cell(a.tpot_p95_ms, 2)) + ((_cell(a.stall_p99_ms, 2),) if stalls else ()) + (verdict,))
    return out


def arm_notes(r: Entry) -> list[str]:
    """Below the table: the recommendation, each arm's first violation, a mixed workload's class verdicts,
    and whose figures the test's row shows."""
    e = entry_of(r)
    lines = [e.arms.recommendation] if e.arms.recommendation else []
    for a in e.arm_rows:
        if a.why:
            lines.append(f"{a.name}: {a.why}")
        if a.classes:
            lines.append(f"{a.name} per class: " + ", ".join(f"{name} {verdict.upper()}" + (f" ({why})" if why else "")
                                                             for name, verdict, why in a.classes))
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
        out.append(f"  {r.nodeid}: {len(rows)} arms ({mode}), {r.arms.blocks} block(s) of {r.arms.block_size} "
                   f"request(s) per arm:")
        out += _lines(columns(r), rows, "    ")
        out += [f"    {line}" for line in arm_notes(r)]
    return ["server sweep (times in ms; each arm judged on the workload's budgets):"] + out if out else []


def sweep_chart(r: ResultEntry) -> str:
    """TTFT p95 against ITL p99 per arm (the stall p99 where every arm has one); "" for a result without arms."""
    if not r.arm_rows:
        return ""
    from .charts import ArmPoint, arms_chart  # the HTML page's: the terminal table needs no SVG

    use_stall = all(a.stall_p99_ms is not None for a in r.arm_rows)
    points = [ArmPoint(a.name, a.ttft_p95_ms, a.stall_p99_ms if use_stall else a.itl_p99_ms, a.verdict,
                       a.name == r.arms.recommended) for a in r.arm_rows]
    b = r.budgets
    return arms_chart("Server sweep: TTFT p95 against " + ("stall p99" if use_stall else "ITL p99") + " per arm",
                      points, y_label="stall p99 (ms)" if use_stall else "ITL p99 (ms)",
                      x_budget=b["ttft_p95_ms"] if "ttft_p95_ms" in b else None,
                      y_budget=b["itl_p99_ms"] if "itl_p99_ms" in b and not use_stall else None)
