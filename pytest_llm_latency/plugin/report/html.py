"""A self-contained HTML report of the run's latency results (no scripts, no assets).

Built from the same result dicts as the JSON file; every string is escaped.
"""
from __future__ import annotations

import html

from .terminal import _stat

STYLE = ("body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td.l,th.l{text-align:left}"
         ".pass{color:#070}.fail{color:#b00}.error{color:#a60}pre{white-space:pre-wrap;margin:0}")
COLUMNS = (("TTFT", "ttft_ms"), ("TTFO", "ttfo_ms"), ("TPOT", "tpot_ms"), ("ITL", "itl_ms"), ("E2E", "e2e_ms"))


def render(doc: dict) -> str:
    e = html.escape
    target = doc.get("target") or {}
    rows = []
    for r in doc.get("results", []):
        verdict = str(r.get("verdict", "?"))
        cells = [f'<td class="l">{e(str(r.get("nodeid")))}</td>', f"<td>{e(str(r.get('n')))}</td>"]
        for _, key in COLUMNS:
            cells.append(f"<td>{_stat(r, key, 'p50')} / {_stat(r, key, 'p95')} / {_stat(r, key, 'p99')}</td>")
        extra = r.get("extra") or {}
        eff = extra.get("decode_efficiency")
        cells.append(f"<td>{'-' if eff is None else f'{eff:.2f}'}</td>")
        cells.append(f"<td>{e(str(r.get('short_outputs', 0)))} / {e(str(r.get('failed_requests', 0)))}</td>")
        cells.append(f'<td class="l {e(verdict)}">{e(verdict.upper())}</td>')
        why = "\n".join(list(r.get("violations") or []) + list(r.get("errors") or [])
                        + [f"note: {n}" for n in r.get("notes") or []])
        cells.append(f'<td class="l"><pre>{e(why)}</pre></td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{name} p50 / p95 / p99 (ms)</th>" for name, _ in COLUMNS)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>LLM latency report</title>"
            f"<style>{STYLE}</style></head><body><h1>LLM latency report</h1>"
            f"<p>target {e(str(target.get('url')))} · api {e(str(target.get('api')))} · model "
            f"{e(str(target.get('model')))} · seed {e(str(doc.get('seed')))} · pytest-llm-latency "
            f"{e(str(doc.get('version')))}</p><table><tr><th class='l'>test</th><th>n</th>{head}"
            f"<th>decode efficiency</th><th>short / failed</th><th class='l'>verdict</th>"
            f"<th class='l'>why</th></tr>{''.join(rows)}</table></body></html>\n")
