"""The one rule giving shards their share, and the one cut of their warm-up prompts.

Shard ``k`` of ``N`` takes items ``k, k+N, k+2N, ...`` (an open loop's scheduled arrivals, a closed
loop's streams, a round's prompts, a trace replay's or an agent run's sessions): disjoint, together
every item, their counts differing by at most one.  The shards' own warm-up prompts are prepared
last (``client.placement.plan.planned_requests``): ``warmup_cut`` takes them off the end and
``warm_share`` gives shard ``k`` its ``warmup`` of them."""
from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


def deal(items: Sequence[T], n: int) -> list[list[T]]:
    """``items`` over ``n`` shards: shard ``k`` gets items ``k, k+N, ...`` in their order."""
    if n < 1:
        raise ValueError(f"deal: n must be >= 1, got {n}")
    return [list(items[k::n]) for k in range(n)]


def warmup_cut(samples: list[T], spare: int) -> tuple[list[T], list[T]]:
    """``samples`` split into the measured ones and the ``spare`` warm-up prompts prepared after them."""
    cut = max(len(samples) - spare, 0)
    return samples[:cut], samples[cut:]


def warm_share(spares: Sequence[T], k: int, warmup: int) -> tuple[T, ...]:
    """Shard ``k``'s ``warmup`` warm-up prompts of the ``spares`` (``warmup_cut``)."""
    return tuple(spares[k * warmup:(k + 1) * warmup])
