"""GitHub Actions step summary: when ``$GITHUB_STEP_SUMMARY`` names a file, append a Markdown
table of every latency test (verdict, key figures, baseline comparison, regressions, notes).

Appended, never overwritten (other steps write there too), and atomically: the file's current
text plus this run's section is written to a temp file and renamed (``files.atomic``), so a
crash leaves either the old summary or the new one, never half a table.
"""
from __future__ import annotations

import os
from pathlib import Path

from ...core.compare import md_table
from ...files.atomic import write_atomic

ENV = "GITHUB_STEP_SUMMARY"
HEADER = ("test", "workload", "verdict", "n", "TTFT p95 ms", "TPOT p50 ms", "E2E p95 ms", "vs baseline",
          "regressions / violations", "notes")
VERDICT = {"pass": "✅ pass", "fail": "❌ fail", "error": "⚠️ error"}


def _fig(r: dict, key: str, stat: str) -> str:
    v = (r.get(key) or {}).get(stat)
    return "–" if v is None else f"{v:.1f}"


def markdown(results: list[dict]) -> str:
    rows = []
    for r in results:
        rows.append([r.get("nodeid"), r.get("workload"), VERDICT.get(str(r.get("verdict")), r.get("verdict")),
                     r.get("n"), _fig(r, "ttft_ms", "p95"), _fig(r, "tpot_ms", "p50"), _fig(r, "e2e_ms", "p95"),
                     (r.get("baseline") or {}).get("status", "–"),
                     "<br>".join(list(r.get("violations") or []) + list(r.get("errors") or [])) or "–",
                     "<br>".join(r.get("notes") or []) or "–"])
    failed = sum(1 for r in results if r.get("verdict") != "pass")
    head = f"### LLM latency: {len(results) - failed} of {len(results)} passed\n\n"
    return head + md_table(HEADER, rows) + "\n"


def append(results: list[dict], env=os.environ) -> str | None:
    """Append the section when the variable is set; returns the path written (None: not set)."""
    path = env.get(ENV)
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
