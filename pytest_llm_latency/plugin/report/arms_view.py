"""A server sweep's arms as the renderers show them (JSON ``arms``, ``core.result.sweep_parts.ArmsInfo``):
the table's header and cells (the terminal and the HTML page show the same), and the HTML chart of TTFT
p95 against ITL p99 (or the stall p99, where every arm measured one) per arm.  Formatting only: the
verdicts, the arms meeting every budget and the recommendation are the judging layer's."""
from __future__ import annotations

from typing import Any, Sequence

from .entry import Entry, ResultEntry, entries_of, entry_of, num, text

COLUMNS = ("arm", "setting", "requests", "failed", "TTFT p95", "ITL p99", "TPOT p95", "verdict")
#: before the verdict where an arm measured stalls (its ``stall`` figures)
STALL_COLUMN = "stall p99"


def _cell(v: Any, digits: int = 1) -> str:
    x = num(v)
    return "-" if x is None else f"{x:.{digits}f}"


def stall_p99(row: dict) -> float | None:
    """An arm's stall p99 (ms) from its ``stall`` figures (another module's part: the first ``*p99*`` figure)."""
    stall = row.get("stall")
    if not isinstance(stall, dict):
        return None
    return next((num(v) for k, v in stall.items() if "p99" in str(k) and num(v) is not None), None)


def _setting(row: dict) -> str:
    if text(row.get("url")):
        return str(row["url"])
    return text(row.get("flags")) or "(no extra flags)"


def _stalls(e: ResultEntry) -> bool:
    return any(stall_p99(x) is not None for x in e.arms.arms if isinstance(x, dict))


def columns(r: Entry) -> tuple[str, ...]:
    """The arms table's header: ``COLUMNS``, with ``stall p99`` before the verdict where an arm has one."""
    e = entry_of(r)
    return COLUMNS[:-1] + (STALL_COLUMN,) + COLUMNS[-1:] if _stalls(e) else COLUMNS


def arm_rows(r: Entry) -> list[tuple[str, ...]]:
    """One row of cells per arm, under ``columns(r)``; the verdict marks the recommended arm."""
    e = entry_of(r)
    stalls = _stalls(e)
    out = []
    for row in (x for x in e.arms.arms if isinstance(x, dict)):
        name = str(row.get("name", "?"))
        verdict = str(row.get("verdict", "?")).upper()
        if name == e.arms.recommended:
            verdict += " (recommended)"
        out.append((name, _setting(row), str(row.get("requests", "-")), str(row.get("failed", "-")),
                    _cell(row.get("ttft_p95_ms")), _cell(row.get("itl_p99_ms"), 2), _cell(row.get("tpot_p95_ms"), 2))
                   + ((_cell(stall_p99(row), 2),) if stalls else ()) + (verdict,))
    return out


def arm_notes(r: Entry) -> list[str]:
    """Below the table: the recommendation, each arm's first violation, a mixed workload's class verdicts,
    and whose figures the test's row shows."""
    e = entry_of(r)
    a = e.arms
    lines = [a.recommendation] if a.recommendation else []
    for row in (x for x in a.arms if isinstance(x, dict)):
        if row.get("why"):
            lines.append(f"{row.get('name')}: {row['why']}")
        classes = [c for c in row.get("classes") or () if isinstance(c, dict)]
        if classes:
            lines.append(f"{row.get('name')} per class: " + ", ".join(
                f"{c.get('name')} {str(c.get('verdict', '?')).upper()}" + (f" ({c['why']})" if c.get("why") else "")
                for c in classes))
    if a.reported:
        lines.append(f"the test's own figures are arm {a.reported}'s")
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
    rows = [x for x in r.arms.arms if isinstance(x, dict)]
    if not rows:
        return ""
    from .charts import ArmPoint, arms_chart  # the HTML page's: the terminal table needs no SVG

    stalls = [stall_p99(x) for x in rows]
    use_stall = all(s is not None for s in stalls)
    points = [ArmPoint(str(x.get("name", "?")), num(x.get("ttft_p95_ms")), s if use_stall else num(x.get("itl_p99_ms")),
                       str(x.get("verdict")), str(x.get("name")) == r.arms.recommended)
              for x, s in zip(rows, stalls)]
    return arms_chart("Server sweep: TTFT p95 against " + ("stall p99" if use_stall else "ITL p99") + " per arm",
                      points, y_label="stall p99 (ms)" if use_stall else "ITL p99 (ms)",
                      x_budget=r.budgets.get("ttft_p95_ms"), y_budget=None if use_stall else r.budgets.get("itl_p99_ms"))
