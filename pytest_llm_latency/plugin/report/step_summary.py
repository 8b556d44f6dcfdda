"""GitHub Actions step summary: when ``$GITHUB_STEP_SUMMARY`` names a file, append a Markdown
table of every latency test (docs/reports.md#ci-step-summary): appended, never overwritten, and
atomically (``files.atomic``), so a crash leaves either the old summary or the new one."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from ...core.measure.compare import md_table
from ...files.atomic import write_atomic
from .entry import Entry, ResultEntry, entries_of

ENV = "GITHUB_STEP_SUMMARY"
HEADER = ("test", "workload", "verdict", "n", "TTFT p95 ms", "TPOT p50 ms", "E2E p95 ms", "vs baseline",
          "regressions / violations", "notes")
VERDICT = {"pass": "✅ pass", "fail": "❌ fail", "error": "⚠️ error"}


def _fig(r: ResultEntry, key: str, stat: str) -> str:
    v = r.stat(key).value(stat)
    return "–" if v is None else f"{v:.1f}"


def markdown(results: Sequence[Entry]) -> str:
    typed = entries_of(results)
    rows = [[r.nodeid, r.workload,
             VERDICT[r.verdict] if r.verdict in VERDICT else r.verdict, r.n, _fig(r, "ttft_ms", "p95"),
             _fig(r, "tpot_ms", "p50"), _fig(r, "e2e_ms", "p95"), r.baseline.status or "–",
             "<br>".join(r.violations + r.errors) or "–", "<br>".join(r.notes) or "–"] for r in typed]
    failed = sum(1 for r in typed if r.verdict != "pass")
    head = f"### LLM latency: {len(typed) - failed} of {len(typed)} passed\n\n"
    return head + md_table(HEADER, rows) + "\n"


def append(results: Sequence[Entry], env: Mapping[str, str] = os.environ) -> str | None:
    """Append the section when the variable is set; returns the path written (None: not set)."""
    path = env[ENV] if ENV in env else None
    if not path or not results:
        return None
    p = Path(path)
    try:
        old = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = ""
    if old and not old.endswith("\n"):
        old += "\n"
    write_atomic(p, old + markdown(results))
    return path
