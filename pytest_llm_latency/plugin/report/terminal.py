"""The end-of-run latency table and the live progress line (formatting only)."""
from __future__ import annotations

from typing import Any, Sequence

from ...core.measure.prefill_overlap import possessive
from .arms_view import sweep_lines
from .entry import Entry, ResultEntry, entries_of, entry_of

COLUMNS = ("test", "n", "TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95", "decode tok/s", "out tok/s", "verdict")
LEGEND = ("times in ms; decode tok/s = 1000 / TPOT p50; out tok/s = p50 of N / E2E per request; "
          "inf = failed requests counted as misses; * = see notes")
MIX_LEGEND = "; [class] = a mixed workload's class, judged on its own budgets"
#: shown before ``verdict`` when a result reasoned (JSON ``measurement.reasoning_*``, ``core.measure.reasoning``)
REASONING_COLUMN = "reasoning"
REASONING_LEGEND = ("; reasoning = share of the output tokens that were reasoning (TPOT and the roofline count "
                    "them all), and p95 of the reasoning tokens per request")


def reasoned(results: Sequence[ResultEntry]) -> bool:
    """A result in the table reasoned: the table gets its ``reasoning`` column."""
    return any(r.measurement.reasoning_requests for r in results)


def columns(results: Sequence[Entry]) -> tuple[str, ...]:
    """The table's header: ``COLUMNS``, with ``reasoning`` before the verdict when a result reasoned."""
    return COLUMNS[:-1] + (REASONING_COLUMN,) + COLUMNS[-1:] if reasoned(entries_of(results)) else COLUMNS


def legend(results: Sequence[Entry]) -> str:
    typed = entries_of(results)
    return LEGEND + (REASONING_LEGEND if reasoned(typed) else "") + \
        (MIX_LEGEND if any(r.classes for r in typed) else "")


def _reasoning_share(r: ResultEntry) -> str:
    """``75%, p95 12``: the share of the output tokens, and the reasoning tokens per request (p95)."""
    share = r.measurement.reasoning_share
    cell = "-" if share is None else f"{share:.0%}"
    if "reasoning_tokens" in r.stats:
        cell += f", p95 {_stat(r, 'reasoning_tokens', 'p95', 0)}"
    return cell


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _stat(r: ResultEntry, metric: str, stat: str, digits: int = 1) -> str:
    """A statistic as shown: ``inf`` when it is a miss (null in JSON, with censored > 0)."""
    s = r.stat(metric)
    return "inf" if s.is_miss(stat) else _fmt(s.value(stat), digits)


def _decode_tps(r: ResultEntry) -> str:
    s = r.stat("tpot_ms")
    if s.is_miss("p50"):
        return "0.0"  # TPOT p50 is a miss: nothing decoded at that rank
    tpot = s.value("p50")
    return _fmt(1000.0 / tpot if tpot else None)


def verdict_label(r: Entry) -> str:
    """``PASS``, ``FAIL``, ``ERROR``; `` *`` when the result has notes (the table's column)."""
    e = entry_of(r)
    return e.verdict.upper() + (" *" if e.notes else "")


def row(r: Entry, reasoning: bool = False) -> tuple[str, ...]:
    """One result's cells under ``columns``, as the table shows them (the HTML report too);
    ``reasoning``: with the reasoning share (the table has that column)."""
    e = entry_of(r)
    return (e.nodeid, str(e.n), _stat(e, "ttft_ms", "p50"), _stat(e, "ttft_ms", "p95"),
            _stat(e, "tpot_ms", "p50", 2), _stat(e, "tpot_ms", "p95", 2), _decode_tps(e),
            _stat(e, "output_tps", "p50")) + ((_reasoning_share(e),) if reasoning else ()) + (verdict_label(e),)


def class_rows(r: Entry, reasoning: bool = False) -> list[tuple[str, ...]]:
    """A mixed workload's classes under its row (JSON ``mix.classes``): ``  [chat]``, the class's requests,
    TTFT and TPOT p50/p95 and its own verdict (``core.checks.mix``); the run-wide columns are ``-``."""
    out = []
    for c in entry_of(r).classes:
        cells = [_fmt(c.stat(k), d) for k, d in (("ttft_p50_ms", 1), ("ttft_p95_ms", 1), ("tpot_p50_ms", 2),
                                                  ("tpot_p95_ms", 2))]
        out.append((f"  [{c.name}]", "-" if c.requests is None else str(c.requests), *cells, "-", "-")
                   + (("-",) if reasoning else ()) + (c.status.upper(),))
    return out


