"""The end-of-run latency table and the live progress line (formatting only)."""
from __future__ import annotations

COLUMNS = ("test", "n", "TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95", "decode tok/s", "out tok/s", "verdict")
LEGEND = ("times in ms; decode tok/s = 1000 / TPOT p50; out tok/s = p50 of N / E2E per request; "
          "inf = failed requests counted as misses; * = see notes")
#: shown before ``verdict`` when a result reasoned (JSON ``measurement.reasoning_*``, ``core.reasoning``)
REASONING_COLUMN = "reasoning"
REASONING_LEGEND = ("; reasoning = share of the output tokens that were reasoning (TPOT and the roofline count "
                    "them all)")


def reasoned(results: list[dict]) -> bool:
    """A result in the table reasoned: the table gets its ``reasoning`` column."""
    return any(isinstance(r.get("measurement"), dict) and r["measurement"].get("reasoning_requests")
               for r in results)


def columns(results: list[dict]) -> tuple[str, ...]:
    """The table's header: ``COLUMNS``, with ``reasoning`` before the verdict when a result reasoned."""
    return COLUMNS[:-1] + (REASONING_COLUMN,) + COLUMNS[-1:] if reasoned(results) else COLUMNS


def legend(results: list[dict]) -> str:
    return LEGEND + (REASONING_LEGEND if reasoned(results) else "")


def _reasoning_share(r: dict) -> str:
    share = (r.get("measurement") or {}).get("reasoning_share")
    return "-" if not isinstance(share, (int, float)) else f"{share:.0%}"


