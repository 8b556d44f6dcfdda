"""From the run's results document (the JSON file's content) to what the HTML page shows:
the run's fingerprint, the summary table, and per test its verdict block, CDFs, timeline
and roofline.  Pure (no I/O); tolerant of results without the optional parts (older
files, other producers): a missing part is a chart that says so, never an exception.

Optional parts a result may carry (see ``data/results.schema.json``):
  ``requests``/``cdf``      per-request timestamps and the distributions (``detail.py``);
  ``baseline``              ``{"label", "cdf", "status", ...}``: a second series
                            (a baseline, or the other arm of an A/B pair) overlaid;
  ``server.metrics_timeline`` ``{metric name: [[t_ms, value], ...]}``: ``/metrics`` gauges over
                            the run, on the requests' time axis;
  ``roofline``              the decode roofline gate's figures.
"""
from __future__ import annotations

import math
import re

from ...core.modelbytes import format_bytes
from ...core.redact import redact_url
from ...core.stats import PERCENTILES
from .charts import (BucketStep, BudgetLine, CdfSeries, Decode, Mark, MetricSeries, PromptPoint, RequestSpan,
                     cdf_chart, roofline_chart, timeline_chart, ttft_scatter)
from .terminal import (agent_lines, bound_lines, columns, legend, messages, prefill_lines, reasoned, row,
                       verdict_label)

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


def _d(v) -> dict:
    """``v`` when it is a mapping, else empty: a malformed part never breaks the page."""
    return v if isinstance(v, dict) else {}


def _l(v) -> list:
    """``v`` when it is a list, else empty."""
    return v if isinstance(v, list) else []


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def budgets_of(r: dict) -> dict[str, list[tuple[str, float]]]:
    """``{"ttft": [("p95", 500.0)], ...}`` from the result's ``budgets`` (ms budgets only)."""
    out: dict[str, list[tuple[str, float]]] = {}
    for key, value in _d(r.get("budgets")).items():
        mt = BUDGET_KEY.match(str(key))
        if mt and isinstance(value, (int, float)) and math.isfinite(value):
            out.setdefault(mt["metric"], []).append((mt["stat"], float(value)))
    return out


def _cdf_series(label: str, cdf: dict | None) -> CdfSeries | None:
    if not isinstance(cdf, dict):
        return None
    raw = _l(cdf.get("points"))
    pts = [(float(p[0]), float(p[1])) for p in raw if _pair(p)]
    n, misses = cdf.get("n"), cdf.get("misses")
    return CdfSeries(label, pts, n if isinstance(n, int) else len(pts), misses if isinstance(misses, int) else 0)


def _pair(p) -> bool:
    return isinstance(p, (list, tuple)) and len(p) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in p)


def cdf_charts(r: dict) -> list[str]:
    """TTFT, TPOT and ITL: this run's curve, a baseline's when the result carries one, the
    budgets, and the percentiles exactly as the statistics (and the terminal) report them."""
    budgets = budgets_of(r)
    base = _d(r.get("baseline"))
    out = []
    for metric, name in CDF_METRICS:
        key = f"{metric}_ms"
        series = [s for s in (_cdf_series("this run", _d(r.get("cdf")).get(key)),
                              _cdf_series(str(base.get("label") or "baseline"), _d(base.get("cdf")).get(key)))
                  if s is not None]
        stats = _d(r.get(key))
        marks = [Mark(stat, stats.get(stat), q / 100.0) for stat, q in PERCENTILES.items()
                 if stat in stats and (stats.get(stat) is not None or stats.get("censored"))]
        lines = [BudgetLine(f"{stat}", value, PERCENTILES[stat] / 100.0 if stat in PERCENTILES else None)
                 for stat, value in budgets.get(metric, [])]
        out.append(cdf_chart(name, "ms", series, lines, marks, empty=_why_empty(r, metric)))
    return out