def rows_of(results: Sequence[Entry], reasoning: bool) -> list[tuple[Entry, tuple[str, ...]]]:
    """Every table row: each result's, then its classes' (a mixed workload)."""
    return [(r, cells) for r in results for cells in [row(r, reasoning)] + class_rows(r, reasoning)]


#: how the summary names a finding's kind (a failed check and a likely cause are said as violations)
SAID_AS = {"violation": "violation", "failed": "violation", "cause": "violation", "error": "error", "note": "note"}


def messages(r: Entry) -> list[tuple[str, str, str]]:
    """What the summary says about one result, in its words and order: violations (and failed
    gates) with their likely causes, then errors, then notes, each as ``(kind, text, check)``."""
    return [(SAID_AS[f.kind] if f.kind in SAID_AS else f.kind, f.text, f.check) for f in entry_of(r).findings]


def summary_lines(results: Sequence[Entry]) -> list[str]:
    typed = entries_of(results)
    header, with_reasoning = columns(typed), reasoned(typed)
    rows = [cells for _, cells in rows_of(typed, with_reasoning)]
    widths = [max(len(h), *(len(cells[i]) for cells in rows)) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i in (0, len(cells) - 1) else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    lines = [fmt(header), fmt(["-" * w for w in widths])]
    lines += [fmt(cells) for cells in rows]
    lines.append(legend(typed))
    for r in typed:
        lines += bound_lines(r)
    for r in typed:
        lines += [f"  {r.nodeid}: {text}" for kind, text, _ in messages(r) if kind != "note"]
    for lines_of in (itl_count_lines, workers_lines, prefill_lines, prompt_bucket_lines, stall_lines, step_lines,
                     agent_lines, structured_lines, disagg_lines, sweep_lines):
        lines += lines_of(typed)
    noted = [f"  {r.nodeid}: {text}" for r in typed for kind, text, _ in messages(r) if kind == "note"]
    return lines + (["notes (*):"] + noted if noted else [])


def itl_count_lines(results: Sequence[Entry]) -> list[str]:
    """Where ITL's per-chunk token counts were recovered, not given by the stream
    (``core.measure.metrics.COUNT_RULES``: JSON ``measurement.itl_token_counts``): which rule gave them."""
    return [f"  {r.nodeid}: ITL token counts per chunk: {r.measurement.itl_token_counts}"
            for r in entries_of(results) if r.measurement.itl_token_counts not in (None, "server", "one each")]


def workers_lines(results: Sequence[Entry]) -> list[str]:
    """How many worker processes sent each load and why (JSON ``load.workers`` / ``load.workers_reason``)."""
    return [f"  {r.nodeid}: {r.load.workers} process{'es' if r.load.workers != 1 else ''} sent the load -- "
            f"{r.load.workers_reason}" for r in entries_of(results) if r.load.workers_reason]


def bound_lines(r: Entry) -> list[str]:
    """Budgets judged at a confidence: interval, verdict, samples it took, why sampling stopped."""
    e = entry_of(r)
    if not e.bounds:
        return []
    out = [f"  {e.nodeid}: {e.measurement.stop_reason or ''}".rstrip()]
    for key, b in e.bounds.items():
        unit = "tok/s" if key.startswith("output_tps") else "ms"
        lo_s = "-inf" if b.lower is None and b.method != "t" else _fmt(b.lower, 2)
        up_s = "inf" if b.upper is None else _fmt(b.upper, 2)
        ci = (f" ({b.confidence:.0%} bounds {lo_s}..{up_s} {unit})"
              if b.confidence and b.method not in ("extreme", "point") else f" ({b.method})")
        more = f", ~{b.would_decide} samples would decide" if b.would_decide else ""
        if b.status == "not_decided":  # samples: auto stopped at another budget's fail
            more = f" (sampling stopped when {b.stopped_by} failed)"
        op = ">=" if key.startswith("output_tps") else "<="
        out.append(f"    {key} {op} {_budget(e, key)} {unit}: {_fmt(b.estimate, 2)}{ci} -> "
                   f"{str(b.status).upper().replace('_', ' ')} at n={b.n}{more}")
    return out


def _budget(r: ResultEntry, key: str) -> str:
    return next((f"{v:g}" for k, v in r.budgets.items() if k.startswith(key + "_")), "?")  # ttft_p95_ms, ...


class Progress:
    """'chat 12/20' on a TTY, rewritten in place with backspaces so pytest's own
    line (file name, dots) is kept; silent when output is not a terminal."""

    def __init__(self, tr: Any, label: str) -> None:
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


def prefill_lines(results: Sequence[Entry]) -> list[str]:
    """One line per prompt_sweep result: the fit, the MFU and the overhead (JSON ``prefill``)."""
    lines = []
    for r in entries_of(results):
        p = r.prefill
        if p.tok_s is None or p.overhead_ms is None:
            continue
        mfu = (f", MFU {p.mfu:.2f} of {p.hardware} ({p.peak_tflops or 0:g} TFLOPS)" if p.mfu is not None
               else ", MFU -")
        server = (f", server {p.server_tok_s:,.0f} tok/s" if p.server_tok_s is not None else "") + \
            (f", client − server {p.server_overhead_ms:.1f} ms" if p.server_overhead_ms is not None else "")
        lines.append(f"  {r.nodeid}: {p.tok_s:,.0f} tok/s over {p.lengths} tokens, overhead "
                     f"{p.overhead_ms:.1f} ms (residuals median {p.residual_mad_ms or 0:.2f} ms){mfu}{server}, "
                     f"TTFT {p.linearity}")
    return ["prefill roofline (TTFT = overhead + n / tok/s):"] + lines if lines else []


def prompt_bucket_lines(results: Sequence[Entry]) -> list[str]:
    """One line per prompt-length bucket of the ``ttft_<stat>_by_prompt`` budgets (JSON ``by_prompt``):
    ``ttft_p95_by_prompt[<1024]: n=12 p95 212.0 ms, budget 300 ms -> PASS``."""
    lines = []
    for r in entries_of(results):
        for b in r.buckets:
            head = f"  {r.nodeid}: {b.key}: n={b.n}"
            if b.status == "no_bucket":
                lines.append(f"{head} above every bucket (longest {b.longest}), not judged: requests {b.requests}")
                continue
            stat = b.budget.split("_")[1] if "_" in b.budget else "?"
            est = b.estimate_ms
            figure = "" if not b.judged else f" {stat} {'inf' if est is None else f'{est:.1f}'} ms,"
            lines.append(f"{head}{figure} budget {b.budget_ms or 0:g} ms -> "
                         f"{str(b.status).upper().replace('_', ' ')}")
    return ["TTFT by prompt length (half-open token ranges):"] + lines if lines else []


def step_lines(results: Sequence[Entry]) -> list[str]:
    """One line per result whose decode roofline was judged per engine step (speculative decoding /
    MTP: JSON ``roofline.tokens_per_step``): the token rate as tokens per step × steps/s."""
    lines = []
    for r in entries_of(results):
        roof, sd = r.roofline, r.spec_decode
        tps, sps, eff = roof.tokens_per_step, roof.steps_per_s, roof.step_efficiency
        if tps is None or sps is None or eff is None:
            continue
        acc_s = f", draft acceptance {sd.acceptance_rate:.0%}" if sd.acceptance_rate is not None else ""
        lines.append(f"  {r.nodeid}: {tps * sps:.1f} tok/s = {tps:.2f} tokens per step × {sps:.1f} steps/s; "
                     f"steps at {eff:.2f} of the ceiling{acc_s} (run totals; {sd.source or '?'})")
    return ["decode roofline per engine step (speculative decoding / MTP):"] + lines if lines else []


def agent_lines(results: Sequence[Entry]) -> list[str]:
    """One line per agent-session result: reuse per turn and the session figures (JSON ``agent``)."""
    lines = []
    for r in entries_of(results):
        x = r.agent
        if x.sessions is None:
            continue
        turns = [k for k in range(2, (x.steps or 0) + 1) if k in r.turn_reuse]
        per_turn = ", ".join(f"t{k} {r.turn_reuse[k]:.0%}" for k in turns)
        reuse = (f"prefix reuse {x.prefix_reuse:.0%} ({per_turn or x.prefix_reuse_source})"
                 if x.prefix_reuse is not None else "prefix reuse not reported")
        figs = [f"{label} p95 {v:.1f} ms" for v, label in (
            (x.turn_ttft_ms_p95, "turn TTFT"), (x.session_e2e_ms_p95, "session model time"),
            (x.tool_call_complete_ms_p95, "tool call complete")) if v is not None]
        lines.append(f"  {r.nodeid}: {x.sessions} sessions x {x.steps} turns, {reuse}; " + ", ".join(figs))
    return ["agent sessions (turn 2+ prefix reuse; model time without tool pauses):"] + lines if lines else []


def structured_lines(results: Sequence[Entry]) -> list[str]:
    """One line per structured-output result (JSON ``structured``): the schema's violations, the
    constrained answers' lengths and, with twins, the TPOT overhead of constrained decoding."""
    lines = []
    for r in entries_of(results):
        x = r.structured
        if x.schema is None:
            continue
        parts = [f"{x.schema_violations or 0} schema violations"]
        if x.output_tokens_p50 is not None:
            parts.append(f"answers {x.output_tokens_min}..{x.output_tokens_max} tokens (p50 {x.output_tokens_p50:g})")
        if x.tpot_overhead is not None:
            budget = f" (max {x.tpot_overhead_max:.0%})" if x.tpot_overhead_max is not None else ""
            parts.append(f"structured_tpot_overhead {x.tpot_overhead:+.1%}{budget}: TPOT p50 {x.tpot_ms_p50:.2f} ms "
                         f"constrained vs {x.comparison_tpot_ms_p50:.2f} ms unconstrained")
        lines.append(f"  {r.nodeid}: " + "; ".join(parts))
    return ["structured output (answers validated against the JSON Schema):"] + lines if lines else []


def disagg_lines(results: Sequence[Entry]) -> list[str]:
    """One line per disaggregated result (JSON ``disagg``): the KV transfer against the link's floor and the
    TTFT split, ``KV transfer p95 180.0 ms (mean 150.0 ms, 20 transfers) for 2.10 GB = 0.47 of the 25 GB/s
    link (floor 83.9 ms); TTFT 340.0 ms = queue 15.0 + prefill 200.0 + kv_transfer 90.0 + ...``."""
    from ...core.roofline.kv_transfer import transfer_text

    lines = []
    for r in entries_of(results):
        d = r.disagg
        if not d:
            continue
        if d.kv_transfer_ms_p95 is None:
            head = f"no KV transfer reported ({d.transfer_note or 'see the notes'})"
        else:
            kv_bytes, floor_ms = d.floor_at("p95")
            head = transfer_text("p95", d.kv_transfer_ms_p95, kv_bytes=kv_bytes, floor_ms=floor_ms,
                                 link_gb_s=d.link_gb_s, link_name=d.link_name if d.link != "custom" else None)
            head += f"; mean {d.kv_transfer_ms_mean:.1f} ms over {d.transfers:g} transfers"
        split = " + ".join(f"{p.label} {p.ms:.1f}" for p in r.split)
        ttft = f"; TTFT mean {d.client_ttft_ms_mean:.1f} ms = {split}" if split and d.client_ttft_ms_mean else ""
        lines.append(f"  {r.nodeid}: {head}{ttft}")
    return ["disaggregated serving (prefill pool -> KV transfer -> decode pool; ms):"] + lines if lines else []


def stall_lines(results: Sequence[Entry]) -> list[str]:
    """One line per result whose streams overlapped another request's long prefill (JSON ``stall``):
    the stall gaps against the clean ones, the stalls per minute, the main cause and the worst stall."""
    lines = []
    for r in entries_of(results):
        x = r.stall
        if not x.stall_gaps:
            continue
        clean = f"clean p99 {_fmt(x.clean_ms_p99)} ms ({x.clean_gaps} gaps)" if x.clean_gaps else "no clean gaps"
        per_min = f"; {x.stalls_per_min:.1f} stalls/min" if x.stalls_per_min is not None else ""
        top = r.stall_causes[0] if r.stall_causes else None
        cause = (f"; {top.share or 0:.0%} during {possessive(top.cause)} prefills "
                 f"({_fmt(top.prompt_tokens_p50, 0)} tokens, median window {_fmt(top.window_ms_p50, 0)} ms)"
                 if top is not None else "")
        left = f"; {x.client_gaps} gaps the client made left out" if x.client_gaps else ""
        lines.append(f"  {r.nodeid}: >= {x.stall_prompt_tokens} tokens: stall p99 {_fmt(x.stall_ms_p99)} ms (max "
                     f"{_fmt(x.stall_ms_max)} ms, request {x.worst_request}; {x.stall_gaps} gaps) vs {clean}"
                     f"{per_min}{cause}{left}")
    return ["stalls (gaps overlapping another request's long prefill vs the others):"] + lines if lines else []