def _fmt(v, digits=1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _stat(res: dict, metric: str, stat: str, digits: int = 1) -> str:
    """A statistic as shown: ``inf`` when it is a miss (null in JSON, with censored > 0)."""
    m = res.get(metric) or {}
    v = m.get(stat)
    if v is None and stat in m and m.get("censored"):
        return "inf"
    return _fmt(v, digits)


def _decode_tps(res: dict) -> str:
    m = res.get("tpot_ms") or {}
    tpot = m.get("p50")
    if tpot is None and "p50" in m and m.get("censored"):
        return "0.0"  # TPOT p50 is a miss: nothing decoded at that rank
    return _fmt(1000.0 / tpot if tpot else None)


def verdict_label(r: dict) -> str:
    """``PASS``, ``FAIL``, ``ERROR``; `` *`` when the result has notes (the table's column)."""
    return str(r.get("verdict", "?")).upper() + (" *" if r.get("notes") else "")


def row(r: dict, reasoning: bool = False) -> tuple[str, ...]:
    """One result's cells under ``columns``, as the table shows them (the HTML report too);
    ``reasoning``: with the reasoning share (the table has that column)."""
    return (str(r.get("nodeid")), str(r.get("n")), _stat(r, "ttft_ms", "p50"), _stat(r, "ttft_ms", "p95"),
            _stat(r, "tpot_ms", "p50", 2), _stat(r, "tpot_ms", "p95", 2), _decode_tps(r),
            _stat(r, "output_tps", "p50")) + ((_reasoning_share(r),) if reasoning else ()) + (verdict_label(r),)


def messages(r: dict) -> list[tuple[str, str]]:
    """What the summary says about one result, in its words and order: violations (and failed
    gates) with their likely causes, then errors, then notes, each as ``(kind, text)``."""
    return ([("violation", str(v)) for v in r.get("violations") or []] +
            [("violation", str(c)) for c in r.get("causes") or []] +
            [("error", str(e)) for e in r.get("errors") or []] +
            [("note", str(n)) for n in r.get("notes") or []])


def summary_lines(results: list[dict]) -> list[str]:
    header, with_reasoning = columns(results), reasoned(results)
    rows = [row(r, with_reasoning) for r in results]
    widths = [max(len(h), *(len(cells[i]) for cells in rows)) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i in (0, len(cells) - 1) else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    lines = [fmt(header), fmt(["-" * w for w in widths])]
    lines += [fmt(cells) for cells in rows]
    lines.append(legend(results))
    for r in results:
        lines += bound_lines(r)
    for r in results:
        for kind, text in messages(r):
            if kind != "note":
                lines.append(f"  {r.get('nodeid')}: {text}")
    lines += itl_count_lines(results)
    lines += workers_lines(results)
    lines += prefill_lines(results)
    lines += prompt_bucket_lines(results)
    lines += step_lines(results)
    lines += agent_lines(results)
    noted = [r for r in results if r.get("notes")]
    if noted:
        lines.append("notes (*):")
        for r in noted:
            for kind, text in messages(r):
                if kind == "note":
                    lines.append(f"  {r.get('nodeid')}: {text}")
    return lines


def itl_count_lines(results: list[dict]) -> list[str]:
    """Where ITL's per-chunk token counts were recovered, not given by the stream
    (``core.metrics.COUNT_RULES``: JSON ``measurement.itl_token_counts``): which rule gave them."""
    out = []
    for r in results:
        rule = (r.get("measurement") or {}).get("itl_token_counts")
        if isinstance(rule, str) and rule not in ("server", "one each"):
            out.append(f"  {r.get('nodeid')}: ITL token counts per chunk: {rule}")
    return out


def workers_lines(results: list[dict]) -> list[str]:
    """How many worker processes sent each load and why (JSON ``load.workers`` / ``load.workers_reason``)."""
    out = []
    for r in results:
        load = r.get("load") or {}
        if isinstance(load, dict) and load.get("workers_reason"):
            n = load.get("workers")
            out.append(f"  {r.get('nodeid')}: {n} process{'es' if n != 1 else ''} sent the load -- "
                       f"{load['workers_reason']}")
    return out


def bound_lines(r: dict) -> list[str]:
    """Budgets judged at a confidence: interval, verdict, samples it took, why sampling stopped."""
    bounds = r.get("bounds") or {}
    if not bounds:
        return []
    head = f"  {r.get('nodeid')}: {(r.get('measurement') or {}).get('stop_reason', '')}".rstrip()
    out = [head]
    for key, b in bounds.items():
        conf = b.get("confidence")
        lo, up = b.get("lower"), b.get("upper")
        unit = "tok/s" if key.startswith("output_tps") else "ms"
        lo_s = "-inf" if lo is None and b.get("method") != "t" else _fmt(lo, 2)
        up_s = "inf" if up is None else _fmt(up, 2)
        ci = (f" ({conf:.0%} bounds {lo_s}..{up_s} {unit})" if conf and b.get("method") not in ("extreme", "point")
              else f" ({b.get('method')})")
        more = f", ~{b['would_decide']} samples would decide" if b.get("would_decide") else ""
        if b.get("status") == "not_decided":  # samples: auto stopped at another budget's fail
            more = f" (sampling stopped when {b.get('stopped_by')} failed)"
        op = ">=" if key.startswith("output_tps") else "<="
        out.append(f"    {key} {op} {_budget(r, key)} {unit}: {_fmt(b.get('estimate'), 2)}{ci} -> "
                   f"{str(b.get('status')).upper().replace('_', ' ')} at n={b.get('n')}{more}")
    return out


def _budget(r: dict, key: str) -> str:
    for k, v in (r.get("budgets") or {}).items():  # ttft_p95_ms, output_tps_min_tok_s
        if k.startswith(key + "_"):
            return f"{v:g}"
    return "?"


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


def prefill_lines(results: list[dict]) -> list[str]:
    """One line per prompt_sweep result: the fit, the MFU and the overhead (JSON ``prefill``)."""
    lines = []
    for r in results:
        p = r.get("prefill")
        if not p:
            continue
        mfu = (f", MFU {p['mfu']:.2f} of {p.get('hardware')} ({p.get('peak_tflops'):g} TFLOPS)"
               if p.get("mfu") is not None else ", MFU -")
        server = (f", server {p['server_tok_s']:,.0f} tok/s" if p.get("server_tok_s") is not None else "") + \
            (f", client − server {p['server_overhead_ms']:.1f} ms" if p.get("server_overhead_ms") is not None else "")
        lines.append(f"  {r.get('nodeid')}: {p['tok_s']:,.0f} tok/s over {p['lengths']} tokens, overhead "
                     f"{p['overhead_ms']:.1f} ms (residuals median {p.get('residual_mad_ms', 0):.2f} ms){mfu}{server}, "
                     f"TTFT {p['linearity']}")
    return ["prefill roofline (TTFT = overhead + n / tok/s):"] + lines if lines else []


def prompt_bucket_lines(results: list[dict]) -> list[str]:
    """One line per prompt-length bucket of the ``ttft_<stat>_by_prompt`` budgets (JSON ``by_prompt``):
    ``ttft_p95_by_prompt[<1024]: n=12 p95 212.0 ms, budget 300 ms -> PASS``."""
    lines = []
    for r in results:
        for b in (r.get("by_prompt") or {}).get("buckets") or ():
            head = f"  {r.get('nodeid')}: {b.get('key')}: n={b.get('n')}"
            if b.get("status") == "no_bucket":
                lines.append(f"{head} above every bucket (longest {b.get('longest')}), not judged: requests "
                             f"{b.get('requests')}")
                continue
            stat = str(b.get("budget", "")).split("_")[1] if "_" in str(b.get("budget", "")) else "?"
            est = b.get("estimate_ms")
            figure = "" if "estimate_ms" not in b else f" {stat} {'inf' if est is None else f'{est:.1f}'} ms,"
            lines.append(f"{head}{figure} budget {b.get('budget_ms', 0):g} ms -> "
                         f"{str(b.get('status')).upper().replace('_', ' ')}")
    return ["TTFT by prompt length (half-open token ranges):"] + lines if lines else []


def step_lines(results: list[dict]) -> list[str]:
    """One line per result whose decode roofline was judged per engine step (speculative decoding /
    MTP: JSON ``roofline.tokens_per_step``): the token rate as tokens per step × steps/s."""
    lines = []
    for r in results:
        roof, sd = r.get("roofline") or {}, r.get("spec_decode") or {}
        tps, sps, eff = roof.get("tokens_per_step"), roof.get("steps_per_s"), roof.get("step_efficiency")
        if not (isinstance(tps, (int, float)) and isinstance(sps, (int, float)) and isinstance(eff, (int, float))):
            continue
        acc = sd.get("acceptance_rate")
        acc_s = f", draft acceptance {acc:.0%}" if isinstance(acc, (int, float)) else ""
        lines.append(f"  {r.get('nodeid')}: {tps * sps:.1f} tok/s = {tps:.2f} tokens per step × {sps:.1f} steps/s; "
                     f"steps at {eff:.2f} of the ceiling{acc_s} (run totals; {sd.get('source') or '?'})")
    return ["decode roofline per engine step (speculative decoding / MTP):"] + lines if lines else []


def agent_lines(results: list[dict]) -> list[str]:
    """One line per agent-session result: reuse per turn and the session figures (JSON ``agent``)."""
    lines = []
    for r in results:
        x = r.get("agent") or {}
        if "sessions" not in x:
            continue
        reuse_of = {t.get("turn"): t["reuse"] for t in x.get("turns") or () if t.get("reuse") is not None}
        turns = [k for k in range(2, int(x.get("steps") or 0) + 1) if k in reuse_of]
        per_turn = ", ".join(f"t{k} {reuse_of[k]:.0%}" for k in turns)
        reuse = (f"prefix reuse {x['prefix_reuse']:.0%} ({per_turn or x.get('prefix_reuse_source')})"
                 if x.get("prefix_reuse") is not None else "prefix reuse not reported")
        figs = [f"{label} p95 {x[key]:.1f} ms" for key, label in (
            ("turn_ttft_ms_p95", "turn TTFT"), ("session_e2e_ms_p95", "session model time"),
            ("tool_call_complete_ms_p95", "tool call complete")) if x.get(key) is not None]
        lines.append(f"  {r.get('nodeid')}: {x['sessions']} sessions x {x.get('steps')} turns, "
                     f"{reuse}; " + ", ".join(figs))
    return ["agent sessions (turn 2+ prefix reuse; model time without tool pauses):"] + lines if lines else []