def _why_empty(r: dict, metric: str) -> str:
    if not isinstance(r.get("cdf"), dict):
        return "no per-request data in this result"
    if not r.get("n"):
        return "no request completed"
    if metric != "ttft" and r.get("short_outputs"):
        return f"no values: short outputs ({r['short_outputs']}) are left out"
    return "no values (every request produced < 2 tokens?)"


def _over_budget(req: dict, budgets: dict[str, list[tuple[str, float]]]) -> bool:
    for metric in ("ttft", "tpot", "e2e"):
        v = req.get(f"{metric}_ms")
        if isinstance(v, (int, float)) and any(v > limit for _, limit in budgets.get(metric, [])):
            return True
    return False


def timeline(r: dict) -> str:
    """Every request on the run's time axis, coloured: within budgets, over a budget's limit
    (its TTFT, TPOT or E2E above a budget's value), short output, failed."""
    budgets = budgets_of(r)
    spans, untimed = [], 0
    for req in _l(r.get("requests")):
        if not isinstance(req, dict) or _num(req.get("send_ms")) is None:
            untimed += 1
            continue
        status = str(req.get("status") or "ok")
        if status == "ok" and _over_budget(req, budgets):
            status = "over"
        spans.append(RequestSpan(float(req["send_ms"]), _num(req.get("first_token_ms")),
                                 _num(req.get("last_token_ms")), _num(req.get("end_ms")), status))
    timeline = metric_series(_d(r.get("server")).get("metrics_timeline"))
    return timeline_chart("Requests over the run", spans, timeline, untimed=untimed)


def prompt_scatter(r: dict) -> str:
    """TTFT against prompt length, where the workload's prompt lengths vary (more than one distinct
    length in the request table); the ``by_prompt`` buckets and budgets drawn.  "" otherwise."""
    points = []
    for q in _l(r.get("requests")):
        n = _d(q).get("prompt_tokens")
        if isinstance(n, int) and not isinstance(n, bool):
            points.append(PromptPoint(n, _num(q.get("ttft_ms")), q.get("status") == "failed"))
    if len({p.prompt_tokens for p in points}) < 2:
        return ""
    steps = [BucketStep(float(b["lo"]), _num(b.get("hi")), float(b["budget_ms"]), str(b.get("key", "")))
             for b in _l(_d(r.get("by_prompt")).get("buckets"))
             if isinstance(b, dict) and _num(b.get("lo")) is not None and _num(b.get("budget_ms")) is not None]
    return ttft_scatter("TTFT against prompt length", points, steps)


def metric_series(timeline_data) -> list[MetricSeries]:
    """Queue depth, running requests and KV usage from a ``/metrics`` timeline, when present."""
    if not isinstance(timeline_data, dict):
        return []
    out = []
    for label, fraction, names in TIMELINE_GAUGES:
        for name in names:
            pts = timeline_data.get(name)
            if isinstance(pts, list) and pts:
                clean = [(float(p[0]), float(p[1])) for p in pts if _pair(p)]
                if clean:
                    out.append(MetricSeries(f"{label} ({name})", clean, fraction))
                    break
    return out


def _decode(label: str, roof: dict) -> Decode | None:
    ceiling, eff = roof.get("ceiling_tok_s"), roof.get("decode_efficiency")
    if not isinstance(ceiling, (int, float)) or not isinstance(eff, (int, float)):
        return None
    p95 = roof.get("decode_efficiency_p95")
    return Decode(label, eff * ceiling, p95 * ceiling if isinstance(p95, (int, float)) else None)


def _gate(roof: dict, min_eff: float | None) -> str:
    """The gate's verdict as the judging layer decided it (``core.checks.gates``), never re-judged here."""
    if min_eff is None:
        return "; report only (no minimum set)"
    status = roof.get("status")
    said = {"pass": "met", "fail": "not met", "config_error": "cannot be judged"}.get(str(status), str(status))
    return f"; gate ≥ {min_eff:.2f}: {said}"


