"""The ``Placement`` protocol: where a workload's requests run, and the arithmetic every placement
shares (``Shares``).  Its three implementations: ``local.py`` (this process), ``processes/``
(worker processes of this host), ``ray/`` (one per node of a Ray cluster)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Protocol, runtime_checkable

from ...core.spec.workload import Workload
from . import shares as _shares

if TYPE_CHECKING:
    from ...core.spec.worker_sizing import WorkerSizing
    from ..load.engine import LoadRun

PlacementKind = Literal["local", "processes", "ray"]


@runtime_checkable
class RoundPool(Protocol):
    """The one protocol of shards held for ``samples: auto`` rounds (``Placement.pool``): a context
    manager whose ``send_round(start, batch)`` deals a round's prompts over the ``live()`` shards and
    gives their outcomes back in prompt order, ``failures`` (shard index -> why it was lost) and
    ``load_run()`` (the rounds as one run).  ``processes.pool.WorkerPool`` and ``ray.pool.RayPool``."""
    failures: dict[int, str]

    def __enter__(self) -> "RoundPool": ...

    def __exit__(self, *exc: Any) -> None: ...

    @property
    def live(self) -> list[int]: ...

    def send_round(self, start: int, batch: list) -> list: ...

    def load_run(self) -> "LoadRun": ...


@dataclass(frozen=True)
class Shares:
    """The shards after the controller's warm-up: how many, whether the work is dealt (a Ray
    cluster's single node still is; one worker process sized by ``auto`` is not), and why
    (``core.spec.worker_sizing.WorkerSizing``: ``load.workers_reason``; None where nothing was sized)."""
    count: int
    dealt: bool
    sizing: "WorkerSizing | None" = None


@dataclass(frozen=True)
class Placement:
    """Where ``workload``'s requests run.  A driver asks what it needs without testing which placement
    it has: whether the work is dealt (``dealt``), over how many shards before and after the warm-up
    (``count``, ``planned``, ``over``, ``shares``), the shards' warm-up prompts (``spare_prompts``),
    and how shards are run and merged (``run``: one ``client.load.engine.LoadRun``; a closed loop's books
    shared as the placement keeps them) or pooled for rounds (``pool``)."""
    kind: ClassVar[PlacementKind]
    workload: Workload

    @property
    def dealt(self) -> bool:
        """Is the work dealt over shards (worker processes or Ray nodes), not sent by this process?"""
        return True

    def count(self) -> int:
        """The shards before any warm-up: ``workers: N``; ``auto`` taken as on this host; Ray: every live node."""
        return _shares.worker_count(self.workload)

    def planned(self) -> int:
        """The most shards the work may be dealt to (the prompts prepared follow it)."""
        return _shares.planned_workers(self.workload)

    def spare_prompts(self) -> int:
        """The shards' own warm-up prompts, prepared after the samples (``deal.warmup_cut``)."""
        return self.workload.warmup * self.planned() if self.dealt else 0

    def over(self, limit: int | None = None) -> Shares:
        """The shards before any warm-up, at most ``limit`` (a closed loop's streams, an agent run's
        sessions in flight): dealt over more than one shard (Ray: always)."""
        n = max(min(self.count(), limit if limit is not None else self.count()), 1)
        return Shares(n, n > 1)

    def shares(self, base_url: str | None, warmed: list) -> Shares:
        """The shards after the controller's warm-up (``warmed``: its outcomes): sized
        (``shares.sizing_for``: ``N`` as given, ``auto`` by the warm-up's token rate, at most
        ``planned``); one process where there is nothing to size."""
        if getattr(self.workload, "workers", 1) == 1:
            return Shares(1, False)
        sizing = _shares.sizing_for(self.workload, base_url, warmed)
        return Shares(sizing.count, self.dealt and sizing.count > 1, sizing)

    def run(self, shards: list, credentials: Any, *, span_s: float, request_timeout_s: float,
            progress: Callable[[int, int], None] | None = None,
            on_ready: Callable[[], None] | None = None) -> "LoadRun":
        """Run ``shards`` from one common start and merge their exact records into one run
        (``on_ready``: once every shard is warmed, before the start)."""
        raise NotImplementedError(f"the {self.kind} placement runs no shards")

    def pool(self, shards: list, credentials: Any, *, request_timeout_s: float) -> RoundPool:
        """A context manager holding ``shards`` ready for rounds (``send_round``, ``failures``, ``load_run``)."""
        raise NotImplementedError(f"the {self.kind} placement pools no shards")
