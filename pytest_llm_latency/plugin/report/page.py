"""From the run's results document (the JSON file's content) to what the HTML page shows
(docs/reports.md#html): the run's fingerprint, the summary table, and per test its verdict block,
CDFs, timeline and roofline.  Pure (no I/O); it reads the typed entries (``report.entry``), so a
missing or malformed part is a chart that says so, never an exception."""
from __future__ import annotations

import re

from ...core.roofline.modelbytes import format_bytes
from ...core.result.result_parts import RooflineInfo
from ...core.redact import redact_url
from ...core.measure.stats import PERCENTILES
from .charts import (BucketStep, BudgetLine, CdfSeries, Decode, Mark, MetricSeries, PromptPoint, RequestSpan,
                     cdf_chart, roofline_chart, timeline_chart, ttft_scatter)
from .arms_view import arm_notes, arm_rows, columns as arm_columns, sweep_chart
from .document import ResultDocument
from .entry import Cdf, Entry, Point, RequestRow, ResultEntry, entry_of
from .terminal import (agent_lines, bound_lines, class_rows, columns, legend, messages, prefill_lines, reasoned,
                       row, stall_lines, verdict_label)

CDF_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"))
#: gauges drawn on the timeline, first name found wins (vLLM, older vLLM, SGLang, llama.cpp, TGI)
TIMELINE_GAUGES = (
    ("queue depth", False, ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred",
                            "tgi_queue_size")),
    ("running requests", False, ("vllm:num_requests_running", "sglang:num_running_reqs",
                                 "llamacpp:requests_processing", "tgi_batch_current_size")),
    ("KV usage", True, ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                        "llamacpp:kv_cache_usage_ratio")),
)
BUDGET_KEY = re.compile(r"^(?P<metric>ttft|ttfo|tpot|itl|e2e)_(?P<stat>mean|max|p\d+)_ms$")


def budgets_of(r: ResultEntry) -> dict[str, list[tuple[str, float]]]:
    """``{"ttft": [("p95", 500.0)], "tpot": [], ...}`` from the result's ``budgets`` (ms budgets only)."""
    out: dict[str, list[tuple[str, float]]] = {m: [] for m in ("ttft", "ttfo", "tpot", "itl", "e2e")}
    for key, value in r.budgets.items():
        mt = BUDGET_KEY.match(key)
        if mt:
            out[mt["metric"]].append((mt["stat"], value))
    return out


def _cdf_series(label: str, cdf: Cdf | None) -> CdfSeries | None:
    return None if cdf is None else CdfSeries(label, list(cdf.points), cdf.n, cdf.misses)


def cdf_charts(r: ResultEntry) -> list[str]:
    """TTFT, TPOT and ITL: this run's curve, a baseline's when the result carries one, the
    budgets, and the percentiles exactly as the statistics (and the terminal) report them."""
    budgets = budgets_of(r)
    out = []
    for metric, name in CDF_METRICS:
        key = f"{metric}_ms"
        mine = (r.cdf or {})[key] if key in (r.cdf or {}) else None
        theirs = r.baseline_cdf[key] if key in r.baseline_cdf else None
        series = [s for s in (_cdf_series("this run", mine), _cdf_series(r.baseline.label or "baseline", theirs))
                  if s is not None]
        stats = r.stat(key)
        marks = [Mark(stat, stats.value(stat), q / 100.0) for stat, q in PERCENTILES.items()
                 if stats.value(stat) is not None or stats.is_miss(stat)]
        lines = [BudgetLine(f"{stat}", value, PERCENTILES[stat] / 100.0 if stat in PERCENTILES else None)
                 for stat, value in budgets[metric]]
        out.append(cdf_chart(name, "ms", series, lines, marks, empty=_why_empty(r, metric)))
    return out


def _why_empty(r: ResultEntry, metric: str) -> str:
    if r.cdf is None:
        return "no per-request data in this result"
    if not r.n:
        return "no request completed"
    if metric != "ttft" and r.short_outputs:
        return f"no values: short outputs ({r.short_outputs}) are left out"
    return "no values (every request produced < 2 tokens?)"


def _over_budget(req: RequestRow, budgets: dict[str, list[tuple[str, float]]]) -> bool:
    return any(v is not None and v > limit for metric, v in (("ttft", req.ttft_ms), ("tpot", req.tpot_ms),
                                                             ("e2e", req.e2e_ms)) for _, limit in budgets[metric])


