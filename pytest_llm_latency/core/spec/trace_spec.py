"""The ``trace*`` keys of a workload (issue 27; the replay itself: ``core.spec.trace``): ``TraceSpec``,
its parsing, and what a trace workload does not take.  Pure stdlib.

``trace: PATH`` (a Mooncake JSONL file, optionally gzip; relative to the SLO file's folder for a
YAML workload, to the test file's folder for the marker and ``measure()``), ``trace_speed``
(> 0, default 1: offsets and delays divided by it), ``trace_rows`` (>= 1: the first N rows after
``trace_start_ms``), ``trace_start_ms`` (>= 0: sessions whose first turn is before it are
skipped; offsets count from it), ``trace_overlong`` (error | skip | clip: a row beyond the
server's context), ``trace_block_tokens`` (>= 1, default 512: tokens per hash id).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Mapping

from .agent_spec import AGENT_KEYS
from .budgets import did_you_mean
from ..errors import ConfigError

TRACE_KEYS = ("trace", "trace_speed", "trace_rows", "trace_start_ms", "trace_overlong", "trace_block_tokens")
OVERLONG = ("error", "skip", "clip")


@dataclass(frozen=True)
class TraceSpec:
    """The ``trace*`` keys of a workload.  ``path`` as written: relative to the SLO file's
    folder (YAML) or the test file's folder (marker), resolved when loaded."""
    path: str
    speed: float = 1.0
    rows: int | None = None
    start_ms: float = 0.0
    overlong: str = "error"
    block_tokens: int = 512

    @property
    def name(self) -> str:
        return PurePath(self.path).name


def is_number(v: Any) -> bool:
    """A finite int or float, not a bool."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def parse_trace_spec(spec: Mapping[str, Any], where) -> TraceSpec | None:
    """The ``trace*`` keys of a workload spec (None without ``trace:``); ``where(path)`` turns
    a key path into a location (``core.spec.workload.make_workload``)."""
    if spec.get("trace") is None:
        extra = [k for k in TRACE_KEYS[1:] if k in spec]
        if extra:
            raise ConfigError(f"{where((extra[0],))}: {extra[0]} shapes a trace replay, but the workload has no "
                              f"trace -- set trace: PATH (a Mooncake JSONL file) or drop {extra[0]}")
        return None
    path = spec["trace"]
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"{where(('trace',))}: expected the path of a Mooncake JSONL trace (.jsonl or .jsonl.gz), "
                          f"got {path!r} -- give a path relative to the SLO file's (or test file's) folder")
    speed = spec.get("trace_speed", 1.0)
    if not is_number(speed) or speed <= 0:
        raise ConfigError(f"{where(('trace_speed',))}: expected a number > 0, got {speed!r} -- 1 replays the trace "
                          f"as recorded, 2 twice as fast (offsets and delays halved), 0.5 at half speed")
    rows = spec.get("trace_rows")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
        raise ConfigError(f"{where(('trace_rows',))}: expected an integer >= 1, got {rows!r} -- give how many "
                          f"rows to replay (the first N after trace_start_ms), or drop it for all")
    start = spec.get("trace_start_ms", 0.0)
    if not is_number(start) or start < 0:
        raise ConfigError(f"{where(('trace_start_ms',))}: expected a number of ms >= 0, got {start!r} -- rows "
                          f"whose timestamp is before it are skipped, and offsets are counted from it")
    overlong = spec.get("trace_overlong", "error")
    if overlong not in OVERLONG:
        hint = did_you_mean(overlong, OVERLONG) if isinstance(overlong, str) else ""
        raise ConfigError(f"{where(('trace_overlong',))}: expected one of {', '.join(OVERLONG)}, got {overlong!r}"
                          f"{hint} -- what a row beyond the server's context does: error (the default), skip it, "
                          f"or clip its prompt")
    block = spec.get("trace_block_tokens", 512)
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ConfigError(f"{where(('trace_block_tokens',))}: expected an integer >= 1, got {block!r} -- the "
                          f"tokens per hash id the trace was made with (512 for Mooncake's traces)")
    return TraceSpec(path=path, speed=float(speed), rows=rows, start_ms=float(start), overlong=overlong,
                     block_tokens=block)


#: keys a trace workload does not take: the trace gives each request's lengths, arrival time and
#: sharing, and its rows are the requests -> what to do instead
TRACE_CLASHES = {
    **dict.fromkeys(("prompt_tokens", "output_tokens"), "the rows give each request's input_length and "
                    "output_length"),
    **dict.fromkeys(("rate", "arrival", "burstiness", "concurrency", "ramp_up", "rate_sweep", "duration"),
                    "the rows give each request's arrival (timestamp, delay); replay faster or slower with "
                    "trace_speed, fewer rows with trace_rows or trace_start_ms"),
    **dict.fromkeys(("samples", "requests", "min_samples", "max_samples"),
                    "the rows are the requests, one each; replay fewer with trace_rows"),
    **dict.fromkeys(("shared_prefix_tokens", "shared_prefix_groups", "system_prompt_tokens"),
                    "the rows' hash_ids declare which prompt blocks are shared"),
    "baseline_target": "an A/B run interleaves blocks of fixed-length samples; replay the trace against each "
                       "target in turn and compare them with the deploy gate (--llm-latency-baseline)",
    **dict.fromkeys(("prompt_sweep",) + AGENT_KEYS, "a trace replays its own sessions (session_id, delay); "
                    "a prompt sweep or an agent session is a workload of its own"),
}


def trace_workload_spec(spec: Mapping[str, Any], where) -> tuple[TraceSpec | None, Mapping[str, Any]]:
    """The workload's trace, and ``spec`` made ready for a trace workload: class ``custom``, the
    lengths 1 (placeholders: each request's come from its row); ``samples`` stays the default
    (the driver sets it to the rows loaded).  A clashing key is an error (``core.spec.workload.make_workload``)."""
    trace = parse_trace_spec(spec, where)
    if trace is None:
        return None, spec
    for key, instead in TRACE_CLASHES.items():
        if key in spec:
            raise ConfigError(f"{where((key,))}: a trace workload does not take {key}: {instead} -- drop {key}")
    if spec.get("class", "custom") != "custom":
        raise ConfigError(f"{where(('class',))}: a trace workload has no class ({spec['class']!r} gives lengths "
                          f"the trace's rows replace) -- drop class and give its budgets in slo: (e.g. "
                          f"{{ttft_p95: 500ms, tpot_p95: 50ms}})")
    return trace, {**spec, "class": "custom", "prompt_tokens": 1, "output_tokens": 1}
