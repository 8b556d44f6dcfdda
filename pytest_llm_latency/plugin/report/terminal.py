"""The end-of-run latency table and the live progress line (formatting only)."""
from __future__ import annotations


def _fmt(v, digits=1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _stat(res: dict, metric: str, stat: str):
    m = res.get(metric) or {}
    return m.get(stat)


def summary_lines(results: list[dict]) -> list[str]:
    header = ("test", "n", "TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95", "tok/s", "verdict")
    rows = []
    for r in results:
        tps = _stat(r, "tpot_ms", "p50")
        rows.append((str(r.get("nodeid")), str(r.get("n")), _fmt(_stat(r, "ttft_ms", "p50")),
                     _fmt(_stat(r, "ttft_ms", "p95")), _fmt(tps, 2), _fmt(_stat(r, "tpot_ms", "p95"), 2),
                     _fmt(1000.0 / tps if tps else None), str(r.get("verdict", "?")).upper()))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [fmt(header) + "   (ms; tok/s = 1000/TPOT p50)", fmt(["-" * w for w in widths])]
    lines += [fmt(row) for row in rows]
    for r in results:
        for v in r.get("violations") or []:
            lines.append(f"  {r.get('nodeid')}: {v}")
        for e in r.get("errors") or []:
            lines.append(f"  {r.get('nodeid')}: {e}")
    return lines


class Progress:
    """'chat 12/20' on a TTY, rewritten in place with backspaces so pytest's own
    line (file name, dots) is kept; silent when output is not a terminal."""

    def __init__(self, tr, label: str):
        self.tr, self.label, self._shown = tr, label, 0
        self.enabled = tr is not None and getattr(tr, "isatty", False) and tr.verbosity >= 0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        text = f" [{self.label} {done}/{total}]"
        self.tr.write("\b" * self._shown + text, flush=True)
        self._shown = len(text)

    def clear(self) -> None:
        if self.enabled and self._shown:
            self.tr.write("\b" * self._shown + " " * self._shown + "\b" * self._shown, flush=True)
            self._shown = 0