def step_roofline(r: dict) -> tuple[str, list[str]] | None:
    """A speculating server's roofline (``roofline.tokens_per_step`` set): the engine steps/s
    against the step ceiling (the judged bar) and the token rate beside it; None otherwise."""
    roof, sd = _d(r.get("roofline")), _d(r.get("spec_decode"))
    tps, sps, eff = _num(roof.get("tokens_per_step")), _num(roof.get("steps_per_s")), _num(roof.get("step_efficiency"))
    if tps is None or sps is None or eff is None or eff <= 0:
        return None
    ceiling = sps / eff
    min_eff = _num(roof.get("min_decode_efficiency"))
    svg = roofline_chart("Decode roofline per engine step", ceiling,
                         [Decode("engine steps", sps), Decode(f"tokens ({tps:.2f} per step)", sps * tps,
                                                              unit="tok/s", judged=False)],
                         min_efficiency=min_eff, unit="steps/s",
                         axis="per stream: engine steps/s (judged) and tok/s = tokens per step × steps/s")
    text = [f"decode = {sps * tps:.1f} tok/s = {tps:.2f} tokens per step × {sps:.1f} steps/s "
            f"(run totals; tokens per step from {sd.get('source') or '?'})"]
    if isinstance(roof.get("arithmetic"), str):
        text.append(f"step ceiling = {roof['arithmetic']} = {ceiling:.1f} steps/s")
    gate = _gate(roof, min_eff)
    text.append(f"step efficiency = {sps:.1f} / {ceiling:.1f} = {eff:.2f}{gate}")
    if isinstance(roof.get("draft"), str):
        text.append(f"drafter: {roof['draft']}")
    rate = _num(sd.get("acceptance_rate"))
    accepted, drafted = _num(sd.get("accepted_tokens")), _num(sd.get("draft_tokens"))
    if rate is not None:
        text.append(f"draft acceptance: {accepted:g} of {drafted:g} drafted tokens = {rate:.0%}"
                    if accepted is not None and drafted is not None else f"draft acceptance: {rate:.0%}")
    if _num(roof.get("decode_efficiency")) is not None:
        text.append(f"per token: {roof['decode_efficiency']:.2f} of the single-token ceiling (not judged: "
                    f"several tokens per step)")
    if isinstance(roof.get("hardware"), str):
        text.append(f"hardware: {roof['hardware']}")
    return svg, text


def roofline(r: dict) -> tuple[str, list[str]]:
    """The chart and its arithmetic, from the gate's figures (completed requests' TPOT); per
    engine step for a speculating server (``step_roofline``)."""
    steps = step_roofline(r)
    if steps is not None:
        return steps
    roof = _d(r.get("roofline"))
    ceiling = roof.get("ceiling_tok_s")
    measured = [d for d in (_decode("this run", roof),) if d is not None]
    min_eff = roof.get("min_decode_efficiency")
    min_eff = float(min_eff) if isinstance(min_eff, (int, float)) else None
    svg = roofline_chart("Decode roofline", ceiling if isinstance(ceiling, (int, float)) else None, measured,
                         min_efficiency=min_eff)
    if not measured:
        return svg, ["Not evaluated: set a roofline (a YAML roofline: mapping, --llm-latency-hardware or "
                     "--llm-latency-min-decode-efficiency) to compare decode with what the hardware can do."]
    d = measured[0]
    text = [f"decode = 1000 / TPOT p50 {1000.0 / d.tok_s:.2f} ms = {d.tok_s:.1f} tok/s (completed requests)"]
    if not isinstance(ceiling, (int, float)) or ceiling <= 0:
        return svg, text + ["no decode ceiling in the results: efficiency not computed"]
    arith = roof.get("arithmetic")
    step = roof.get("model_bytes")
    if isinstance(arith, str):
        text.append(f"ceiling = {arith} = {ceiling:.1f} tok/s")
    elif isinstance(step, (int, float)) and step > 0:
        text.append(f"ceiling = {ceiling * step / 1e9:.0f} GB/s ÷ {format_bytes(step)} per step = {ceiling:.1f} tok/s")
    else:
        text.append(f"ceiling = {ceiling:.1f} tok/s")
    gate = _gate(roof, min_eff)
    text.append(f"efficiency = {d.tok_s:.1f} / {ceiling:.1f} = {d.tok_s / ceiling:.2f}{gate}")
    if d.tok_s_p95 is not None:
        text.append(f"p95: 1000 / TPOT p95 = {d.tok_s_p95:.1f} tok/s = {d.tok_s_p95 / ceiling:.2f} of the ceiling")
    if isinstance(roof.get("hardware"), str):
        text.append(f"hardware: {roof['hardware']}")
    return svg, text


