"""The typed parts of a workload's result, beside its summaries and verdict (``core.result.result``).

Each part (``core.result.part.Part``) is a plain dataclass whose field names are the keys of its object in the results
JSON (``data/results.schema.json``, version 3): ``result.load.throughput_rps`` is
``results[i].load.throughput_rps``.  A field that is None (or an empty dict/list) was not
measured and is left out of the JSON.  ``set(**figures)`` refuses a name the part has not
got, so a misspelled writer fails at once instead of writing a key nobody reads.

One serialization: ``to_json`` / ``from_json`` (same field names; a non-finite float, a miss, is
None: JSON has no Infinity).  ``docs/result-json.md`` maps every version-1 ``extra`` key here."""
from __future__ import annotations

import copy as _copy
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar
from ..statuses import BaselineStatus, GateStatus
from .part import Part, unset as _unset
from .mix_parts import MixInfo
from .disagg_parts import DisaggInfo
from .traffic_parts import StallInfo
from .sweep_parts import ArmsInfo


@dataclass
class Measurement(Part):
    """How the samples were taken: the run's nonce, sampling mode and why it stopped, how
    prompt lengths were counted, how ITL knew the tokens per chunk, and how many output tokens
    were reasoning."""
    NAME: ClassVar[str] = "measurement"
    nonce: str | None = None
    samples_mode: str | None = None            # fixed | auto
    stop_reason: str | None = None
    min_samples: int | None = None
    max_samples: int | None = None
    measure_start_ns: int | None = None        # wall clock (time.time_ns) around the measurement
    measure_end_ns: int | None = None
    api: str | None = None                     # the streaming API that measured (client.APIS: openai-chat...)
    prompt_counter: str | None = None          # tokenize endpoint, or a probe estimate corrected
    prompt_deviation_requests: int | None = None
    prompt_exact_requests: int | None = None
    itl_token_counts: str | None = None        # core.measure.metrics.COUNT_RULES, or each rule with its streams
    retries: int | None = None                 # 429/503 retries of requests that then succeeded
    xdist_worker: str | None = None            # the pytest-xdist worker that measured it (gw0...); version 2: worker
    # reasoning models (core.measure.reasoning); left out when no response reasoned
    reasoning_tokens: int | None = None        # Σ reasoning tokens of the completed requests
    answer_tokens: int | None = None           # Σ (output tokens − reasoning tokens)
    reasoning_share: float | None = None       # reasoning ÷ (reasoning + answer)
    reasoning_requests: int | None = None      # responses that reasoned
    reasoning_source: str | None = None        # server | stream, or each with its responses
    # issue 36: the reasoning fields sent in every request's body (core.spec.request_fields), as sent
    request_fields: dict = field(default_factory=dict)
    trace: str | None = None                   # trace replay: what was replayed (core.spec.trace.describe)
    stamp: str | None = None                   # kernel | read: how token reads were stamped (core.measure.stamp_bounds)


@dataclass
class LoadInfo(Part):
    """The offered load and what the server sustained (load engine, A/B, rate sweep)."""
    NAME: ClassVar[str] = "load"
    load_mode: str | None = None
    offered_rate_rps: float | None = None
    arrival: str | None = None
    window_s: float | None = None
    throughput_rps: float | None = None
    output_tok_s: float | None = None
    goodput_rps: float | None = None
    goodput_fraction: float | None = None
    fluidity_index: float | None = None
    itl_ms_p99_under_load: float | None = None  # None: a miss (+inf)
    ramp_excluded: int | None = None
    drain_excluded: int | None = None
    ab_blocks: int | None = None
    ab_block_size: int | None = None
    ab_mode: str | None = None                 # interleaved | alternating
    rate_sweep_steps: int | None = None             # rate sweep (load.rate_sweep)
    rate_sweep_capacity_rps: float | None = None
    rate_sweep_lowest_failing_rps: float | None = None
    trace: str | None = None                   # trace replay: the file replayed (its name)
    trace_rows: int | None = None              # rows replayed (after trace_start_ms, trace_rows, trace_overlong)
    trace_sessions: int | None = None          # sessions of more than one turn among them
    trace_speed: float | None = None
    workers: int | None = None                 # workers: N | auto: the worker processes that sent the load
    workers_reason: str | None = None          # why that many (core.spec.worker_sizing): given, or auto's arithmetic
    worker_lag: list[dict] = field(default_factory=list)  # per worker: {worker, requests, send_lag_ms_p99, ...}


