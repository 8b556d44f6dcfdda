"""Is the measurement the server's?  A client that fell behind, a prefix cache that served
salted prompts, ITL budgets without per-token counts: each makes the run unjudgeable."""
from __future__ import annotations

from ..measure.prefix_cache import decide as decide_cache, declared
from ..result.result import WorkloadResult
from ..findings import Finding, found


def check_client_health(res: WorkloadResult) -> list[Finding]:
    """A load-engine run whose client fell behind (``client.drivers.load_report.client_health``)."""
    if not res.facts.client_fell_behind:
        return []
    return [Finding("client_health", "error",
                    f"the client fell behind (CPU-starved: lag p99 {res.client.client_lag_ms_p99 or 0:.0f} ms); these "
                    f"figures are not the server's -- give the test process a CPU of its own (fewer pytest-xdist "
                    f"workers, no other load on the runner)")]


def check_workers(res: WorkloadResult) -> list[Finding]:
    """A worker process (``workers: N``, ``client/placement/processes/workers.py``) or a Ray node's shard (``ray:``,
    ``client/placement/ray/shards.py``: a lost node is named) that died, hung, never got ready or
    fell behind: its share of the schedule is missing or mis-timed, so the samples are not the
    workload's -- never a pass on the others' samples."""
    return [Finding("workers", "error", f"{why}: the samples are not the workload's as scheduled, so the run is "
                                        f"not judged") for why in res.facts.workers_failed]


def check_trace_complete(res: WorkloadResult) -> list[Finding]:
    """A trace replay stopped by a rejection every row would get: the rows not sent make it an
    error, whatever ``max_error_rate`` allows -- never a pass on part of the trace."""
    return found("trace", "error", [res.facts.trace_incomplete])


def check_prefix_cache(res: WorkloadResult) -> list[Finding]:
    """Cached prompts fake a fast TTFT: a note, and an error unless the workload shares a prefix
    on purpose (``core.measure.prefix_cache.decide``)."""
    if res.facts.prefix_cache is None:
        return []
    groups = res.workload.shared_prefix_groups
    ev = res.facts.prefix_cache
    expected, declared_by = declared(ev, groups.tokens if groups is not None else None, res.facts.cache_bound_tokens)
    v = decide_cache(ev, shared_prefix_tokens=res.workload.shared_prefix_tokens, expected_tokens=expected,
                    declared_by=declared_by)
    return found("prefix_cache", "note", [v.note]) + found("prefix_cache", "error", [v.error])


def check_token_counts(res: WorkloadResult) -> list[Finding]:
    """ITL budgets on streams whose chunks carry no per-token counts (``facts.per_chunk_itl``): a
    per-chunk figure would fail a correct server, so they cannot be judged."""
    pc = res.facts.per_chunk_itl
    itl = [b.key for b in res.workload.budgets if b.metric == "itl"]
    if pc is None or not itl:
        return []
    return [Finding("token_counts", "error",
                    f"{', '.join(itl)} cannot be judged: {pc.streams} of {pc.total} streams gave no per-chunk token "
                    f"counts and none could be recovered{pc.why}, so ITL there is per chunk, not per token -- ask "
                    f"the server for usage (stream_options include_usage, or vLLM/SGLang continuous_usage_stats), "
                    f"or judge tpot instead of itl")]