def timeline(r: ResultEntry) -> str:
    """Every request on the run's time axis, coloured: within budgets, over a budget's limit
    (its TTFT, TPOT or E2E above a budget's value), short output, failed."""
    budgets = budgets_of(r)
    spans = [RequestSpan(req.send_ms, req.first_token_ms, req.last_token_ms, req.end_ms,
                         "over" if req.status == "ok" and _over_budget(req, budgets) else req.status)
             for req in r.requests if req.send_ms is not None]
    return timeline_chart("Requests over the run", spans, metric_series(r.timeline), untimed=r.untimed)


def prompt_scatter(r: Entry) -> str:
    """TTFT against prompt length, where the workload's prompt lengths vary (more than one distinct
    length in the request table); the ``by_prompt`` buckets and budgets drawn.  "" otherwise."""
    e = entry_of(r)
    points = [PromptPoint(q.prompt_tokens, q.ttft_ms, q.status == "failed") for q in e.requests
              if q.prompt_tokens is not None]
    if len({p.prompt_tokens for p in points}) < 2:
        return ""
    steps = [BucketStep(b.lo, b.hi, b.budget_ms, b.key) for b in e.buckets
             if b.lo is not None and b.budget_ms is not None]
    return ttft_scatter("TTFT against prompt length", points, steps)


def metric_series(timeline_data: dict[str, tuple[Point, ...]]) -> list[MetricSeries]:
    """Queue depth, running requests and KV usage from a ``/metrics`` timeline, when present."""
    found = [(label, fraction, [name for name in names if name in timeline_data and timeline_data[name]])
             for label, fraction, names in TIMELINE_GAUGES]
    return [MetricSeries(f"{label} ({names[0]})", list(timeline_data[names[0]]), fraction)
            for label, fraction, names in found if names]


def _decode(label: str, roof: RooflineInfo) -> Decode | None:
    ceiling, eff, p95 = roof.ceiling_tok_s, roof.decode_efficiency, roof.decode_efficiency_p95
    if ceiling is None or eff is None:
        return None
    return Decode(label, eff * ceiling, p95 * ceiling if p95 is not None else None)


def _gate(roof: RooflineInfo, min_eff: float | None) -> str:
    """The gate's verdict as the judging layer decided it (``core.checks.gates``), never re-judged here."""
    if min_eff is None:
        return "; report only (no minimum set)"
    said = {"pass": "met", "fail": "not met", "config_error": "cannot be judged"}
    return f"; gate ≥ {min_eff:.2f}: {said[roof.status] if roof.status in said else roof.status}"


def step_roofline(r: ResultEntry) -> tuple[str, list[str]] | None:
    """A speculating server's roofline (``roofline.tokens_per_step`` set): the engine steps/s
    against the step ceiling (the judged bar) and the token rate beside it; None otherwise."""
    roof, sd = r.roofline, r.spec_decode
    tps, sps, eff = roof.tokens_per_step, roof.steps_per_s, roof.step_efficiency
    if tps is None or sps is None or eff is None or eff <= 0:
        return None
    ceiling = sps / eff
    min_eff = roof.min_decode_efficiency
    svg = roofline_chart("Decode roofline per engine step", ceiling,
                         [Decode("engine steps", sps), Decode(f"tokens ({tps:.2f} per step)", sps * tps,
                                                              unit="tok/s", judged=False)],
                         min_efficiency=min_eff, unit="steps/s",
                         axis="per stream: engine steps/s (judged) and tok/s = tokens per step × steps/s")
    text = [f"decode = {sps * tps:.1f} tok/s = {tps:.2f} tokens per step × {sps:.1f} steps/s "
            f"(run totals; tokens per step from {sd.source or '?'})"]
    if roof.arithmetic is not None:
        text.append(f"step ceiling = {roof.arithmetic} = {ceiling:.1f} steps/s")
    text.append(f"step efficiency = {sps:.1f} / {ceiling:.1f} = {eff:.2f}{_gate(roof, min_eff)}")
    if roof.draft is not None:
        text.append(f"drafter: {roof.draft}")
    rate, accepted, drafted = sd.acceptance_rate, sd.accepted_tokens, sd.draft_tokens
    if rate is not None:
        text.append(f"draft acceptance: {accepted:g} of {drafted:g} drafted tokens = {rate:.0%}"
                    if accepted is not None and drafted is not None else f"draft acceptance: {rate:.0%}")
    if roof.decode_efficiency is not None:
        text.append(f"per token: {roof.decode_efficiency:.2f} of the single-token ceiling (not judged: "
                    f"several tokens per step)")
    if roof.hardware is not None:
        text.append(f"hardware: {roof.hardware}")
    return svg, text