@dataclass
class ClientHealth(Part):
    """Was the client able to keep up: its scheduling lag, events per read, bunched chunks,
    connects (``client/drivers/load_report.py``)."""
    NAME: ClassVar[str] = "client"
    client_lag_ms_p50: float | None = None
    client_lag_ms_p90: float | None = None
    client_lag_ms_p99: float | None = None
    client_lag_ms_max: float | None = None
    client_send_lag_ms_p99: float | None = None
    events_per_read: float | None = None
    client_fell_behind: int | None = None      # 0 | 1
    stamp_bound_ms_p99: float | None = None    # how wrong a token's stamp can be (core.measure.stamp_bounds)
    stamp_bound_ms_max: float | None = None
    read_delay_ms_p99: float | None = None     # kernel stamps: the client's own delay per read
    read_delay_ms_max: float | None = None
    client_limited: int | None = None          # 0 | 1: the client, not a proxy, bunched the tokens
    burst_chunks: int | None = None
    bursts_client: int | None = None           # reads that delivered bunched chunks while the client stalled
    bursts_upstream: int | None = None         # ... while the client ran on time (a proxy or the server)
    connect_samples: int | None = None
    reconnected_samples: int | None = None
    connect_ms_p50: float | None = None


@dataclass
class ServerInfo(Part):
    """The server's own view: ``/metrics`` figures (``core.measure.server_model.ServerView``), its
    per-response timings, the counter deltas and the gauges over time."""
    NAME: ClassVar[str] = "server"
    server_waiting_max: float | None = None
    server_waiting_mean: float | None = None
    server_running_max: float | None = None
    server_running_mean: float | None = None
    server_kv_usage_max: float | None = None
    server_prefix_hit_rate: float | None = None
    server_prefix_queries: float | None = None
    server_preemptions: float | None = None
    server_queue_ms_p50: float | None = None
    server_queue_ms_p95: float | None = None
    server_queue_ms_mean: float | None = None
    server_prefill_ms_p50: float | None = None
    server_prefill_ms_p95: float | None = None
    server_prefill_ms_mean: float | None = None
    server_ttft_ms_p50: float | None = None
    server_ttft_ms_p95: float | None = None
    server_ttft_ms_mean: float | None = None
    server_itl_ms_p50: float | None = None
    server_itl_ms_p95: float | None = None
    server_tpot_ms_p50: float | None = None    # per-response timings (llama.cpp predicted_per_token_ms)
    server_scrapes: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)   # /metrics deltas and final gauges
    metrics_timeline: dict[str, list] = field(default_factory=dict)  # gauge -> [[t_ms, value], ...]


@dataclass
class PrefixCacheInfo(Part):
    NAME: ClassVar[str] = "prefix_cache"
    cached_tokens: int | None = None           # prompt tokens the server served from its cache
    expected_cached_tokens: int | None = None  # of which shared_prefix_groups or a trace declares at most


@dataclass
class ColdStartInfo(Part):
    NAME: ClassVar[str] = "cold_start"
    cold_starts: int | None = None             # samples that were cold model loads
    cold_start_samples: str | None = None      # their 1-based numbers, comma-separated
    cold_ttft_ms: float | None = None          # the cold_ttft_max request
    cold_load_ms: float | None = None


@dataclass
class RooflineInfo(Part):
    """The decode roofline gate (``plugin/roofline_gate.py``)."""
    NAME: ClassVar[str] = "roofline"
    status: GateStatus | None = None
    ceiling_tok_s: float | None = None
    decode_efficiency: float | None = None
    decode_efficiency_p95: float | None = None
    hardware: str | None = None
    model_bytes: float | None = None
    kv_cache: str | None = None
    min_decode_efficiency: float | None = None
    arithmetic: str | None = None
    # speculative decoding / MTP (core.measure.spec_decode): judged per engine step, not per token
    tokens_per_step: float | None = None       # from res.spec_decode
    step_efficiency: float | None = None       # (decode tok/s ÷ tokens per step) × bytes per step ÷ bandwidth
    steps_per_s: float | None = None           # engine steps per second (run totals)
    draft_bytes: float | None = None           # the drafter's bytes read per engine step (0: n-gram / none)
    draft: str | None = None                   # what the drafter's bytes came from, or "not counted: why"
    # issue 27: an open loop's batch (the server's running gauge, else the client's in-flight mean) and the
    # per-request combination of varied lengths (core.roofline.roofline_requests); left out otherwise
    batch: int | None = None
    batch_source: str | None = None
    combination: str | None = None
    message: str | None = None
    # issue 40: the floor's bandwidth (datasheet | measured), both figures where the GPU was probed, and the
    # ranked diagnosis (core.roofline.decode_diagnosis: [{reason, status, evidence}], likely first)
    efficiency_of: str | None = None
    datasheet_gb_s: float | None = None
    measured_gb_s: float | None = None
    decode_efficiency_datasheet: float | None = None
    decode_efficiency_measured: float | None = None
    diagnosis: list[dict[str, str]] | None = None


