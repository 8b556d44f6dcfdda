"""Result parts about traffic that shares one server (issue 37): the stall long prefills impose on the
streams beside them.  Parts as in ``core.result.result_parts`` (``core.result.part.Part``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .part import Part


@dataclass
class StallInfo(Part):
    """The gaps of every stream split into those that overlapped another request's prefill of at least
    ``stall_prompt_tokens`` prompt tokens (stall gaps) and the others (clean gaps), with what caused them
    (``core.measure.prefill_overlap``; written by ``core.checks.stalls``)."""
    NAME: ClassVar[str] = "stall"
    stall_prompt_tokens: int | None = None     # a prefill of at least this many prompt tokens is long
    long_prefills: int | None = None           # requests whose prompt was long (their windows)
    long_prompt_tokens_p50: float | None = None
    long_window_ms_p50: float | None = None    # send to first token of the long requests
    stall_gaps: int | None = None
    clean_gaps: int | None = None
    client_gaps: int | None = None             # left out of both: the client's own stall made them
    stall_ms_mean: float | None = None         # every statistic a stall budget takes (itl_stall_<stat>, stall_max):
    stall_ms_p50: float | None = None          # a class's budget row reads the figure it was judged on here
    stall_ms_p90: float | None = None
    stall_ms_p95: float | None = None
    stall_ms_p99: float | None = None
    stall_ms_max: float | None = None
    clean_ms_p50: float | None = None
    clean_ms_p99: float | None = None
    stalls: int | None = None                  # stall gaps longer than twice the clean gaps' p99 (all streams)
    stalls_per_min: float | None = None        # ... per minute of the run (first send to last end)
    worst_request: int | None = None           # the stream of the longest stall gap (request table number)
    worst_cause: str | None = None             # the class whose prefill it overlapped ("other requests": none)
    worst_cause_request: int | None = None     # that prefill's request (in the whole run's send order)
    worst_cause_prompt_tokens: int | None = None
    worst_per_stream: list[dict] = field(default_factory=list)  # {request, stall_ms, stall_gaps}
    causes: list[dict] = field(default_factory=list)  # {cause, gaps, share, prefills, prompt_tokens_p50, ...}
    windows: str | None = None                 # this result's requests | the whole mixed run's