def roofline(r: ResultEntry) -> tuple[str, list[str]]:
    """The chart and its arithmetic, from the gate's figures (completed requests' TPOT); per
    engine step for a speculating server (``step_roofline``)."""
    steps = step_roofline(r)
    if steps is not None:
        return steps
    roof = r.roofline
    ceiling, min_eff = roof.ceiling_tok_s, roof.min_decode_efficiency
    measured = [d for d in (_decode("this run", roof),) if d is not None]
    svg = roofline_chart("Decode roofline", ceiling, measured, min_efficiency=min_eff)
    if not measured:
        return svg, ["Not evaluated: set a roofline (a YAML roofline: mapping, --llm-latency-hardware or "
                     "--llm-latency-min-decode-efficiency) to compare decode with what the hardware can do."]
    d = measured[0]
    text = [f"decode = 1000 / TPOT p50 {1000.0 / d.tok_s:.2f} ms = {d.tok_s:.1f} tok/s (completed requests)"]
    if ceiling is None or ceiling <= 0:
        return svg, text + ["no decode ceiling in the results: efficiency not computed"]
    step = roof.model_bytes
    if roof.arithmetic is not None:
        text.append(f"ceiling = {roof.arithmetic} = {ceiling:.1f} tok/s")
    elif step is not None and step > 0:
        text.append(f"ceiling = {ceiling * step / 1e9:.0f} GB/s ÷ {format_bytes(step)} per step = {ceiling:.1f} tok/s")
    else:
        text.append(f"ceiling = {ceiling:.1f} tok/s")
    text.append(f"efficiency = {d.tok_s:.1f} / {ceiling:.1f} = {d.tok_s / ceiling:.2f}{_gate(roof, min_eff)}")
    if d.tok_s_p95 is not None:
        text.append(f"p95: 1000 / TPOT p95 = {d.tok_s_p95:.1f} tok/s = {d.tok_s_p95 / ceiling:.2f} of the ceiling")
    if roof.hardware is not None:
        text.append(f"hardware: {roof.hardware}")
    return svg, text


def disagg_text(r: ResultEntry) -> list[str]:
    """A disaggregated result (JSON ``disagg``): the transfer, the floor's arithmetic and the TTFT split,
    each figure with its source; [] for one server."""
    d = r.disagg
    if not d:
        return []
    out = [f"pools: prefill {d.prefill_metrics_url or '-'}, decode {d.decode_metrics_url or '-'}"]
    if d.kv_transfer_ms_mean is None:
        out.append(f"KV transfer: not reported ({d.transfer_note or 'see the notes'})")
    else:
        above = d.kv_transfer_lower_bounds  # "> the highest bound": the rank is in the +Inf bucket
        stats = ", ".join(f"{s} {'> ' if s in above else ''}{v:.1f} ms" for s in ("p50", "p95", "max")
                          if (v := getattr(d, f"kv_transfer_ms_{s}")) is not None)
        out.append(f"KV transfer ({d.transfer_source}, {d.transfers:g} transfers): mean "
                   f"{d.kv_transfer_ms_mean:.1f} ms, {stats}"
                   + (f"; p95 {d.kv_transfer_buckets['p95']}" if "p95" in d.kv_transfer_buckets else ""))
        if d.transfer_bytes_mean is not None:
            out.append(f"bytes per transfer (server): {format_bytes(d.transfer_bytes_mean)} "
                       f"({d.transfer_bytes_source})")
        if d.transfer_gb_s is not None:
            out.append(f"achieved: {d.transfer_gb_s:.2f} GB/s ({d.transfer_gb_s_source})")
    if d.floor_arithmetic is not None:
        out.append(f"floor = {d.floor_arithmetic}")
        if d.achieved_fraction is not None and d.kv_transfer_ms_mean:
            out.append(f"mean floor ÷ mean transfer = {d.floor_ms:.1f} / {d.kv_transfer_ms_mean:.1f} ms = "
                       f"{d.achieved_fraction:.2f} of the {d.link_gb_s:g} GB/s link")
        out.append(f"link: {d.link_name} ({d.link_source})")
    elif d.floor_note:
        out.append(d.floor_note)
    if r.split and d.client_ttft_ms_mean is not None:
        out.append(f"TTFT mean {d.client_ttft_ms_mean:.1f} ms = "
                   + " + ".join(f"{p.label} {p.ms:.1f}" for p in r.split) + " ms")
        out += [f"{p.label}: {p.ms:.1f} ms from {p.source}" for p in r.split]
    return out