@dataclass
class SpecDecodeInfo(Part):
    """Speculative decoding / MTP over the run (``core.measure.spec_decode``: the one definition): tokens
    per engine step and the draft acceptance, and which source they came from."""
    NAME: ClassVar[str] = "spec_decode"
    source: str | None = None                  # core.measure.spec_decode.SOURCE_*
    scope: str | None = None                   # run (counter deltas) | window (server's gauges) | per request
    decode_tokens: int | None = None           # Σ (output tokens − 1)
    decode_steps: float | None = None          # decode tokens − accepted tokens
    accepted_tokens: float | None = None
    draft_tokens: float | None = None
    drafts: float | None = None                # drafting steps (vLLM/llama.cpp counters)
    tokens_per_step: float | None = None       # decode tokens ÷ decode steps
    acceptance_rate: float | None = None       # accepted ÷ drafted tokens
    decode_ms: float | None = None             # Σ (t_last − t_first)
    step_ms: float | None = None               # decode_ms ÷ decode steps (run totals)


@dataclass
class PrefillInfo(Part):
    """The prefill roofline of a prompt sweep (``core.roofline.prefill.PrefillResult.as_properties``)."""
    NAME: ClassVar[str] = "prefill"
    TRANSIENT: ClassVar[tuple[str, ...]] = ("points",)
    status: GateStatus | None = None
    tok_s: float | None = None
    overhead_ms: float | None = None
    lengths: str | None = None
    samples: int | None = None
    residual_mad_ms: float | None = None
    residual_max_ms: float | None = None
    linearity: str | None = None
    budget_min_prefill_efficiency: float | None = None
    budget_prefill_tps_min: float | None = None
    budget_ttft_overhead_max_ms: float | None = None
    gflop_per_token: float | None = None
    attention: str | None = None
    hardware: str | None = None
    peak_tflops: float | None = None
    ceiling_tok_s: float | None = None
    mfu: float | None = None
    server_source: str | None = None
    server_tok_s: float | None = None
    server_overhead_ms: float | None = None
    server_reported_tok_s: float | None = None
    message: str | None = None
    points: list | None = None                 # the sweep's (prompt tokens, TTFT) points, for the gate


@dataclass
class BaselineComparison(Part):
    """Against a saved baseline or the other arm of an A/B pair (``plugin/baseline.py``); the
    HTML report overlays ``cdf``."""
    NAME: ClassVar[str] = "baseline"
    TRANSIENT: ClassVar[tuple[str, ...]] = ("fingerprint",)  # written as the result's own ``fingerprint``
    status: BaselineStatus | None = None
    label: str | None = None
    comparisons: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    cdf: dict[str, dict] = field(default_factory=dict)
    fingerprint_changes: list[str] = field(default_factory=list)
    explanation: str | None = None             # a TPOT/E2E regression split into step time and tokens per step
    fingerprint: dict | None = None            # this run's (plugin/baseline.fingerprint)


@dataclass
class AgentSessions(Part):
    """Multi-turn agent sessions (``core.checks.agent_sessions``); ``turns``: one row per turn index."""
    NAME: ClassVar[str] = "agent"
    sessions: int | None = None
    sessions_completed: int | None = None
    steps: int | None = None
    prefix_reuse: float | None = None
    prefix_reuse_source: str | None = None     # per request | server counters
    turn1_cached_tokens_max: int | None = None
    turn_ttft_ms_p50: float | None = None
    turn_ttft_ms_p95: float | None = None
    session_e2e_ms_p50: float | None = None
    session_e2e_ms_p95: float | None = None
    tool_call_complete_ms_p50: float | None = None
    tool_call_complete_ms_p95: float | None = None
    tool_call_turns: int | None = None
    tools_overhead_tokens: int | None = None
    turns: list[dict] = field(default_factory=list)  # {"turn", "reuse", "ttft_ms_p50", ...}

    def turn(self, k: int) -> dict:
        """The row of turn ``k`` (1-based), created in order."""
        for row in self.turns:
            if row.get("turn") == k:
                return row
        row = {"turn": k}
        self.turns.append(row)
        self.turns.sort(key=lambda r: r["turn"])
        return row


