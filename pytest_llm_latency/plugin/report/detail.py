"""Per-request detail for the JSON results and the HTML report (never JUnit): each request's
timestamps and metrics, and the samples behind the TTFT, TPOT and ITL statistics as CDF points
(failed requests are misses, never drawn).  The keys: docs/reports.md#json."""
from __future__ import annotations

import math

from ...core.measure import metrics as m, reasoning
from ...core.spec.prompt_buckets import request_prompt_tokens
from ...core.result.result import WorkloadResult, metric_values
from ...core.measure.stats import percentile

#: CDF points kept per metric: a sample this large or smaller is kept whole (the exact
#: empirical CDF); a larger one (ITL: samples x output tokens) as this many quantiles
CDF_POINTS = 501
CDF_METRICS = ("ttft", "tpot", "itl")


def _ms(t_ns: int | None, t0: int) -> float | None:
    return None if t_ns is None else round((t_ns - t0) / m.NS_PER_MS, 3)


def _r(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else round(v, 4)


def request_rows(res: WorkloadResult) -> list[dict]:
    """Every measured request in send order (docs/reports.md#json); failures with no timestamps
    (nothing was sent) keep ``send_ms`` None.  ``prompt_tokens``: the server's count, else the planned
    length (``core.spec.prompt_buckets.request_prompt_tokens``: what the by-prompt budgets bucket by)."""
    sends = [r.t_send_ns for r in res.records] + [f.t_send_ns for f in res.failures if f.t_send_ns is not None]
    if not sends:
        return [{"status": "failed", "kind": f.kind, "send_ms": None} for f in res.failures]
    t0 = min(sends)
    rows = []
    reasoned = res.measurement.reasoning_requests is not None  # a run that reasoned: every row says how much
    for rec in res.records:
        rows.append({"send_ms": _ms(rec.t_send_ns, t0), "first_token_ms": _ms(rec.t_first_token_ns, t0),
                     "last_token_ms": _ms(rec.t_last_token_ns, t0), "end_ms": _ms(rec.t_end_ns, t0),
                     "ttft_ms": _r(m.ttft_ms(rec)), "tpot_ms": _r(m.tpot_ms(rec)), "e2e_ms": _r(m.e2e_ms(rec)),
                     "prompt_tokens": request_prompt_tokens(rec), "output_tokens": rec.output_tokens,
                     "status": "short" if rec.short_output else "ok"})
        cached = rec.server_timings.get("cache_n", rec.server_timings.get("cached_tokens"))
        if isinstance(cached, int):  # where the server reports it (llama.cpp cache_n, usage cached_tokens)
            rows[-1]["cached_tokens"] = cached
        rows[-1].update(trace_fields(rec.trace))
        if rec.worker is not None:
            rows[-1]["worker"] = rec.worker
        split = reasoning.split(rec) if reasoned else None
        if split is not None:
            rows[-1].update(reasoning_tokens=split.reasoning_tokens, answer_tokens=split.answer_tokens)
    for f in res.failures:
        send = _ms(f.t_send_ns, t0)
        first = None if send is None or f.ttft_ms is None else round(send + f.ttft_ms, 3)
        rows.append({"send_ms": send, "first_token_ms": first, "last_token_ms": _ms(f.t_last_ns, t0)
                     if send is not None else None, "end_ms": _ms(f.t_end_ns, t0) if send is not None else None,
                     "ttft_ms": _r(f.ttft_ms), "status": "failed", "kind": f.kind, **trace_fields(f.trace)})
        if f.prompt_tokens is not None:
            rows[-1]["prompt_tokens"] = f.prompt_tokens
        if f.worker is not None:
            rows[-1]["worker"] = f.worker
    rows.sort(key=lambda r: (r["send_ms"] is None, r["send_ms"] or 0.0))
    return rows


def trace_fields(tag) -> dict:
    """A trace replay's request row: the trace row it replayed (0-based index and file line), its
    session, and the cached tokens the trace declares for it (``core.spec.trace``)."""
    if tag is None:
        return {}
    given = {"session": tag.session, "history_tokens": tag.history_tokens or None,
             "declared_cached_tokens": tag.declared_cached_tokens}
    return {"trace_row": tag.row, "trace_line": tag.line, **{k: v for k, v in given.items() if v is not None}}


def cdf_samples(res: WorkloadResult, points: int = CDF_POINTS) -> dict[str, dict]:
    """``{"ttft_ms": {"n", "misses", "points": [[value, F], ...]}, ...}`` for TTFT, TPOT and ITL.
    Up to ``points`` samples: the empirical CDF (the i-th smallest of n at F = (i+1)/n); more:
    ``points`` quantiles (type 7, as the statistics) at F = 0, 1/(points-1), ..., 1.  Misses
    are counted, never drawn."""
    values = metric_values(res.records, res.failures, res.workload.output_tokens)
    out = {}
    for metric in CDF_METRICS:
        vals = sorted(values.get(metric) or [])
        if not vals:
            continue
        n, misses = len(vals), sum(1 for v in vals if not math.isfinite(v))
        if n <= points:
            pts = [[_r(v), round((i + 1) / n, 6)] for i, v in enumerate(vals) if math.isfinite(v)]
        else:
            pts = []
            for k in range(points):
                q = k / (points - 1)
                v = percentile(vals, 100.0 * q)
                if not math.isfinite(v):
                    break
                pts.append([_r(v), round(q, 6)])
        out[f"{metric}_ms"] = {"n": n, "misses": misses, "points": pts}
    return out


def detail(res: WorkloadResult) -> dict:
    """What the JSON and HTML keep beyond JUnit, for one result: every request and the CDFs
    (the server's gauges over the run are the result's ``server.metrics_timeline``)."""
    return {"requests": request_rows(res), "cdf": cdf_samples(res)}
