"""A closed loop over worker processes (``concurrency: C``, ``workers: N``, ``client/placement/processes/workers.py``):
worker ``k`` runs streams ``k, k+N, k+2N, ...`` of the ``C``, and the steady-state window is decided across all of
them as one process decides it (``client.load.engine._closed_loop``): the loop's books live in
``SharedLoopState``, multiprocessing objects of the spawn context that the controller makes and each worker
inherits at its start (never pickled later).  See docs/load.md#worker-processes (a closed loop over workers).
"""
from __future__ import annotations

from typing import Any

from ....core.prompts.synthesis import Prompt
from ...load.engine import ClosedPlan
from ..deal import deal, warm_share
from .shard import ClosedShard, WorkerTarget

#: ``ramp_end`` / ``t_stop`` not yet set (a ``CLOCK_MONOTONIC`` stamp is never negative)
_UNSET = -1


def make_closed_shards(plan: ClosedPlan, prompts: list[Prompt], spares: list[Prompt], workers: int,
                       target: WorkerTarget, *, warmup: int, output_tokens: int,
                       extra: dict | None) -> list[ClosedShard]:
    """The ``workers`` shards of a closed loop: each its streams, all the prompts (drawn from the
    shared index: each sent once), ``warmup`` of the ``spares`` for its own warm-up."""
    positions = tuple(range(len(prompts)))
    return [ClosedShard(k, workers, target, positions, (), tuple(prompts), warm_share(spares, k, warmup),
                        output_tokens, extra, max(len(streams), 1),
                        plan=ClosedPlan(plan.concurrency, plan.samples, plan.ramp_up_s, plan.duration_s,
                                        tuple(streams)))
            for k, streams in enumerate(deal(range(plan.concurrency), workers))]  # worker k: streams k, k+N, ...


class _Value:
    """An attribute kept in a shared ``multiprocessing`` value (``_UNSET`` reads as None)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None) -> Any:
        v = obj._values[self.name].value
        return None if v == _UNSET and self.name in ("ramp_end", "t_stop") else v

    def __set__(self, obj, value: Any) -> None:
        obj._values[self.name].value = _UNSET if value is None else value


class SharedLoopState:
    """``client.load.engine.LoopState`` across processes: the same names, kept in shared values under one
    lock, with a barrier and an event of the spawn context ``ctx`` (made by the controller, passed
    to each worker process as a start argument)."""
    next = _Value()
    started = _Value()
    counted = _Value()
    ramp_end = _Value()
    t_stop = _Value()

    def __init__(self, ctx, concurrency: int):
        self.lock = ctx.Lock()
        self.barrier = ctx.Barrier(concurrency, timeout=30.0)
        self.all_started = ctx.Event()
        self._values = {"next": ctx.Value("q", 0, lock=False), "started": ctx.Value("q", 0, lock=False),
                        "counted": ctx.Value("q", 0, lock=False), "ramp_end": ctx.Value("q", _UNSET, lock=False),
                        "t_stop": ctx.Value("q", _UNSET, lock=False)}

    @property
    def stop(self) -> bool:
        return self.t_stop is not None
