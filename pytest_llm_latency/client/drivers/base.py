"""The ``Driver`` protocol, what a driver is given (``Run``) and what a sample driver returns (``Sent``).

A driver measures a workload and returns a *measurement*: a ``WorkloadResult`` with records,
failures, notes, ``extra`` figures and ``facts``, not yet judged (``core.checks.judge`` does that).
Sample drivers (serial, sequential rounds, closed loop, open loop) only *send* the prepared
samples; the shared pipeline (``pipeline.measure_samples``) prepares prompts, warms up, scrapes
the server and records around them.  Composite drivers (prompt sweep, rate sweep, A/B, server sweep) measure
through another driver."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from ...core.prompts.synthesis import Prompt
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure, WorkloadResult
from ...core.measure.verdict import SequentialVerdicts
from ...core.spec.workload import Workload

ProgressFn = Callable[[int, int], None]
SendOne = Callable[..., "RequestRecord | Failure"]


@dataclass(frozen=True)
class ABArms:
    """The A/B baseline arm, injected by the plugin (it owns process management): ``client_b`` a
    client, or with ``alternate`` a callable starting it; ``start_a`` (re)starts the candidate;
    ``alternate(arm)`` stops an arm's target after its block."""
    client_b: Any
    block_size: int
    start_a: Callable[[], Any] | None = None
    alternate: Callable[[str], None] | None = None


@dataclass(frozen=True)
class SweepArms:
    """A server sweep's arms (``core.spec.server_sweep``), injected by the plugin (``plugin.server_sweep``):
    per arm its spec (``SweepArm``) and a client, or with ``stop`` a callable starting its target (one
    server at a time: ``stop(name)`` stops it after its block); ``block_size`` requests per block."""
    arms: tuple[Any, ...]       # core.spec.server_sweep.SweepArm, in block order
    clients: tuple[Any, ...]    # a client each, or with ``stop`` a starter returning one
    block_size: int
    stop: Callable[[str], None] | None = None


@dataclass(frozen=True)
class Run:
    """One measurement's context: prompt seed, the run's nonce and this measurement's salt context,
    progress, token counter, extra request fields; the injected ``judge`` (a rate sweep's steps, a
    server sweep's arms), ``ab`` and ``sweep`` arms; a trace replay's rows (``trace_rows``: the plugin
    reads the file, a client-layer driver does not)."""
    seed: int = 0
    nonce: str | None = None
    salt_context: str = ""
    progress: ProgressFn | None = None
    counter: Callable[[str], int] | None = None
    extra: dict | None = None
    judge: Callable[[WorkloadResult], WorkloadResult] | None = None
    ab: ABArms | None = None
    sweep: SweepArms | None = None
    trace_rows: tuple | None = None  # a trace replay's rows (core.spec.trace.TraceRow), loaded by the plugin
    # set by the pipeline for a driver that warms up inside ``send`` (``warms_in_send``: worker processes,
    # Ray nodes): the driver calls it once every worker is warmed, for the /metrics "before" reading
    on_ready: Callable[[], None] | None = None
    # a disaggregated target's pools and link (``core.measure.kv_transfer.DisaggTarget``), scraped around the
    # samples for the ``disagg`` part (issue 37); None: one server
    disagg: Any = None


@dataclass
class Sent:
    """What a sample driver sent: outcomes in arrival order, its notes, and what it measured
    while sending (the ``samples: auto`` decisions, the load engine's run)."""
    outcomes: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sequential: SequentialVerdicts | None = None
    load_run: Any = None          # client.load.engine.LoadRun


@runtime_checkable
class Driver(Protocol):
    name: str

    def applies(self, workload: Workload) -> bool:
        """Is this the way to send ``workload``?"""

    def measure(self, client, workload: Workload, run: Run) -> WorkloadResult:
        """Measure ``workload`` on ``client``: a measurement, never a verdict; never raises for a server fault."""


class SampleDriver(Driver, Protocol):
    engine: bool  # True: the load engine (its own lag monitor)

    def send(self, one: SendOne, samples: list[Prompt], workload: Workload, run: Run,
             recover: Callable[[list], None]) -> Sent:
        """Send the prepared samples with ``one(prompt)``."""
