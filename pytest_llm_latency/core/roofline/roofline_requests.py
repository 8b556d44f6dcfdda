"""The decode roofline with varied lengths and open loops (issue 27).  Pure.

Per-request ceilings: request r gets its own ceiling at its own context (prompt_r + output_r / 2),
and the run's efficiency is Σ ideal_r ÷ Σ measured_r (p95: the 5th percentile of ideal_r ÷
measured_r); a fixed-length workload keeps the one-context arithmetic of ``core.roofline.ceiling``
(bit-identical).  An open loop's batch is the server's running gauge
(``core.measure.server_model.GAUGES["running"]``) rounded half up, else the client's mean requests in
flight.  See docs/roofline.md#varied-lengths-and-open-loops.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..spec.prompt_buckets import request_prompt_tokens
from ..measure.server_model import GAUGES
from ..measure.stats import percentile

NS_PER_MS = 1e6
#: in the batch's source where the server reports no running gauge (the gate says it as a note)
NO_SERVER_GAUGE = "the server reports no running-requests gauge"


@dataclass(frozen=True)
class RequestDecode:
    context: float        # prompt + output / 2
    tokens: int           # decode tokens: output - 1
    measured_ms: float    # t_last - t_first


@dataclass(frozen=True)
class PerRequest:
    """The per-request combination (see the module docstring)."""
    n: int
    ideal_ms: float
    measured_ms: float
    efficiency: float          # Σ ideal / Σ measured
    efficiency_p95: float      # 5th percentile of ideal_r / measured_r
    ceiling_tok_s: float       # Σ tokens / Σ ideal (s)
    measured_tok_s: float      # Σ tokens / Σ measured (s)
    context_min: float
    context_mean: float
    context_max: float

    def describe(self) -> str:
        return (f"per-request ceilings over {self.n} requests (contexts {self.context_min:g}..{self.context_max:g} "
                f"tokens, mean {self.context_mean:g}): efficiency = Σ ideal decode time {self.ideal_ms:.1f} ms "
                f"÷ Σ measured {self.measured_ms:.1f} ms")


def varied_lengths(workload: Any) -> bool:
    """Do the requests' lengths vary by design (a length distribution, a trace or a mix)?  Then the gate
    judges per-request ceilings; otherwise the one mean context (unchanged arithmetic)."""
    return (getattr(workload, "prompt_dist", None) is not None or getattr(workload, "output_dist", None) is not None
            or getattr(workload, "trace", None) is not None or getattr(workload, "mix", None) is not None)


def request_decodes(records: Sequence[Any], default_prompt: int) -> list[RequestDecode]:
    """The completed requests that decoded (>= 2 tokens, not short), with their context."""
    out = []
    for r in records:
        n = r.output_tokens
        if n < 2 or r.short_output or r.t_first_token_ns is None or r.t_last_token_ns is None:
            continue
        measured = (r.t_last_token_ns - r.t_first_token_ns) / NS_PER_MS
        if measured <= 0:
            continue
        prompt = request_prompt_tokens(r)
        out.append(RequestDecode(float(default_prompt if prompt is None else prompt) + n / 2.0, n - 1, measured))
    return out


def combine(decodes: Sequence[RequestDecode], ceiling_of) -> PerRequest | None:
    """``ceiling_of(context) -> tok/s per stream``; None without a request that decoded."""
    if not decodes:
        return None
    ideal = [d.tokens / ceiling_of(d.context) * 1000.0 for d in decodes]
    sum_ideal, sum_measured = math.fsum(ideal), math.fsum(d.measured_ms for d in decodes)
    tokens = sum(d.tokens for d in decodes)
    per = sorted(i / d.measured_ms for i, d in zip(ideal, decodes))
    contexts = [d.context for d in decodes]
    return PerRequest(n=len(decodes), ideal_ms=sum_ideal, measured_ms=sum_measured,
                      efficiency=sum_ideal / sum_measured, efficiency_p95=percentile(per, 5.0),
                      ceiling_tok_s=tokens / sum_ideal * 1000.0, measured_tok_s=tokens / sum_measured * 1000.0,
                      context_min=min(contexts), context_mean=math.fsum(contexts) / len(contexts),
                      context_max=max(contexts))


def server_running(timeline: Mapping[str, Sequence[Sequence[float]]], end_ms: float | None = None
                   ) -> tuple[float, str, int] | None:
    """(mean, gauge name, samples) of the server's running-requests gauge in the run's timeline
    (``ServerInfo.metrics_timeline``: [[t_ms, value], ...] on the requests' axis), samples from the
    first send (t 0) to ``end_ms`` while something ran (>= 1: the idle gaps of a bursty open loop
    would dilute the batch the requests decoded at); None when the server exports none."""
    for name in GAUGES["running"]:
        pts = [v for t, v in timeline.get(name) or () if t >= 0 and (end_ms is None or t <= end_ms) and v >= 1]
        if pts:
            return math.fsum(pts) / len(pts), name, len(pts)
    return None


def client_in_flight(records: Sequence[Any]) -> float | None:
    """Mean requests in flight as the client measured them, while any was: Σ (end − send) / the time
    covered by at least one request (idle gaps left out, as for the server's gauge)."""
    spans = sorted((r.t_send_ns, r.t_end_ns) for r in records if r.t_end_ns is not None and r.t_end_ns > r.t_send_ns)
    if not spans:
        return None
    covered, start, end = 0, spans[0][0], spans[0][1]
    for s, e in spans[1:]:
        if s > end:
            covered, start, end = covered + end - start, s, e
        else:
            end = max(end, e)
    covered += end - start
    return sum(e - s for s, e in spans) / covered if covered > 0 else None


def open_loop_batch(records: Sequence[Any], timeline: Mapping[str, Sequence[Sequence[float]]]) -> tuple[int, str]:
    """The batch of an open-loop run and what it came from (for the roofline note)."""
    sends = [r.t_send_ns for r in records]
    ends = [r.t_end_ns for r in records if r.t_end_ns is not None]
    end_ms = (max(ends) - min(sends)) / NS_PER_MS if sends and ends else None
    running = server_running(timeline, end_ms)
    if running is not None:
        mean, name, n = running
        batch = max(1, math.floor(mean + 0.5))
        return batch, f"batch {batch} = the server's running requests ({name}, mean {mean:.2f} over {n} samples)"
    flight = client_in_flight(records)
    if flight is None:
        return 1, f"batch 1: {NO_SERVER_GAUGE} and the client measured no request spans"
    batch = max(1, math.floor(flight + 0.5))
    return batch, (f"batch {batch} = the mean requests in flight measured by the client ({flight:.2f}): "
                   f"{NO_SERVER_GAUGE} ({GAUGES['running'][0]}), so the open loop's batch is the client's count")