@dataclass
class PromptBuckets(Part):
    """TTFT budgets per prompt-length bucket (``core.checks.by_prompt``): one row per bucket of each
    ``ttft_<stat>_by_prompt`` budget -- ``key`` (``ttft_p95_by_prompt[<1024]``), ``budget``, ``bucket``,
    ``lo``/``hi`` (the half-open token range; hi null: open top), ``budget_ms``, ``n``, ``status``
    (pass | fail | inconclusive | not_judged: empty | too_few | no_bucket: the requests above every
    bucket, with their ``requests`` numbers in the request table and the ``longest`` prompt),
    ``estimate_ms``, the bounds."""
    NAME: ClassVar[str] = "by_prompt"
    length_source: str | None = None           # server count | planned | both, with counts
    buckets: list[dict] = field(default_factory=list)


@dataclass
class StructuredInfo(Part):
    """Structured output (issue 36, ``core.measure.structured``): the schema, its violations, the lengths
    constrained decoding produced, and the TPOT overhead against the unconstrained twins (when asked)."""
    NAME: ClassVar[str] = "structured"
    schema: str | None = None                  # the JSON Schema file, resolved
    schema_violations: int | None = None       # constrained answers not valid for it (failed: schema_violation)
    output_tokens_min: int | None = None       # the completed constrained answers' lengths (server count)
    output_tokens_p50: float | None = None
    output_tokens_max: int | None = None
    tpot_ms_p50: float | None = None           # the constrained requests'
    comparison_requests: int | None = None     # unconstrained twins completed
    comparison_failed: int | None = None       # unconstrained twins that failed (left out of the comparison)
    comparison_tpot_ms_p50: float | None = None
    tpot_overhead: float | None = None         # tpot_ms_p50 ÷ comparison_tpot_ms_p50 − 1
    tpot_overhead_max: float | None = None     # the budget (structured_tpot_overhead_max)


#: every part, in the order the JSON writes them
PARTS: tuple[type[Part], ...] = (Measurement, LoadInfo, ClientHealth, ServerInfo, PrefixCacheInfo, ColdStartInfo,
                                 RooflineInfo, PrefillInfo, BaselineComparison, AgentSessions, SpecDecodeInfo,
                                 PromptBuckets, StructuredInfo, MixInfo, DisaggInfo, StallInfo, ArmsInfo)
PART_NAMES: tuple[str, ...] = tuple(p.NAME for p in PARTS)


@dataclass(kw_only=True)
class WithParts:
    """The typed parts, each under its ``NAME``: a ``WorkloadResult``'s and a parsed result entry's
    (``plugin.report.entry.ResultEntry``)."""
    measurement: Measurement = field(default_factory=Measurement)
    load: LoadInfo = field(default_factory=LoadInfo)
    client: ClientHealth = field(default_factory=ClientHealth)
    server: ServerInfo = field(default_factory=ServerInfo)
    prefix_cache: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)
    cold_start: ColdStartInfo = field(default_factory=ColdStartInfo)
    roofline: RooflineInfo = field(default_factory=RooflineInfo)
    prefill: PrefillInfo = field(default_factory=PrefillInfo)
    baseline: BaselineComparison = field(default_factory=BaselineComparison)
    agent: AgentSessions = field(default_factory=AgentSessions)
    spec_decode: SpecDecodeInfo = field(default_factory=SpecDecodeInfo)
    by_prompt: PromptBuckets = field(default_factory=PromptBuckets)
    structured: StructuredInfo = field(default_factory=StructuredInfo)
    mix: MixInfo = field(default_factory=MixInfo)
    disagg: DisaggInfo = field(default_factory=DisaggInfo)
    stall: StallInfo = field(default_factory=StallInfo)
    arms: ArmsInfo = field(default_factory=ArmsInfo)


def copy_parts(src: Any, dst: Any) -> None:
    """What result ``src``'s parts measured, onto result ``dst`` (copies; a field ``src`` has
    not got keeps ``dst``'s value), as ``dict.update`` did for the old ``extra``."""
    for name in PART_NAMES:
        mine, theirs = getattr(dst, name), getattr(src, name)
        for f in fields(theirs):
            v = getattr(theirs, f.name)
            if not _unset(v):
                setattr(mine, f.name, _copy.deepcopy(v))
