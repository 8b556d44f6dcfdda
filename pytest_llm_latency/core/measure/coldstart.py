"""Cold model loads: which requests paid one (Ollama's ``load_duration``, kept as
``server_timings["load_ms"]``), what a workload does with them (``cold_starts``: exclude | include |
fail) and the ``cold_ttft_max`` budget (the first request after an unload, on purpose); see
docs/servers.md#cold-starts.  Pure: no I/O.
"""
from __future__ import annotations

from .record import RequestRecord

#: a request whose reported load took longer than this was a cold start (warm: a few ms)
COLD_LOAD_MS = 100.0
COLD_STARTS = ("exclude", "include", "fail")
COLD_BUDGET = "cold_ttft_max"


def load_ms(rec: RequestRecord) -> float | None:
    v = rec.server_timings.get("load_ms")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def is_cold(rec: RequestRecord) -> bool:
    load = load_ms(rec)
    return load is not None and load > COLD_LOAD_MS


def split(records: list[RequestRecord]) -> tuple[list[int], list[RequestRecord]]:
    """(1-based sample numbers, records) of the cold samples, in order."""
    cold = [(i, r) for i, r in enumerate(records, 1) if is_cold(r)]
    return [i for i, _ in cold], [r for _, r in cold]


def describe(numbers: list[int], cold: list[RequestRecord], total: int, mode: str) -> str:
    """The note naming the cold samples, and what was done with them."""
    loads = ", ".join(f"#{i} {load_ms(r):.0f} ms" for i, r in zip(numbers[:5], cold[:5]))
    more = f" and {len(cold) - 5} more" if len(cold) > 5 else ""
    what = {"exclude": "excluded from the statistics (cold_starts: exclude)",
            "include": "kept in the statistics (cold_starts: include)",
            "fail": "the workload allows none (cold_starts: fail)"}[mode]
    return (f"{len(cold)} of {total} samples were cold starts: the server loaded the model inside their TTFT "
            f"(load_duration: {loads}{more}); {what} -- the server unloaded the model during the run although "
            f"every request asks it to stay (keep_alive): is another client unloading it, or memory short?")


def cold_request_outcome(rec: RequestRecord, ttft_ms: float | None, limit_ms: float) -> tuple[str | None, str | None]:
    """The ``cold_ttft_max`` request: (failed check, error) -- both None when it passes."""
    load = load_ms(rec)
    if load is None or load <= COLD_LOAD_MS:
        shown = "no load_duration" if load is None else f"load_duration {load:.0f} ms"
        return None, (f"{COLD_BUDGET}: the request after unloading the model (keep_alive 0) was not a cold start "
                      f"({shown}, a cold start reports > {COLD_LOAD_MS:g} ms), so the budget cannot be judged -- "
                      f"does the server unload on keep_alive: 0 (Ollama does)?")
    if ttft_ms is None:
        return None, f"{COLD_BUDGET}: the cold-start request produced no token"
    if ttft_ms > limit_ms:
        return (f"cold-start TTFT {ttft_ms:.1f} ms > budget {COLD_BUDGET} {limit_ms:g} ms (the first request after "
                f"an unload; model load {load:.0f} ms reported as load_duration)"), None
    return None, None
