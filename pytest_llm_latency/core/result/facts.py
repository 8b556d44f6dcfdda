"""What a measurement found that the checks decide on (``core.checks``): facts, not verdicts.

Measurement code (``client/``, the plugin's gates and baseline loading) fills
``WorkloadResult.facts``; ``core.checks.judge`` reads them, once, after the run.  A managed
server that died is such a fact (``server_failed``), set before the checks run."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..statuses import GateStatus


@dataclass
class ColdStarts:
    """Cold samples (the server loaded the model inside their TTFT) and the ``cold_ttft_max`` request."""
    numbers: list[int] = field(default_factory=list)   # 1-based sample numbers of the cold samples
    cold: list = field(default_factory=list)           # their RequestRecords
    total: int = 0                                     # samples sent
    outcome: Any = None                                # the cold_ttft_max request: RequestRecord | Failure | None


@dataclass(frozen=True)
class PerChunkItl:
    """Streams whose chunks carried no token counts and none could be recovered (``client.prepare.chunk_counts``):
    ITL there is per chunk, not per token.  ``why``: the recovery's reason, `` (...)`` or ''."""
    streams: int
    total: int
    why: str = ""


@dataclass(frozen=True)
class GateOutcome:
    """A roofline gate's measurement: ``check`` "roofline" or "prefill"; ``status`` the
    measurement's (``config_error``, ``report``) or ``unjudged`` (no figure to evaluate);
    ``message`` its text; ``result`` the measured ``core.roofline.ceiling.RooflineResult`` /
    ``core.roofline.prefill.PrefillResult`` with its floor or budgets, which ``core.checks.gates`` judges;
    ``caveats``: notes shown when the gate passes (a doubtful ceiling)."""
    check: str
    status: GateStatus
    message: str
    result: Any = None
    caveats: tuple[str, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """A regression comparison against a baseline or an A/B arm (``core.measure.compare`` results).
    ``base_totals``: the baseline's decode on run totals (``core.measure.decode_totals.DecodeTotals``;
    None: the baseline stores none), which explains a TPOT/E2E regression; ``fingerprint_changes``:
    what the fingerprints say changed (None: no fingerprint to compare)."""
    label: str
    comparisons: tuple = ()
    base_totals: Any = None
    fingerprint_changes: tuple[str, ...] | None = None
    base_p50: tuple[tuple[str, float], ...] = ()   # the baseline's median ttft/tpot ms (the decode diagnosis)

    def base_median(self, metric: str) -> float | None:
        return dict(self.base_p50).get(metric)


@dataclass(frozen=True)
class AgentRun:
    """Agent sessions as measured (``core.measure.agent_turns.Session``) and the server's counters' reuse."""
    spec: Any
    sessions: tuple = ()
    counters_reuse: float | None = None


@dataclass(frozen=True)
class RateSweepRun:
    """A rate sweep (``core.spec.rate_sweep.SweepResult``) and the first line of why its lowest rate failed."""
    sweep: Any
    lowest_why: str = ""
    capacity_min: float | None = None


@dataclass(frozen=True)
class ServerSweepRun:
    """A server sweep (``core.spec.server_sweep.ServerSweep``) as measured: per arm its spec and its judged
    measurement (every block combined), in block order; ``reported``: the arm whose figures are the test's."""
    sweep: Any
    arms: tuple = ()                      # ((SweepArm, WorkloadResult), ...)
    reported: str = ""
    blocks: int = 0
    block_size: int = 0


@dataclass
class Facts:
    server_failed: bool = False           # a managed server is known to have failed during the run
    server_died: str | None = None        # what it said when it died (redacted)
    cold: ColdStarts | None = None
    prefix_cache: Any = None              # core.measure.prefix_cache.CacheEvidence
    cache_bound_tokens: int | None = None  # trace replay: cached tokens its shared hash_ids explain at most
    trace_incomplete: str | None = None    # trace replay: rows left unsent after a rejection (an error)
    per_chunk_itl: PerChunkItl | None = None  # ITL left per chunk on some streams
    client_fell_behind: bool = False      # a load-engine run whose client fell behind (client.drivers.load_report)
    workers_failed: list[str] = field(default_factory=list)  # workers: N / ray: died, lost, hung, not ready, late
    agent: AgentRun | None = None
    sweep_parts: list = field(default_factory=list)         # prompt sweep: (tag, part WorkloadResult)
    rate_sweep: RateSweepRun | None = None
    server_sweep: ServerSweepRun | None = None              # issue 37: the arms, judged (core.checks.arm_sweep)
    baseline_target_empty: str | None = None                # A/B: the baseline target measured nothing
    # A/B: the baseline target's measurement, every block combined (core.result.blocks): its validity (a client
    # that fell behind, a prefix cache, cold starts, per-chunk ITL) is the run's (core.checks.ab_arm)
    baseline_target_arm: Any = None
    gates: list[GateOutcome] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    # issue 37: the whole run's prefill windows (core.measure.prefill_overlap.PrefillWindow), set when res is one
    # class of a mixed workload: its streams were stalled by every class's prefills, not only its own class's
    prefill_windows: list | None = None
    # the prefill windows of requests sent but not measured (a closed loop's ramp-up and drain): their long
    # prompts stalled the measured streams too (index 0: not in the request table)
    unmeasured_windows: list = field(default_factory=list)
    # the whole run's requests in send order, set with prefill_windows: a class's stall figures name requests by
    # their number in the run's request table, not their class's
    request_order: list | None = None
    # the client's lag-monitor stalls on the stamps' clock (core.measure.bunching.StallTimeline;
    # client.drivers.load_report.client_summary): the gaps the client itself made (core.checks.stalls)
    client_stalls: Any = None