def fingerprint(doc: ResultDocument, results: list[ResultEntry]) -> list[tuple[str, str]]:
    """What the results know about the target and the run, URL credentials masked."""
    out = [(str(key), redact_url(str(value))) for key, value in doc.target.items()
           if value is not None and not isinstance(value, (dict, list))]
    hardware = sorted({r.roofline.hardware for r in results if r.roofline.hardware})
    if hardware:
        out.append(("hardware (roofline)", ", ".join(hardware)))
    out += [(label, str(value)) for label, value in (("seed", doc.seed), ("nonce", doc.nonce),
                                                     ("pytest-llm-latency", doc.plugin_version or None))
            if value is not None]
    return out


def _terminal_text(lines: list[str], skip: int = 1) -> list[str]:
    """The terminal's lines about a result (prefill fit, agent sessions, statistical bounds), word
    for word, without the ``nodeid:`` lead."""
    return [line.strip().split(": ", 1)[-1] if line.startswith("  ") and not line.startswith("    ")
            else line.strip() for line in lines[skip:]]


def test_view(r: ResultEntry, i: int) -> dict:
    facts = [(label, v) for k, label in FACTS for key, v in r.scalars if key == k]
    facts += [("failed / short", f"{r.failed_requests} / {r.short_outputs}")]
    if r.measurement.itl_token_counts is not None:  # core.measure.metrics.COUNT_RULES: how ITL knew k per chunk
        facts.append(("ITL token counts", r.measurement.itl_token_counts))
    roof_svg, roof_text = roofline(r)
    return {"prefill_text": _terminal_text(prefill_lines([r])), "agent_text": _terminal_text(agent_lines([r])),
            "bounds_text": _terminal_text(bound_lines(r), skip=0), "disagg_text": disagg_text(r),
            "stall_text": _terminal_text(stall_lines([r])),
            "anchor": f"test-{i}", "nodeid": r.nodeid, "verdict": r.verdict,
            "verdict_label": verdict_label(r), "messages": messages(r), "facts": facts,
            "cdfs": cdf_charts(r), "timeline": timeline(r), "scatter": prompt_scatter(r),
            "roofline": roof_svg, "roofline_text": roof_text,
            "arms": {"columns": arm_columns(r), "rows": arm_rows(r), "notes": arm_notes(r), "chart": sweep_chart(r)}}


FACTS = (("workload", "workload"), ("class", "class"), ("prompt_tokens", "prompt tokens"),
         ("output_tokens", "output tokens"), ("concurrency", "concurrency"))


def build(doc: ResultDocument | dict) -> dict:
    """The template's context."""
    typed = doc if isinstance(doc, ResultDocument) else ResultDocument.parse(doc)
    results = typed.entries()
    tests = [test_view(r, i) for i, r in enumerate(results, 1)]
    counts = {v: sum(1 for r in results if r.verdict == v) for v in ("pass", "fail", "error")}
    with_reasoning = reasoned(results)
    return {"fingerprint": fingerprint(typed, results), "columns": columns(results), "legend": legend(results),
            "counts": counts, "tests": tests,
            "rows": table_rows(tests, results, with_reasoning)}


def table_rows(tests: list[dict], results: list[ResultEntry], reasoning: bool) -> list[tuple[str, str, tuple]]:
    """(anchor, verdict, cells) of every row: each test's, then its classes' (a mixed workload: the class's
    own verdict, ``core.checks.mix``)."""
    out = []
    for t, r in zip(tests, results):
        out.append((t["anchor"], t["verdict"], row(r, reasoning)))
        out += [(t["anchor"], cells[-1].lower(), cells) for cells in class_rows(r, reasoning)]
    return out