def fingerprint(doc: dict) -> list[tuple[str, str]]:
    """What the results know about the target and the run, URL credentials masked."""
    target = _d(doc.get("target"))
    out = []
    for key, value in target.items():
        if value is None or isinstance(value, (dict, list)):
            continue
        out.append((str(key), redact_url(str(value))))
    hardware = sorted({str(_d(r.get("roofline")).get("hardware")) for r in doc.get("results") or []
                       if isinstance(r, dict) and _d(r.get("roofline")).get("hardware")})
    if hardware:
        out.append(("hardware (roofline)", ", ".join(hardware)))
    for key, label in (("seed", "seed"), ("nonce", "nonce"), ("plugin_version", "pytest-llm-latency")):
        if doc.get(key) is not None:
            out.append((label, str(doc[key])))
    return out


FACTS = (("workload", "workload"), ("class", "class"), ("prompt_tokens", "prompt tokens"),
         ("output_tokens", "output tokens"), ("concurrency", "concurrency"))


def _terminal_text(lines_of, r: dict, skip: int = 1) -> list[str]:
    """The terminal's lines about ``r`` (prefill fit, agent sessions, statistical bounds), word
    for word, without the ``nodeid:`` lead; a malformed part shows nothing rather than failing."""
    try:
        lines = lines_of(r) if lines_of is bound_lines else lines_of([r])
        return [line.strip().split(": ", 1)[-1] if line.startswith("  ") and not line.startswith("    ")
                else line.strip() for line in lines[skip:]]
    except (KeyError, TypeError, ValueError, AttributeError):
        return []


def test_view(r: dict, i: int) -> dict:
    how = _d(r.get("measurement"))
    facts = [(label, r.get(k)) for k, label in FACTS if r.get(k) is not None]
    facts += [("failed / short", f"{r.get('failed_requests', 0)} / {r.get('short_outputs', 0)}")]
    if isinstance(how.get("itl_token_counts"), str):  # core.metrics.COUNT_RULES: how ITL knew k per chunk
        facts.append(("ITL token counts", how["itl_token_counts"]))
    roof_svg, roof_text = roofline(r)
    return {"prefill_text": _terminal_text(prefill_lines, r), "agent_text": _terminal_text(agent_lines, r),
            "bounds_text": _terminal_text(bound_lines, r, skip=0),
            "anchor": f"test-{i}", "nodeid": str(r.get("nodeid")), "verdict": str(r.get("verdict", "?")),
            "verdict_label": verdict_label(r), "messages": messages(r), "facts": facts,
            "cdfs": cdf_charts(r), "timeline": timeline(r), "scatter": prompt_scatter(r),
            "roofline": roof_svg, "roofline_text": roof_text}


def build(doc: dict) -> dict:
    """The template's context."""
    results = [r for r in doc.get("results") or [] if isinstance(r, dict)]
    tests = [test_view(r, i) for i, r in enumerate(results, 1)]
    counts = {v: sum(1 for r in results if r.get("verdict") == v) for v in ("pass", "fail", "error")}
    with_reasoning = reasoned(results)
    return {"fingerprint": fingerprint(doc), "columns": columns(results), "legend": legend(results),
            "counts": counts, "tests": tests,
            "rows": [(t["anchor"], t["verdict"], row(r, with_reasoning)) for t, r in zip(tests, results)]}
