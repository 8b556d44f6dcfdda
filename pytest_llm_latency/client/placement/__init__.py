"""Where a workload's requests run: this process (``local.py``), worker processes of this host
(``processes/``) or the nodes of a Ray cluster (``ray/``), each behind its ``placement`` module:
an axis beside how they are sent (``client/drivers``), behind one protocol (``base.Placement``).

- ``placement_for(workload)`` (``choose.py``) decides it once; no client module outside this folder
  reads a workload's ``ray`` address or sizes its workers (``tests/architecture/test_placement.py``);
- ``Placement.run`` runs shards and merges them (a closed loop's books: shared memory or a Ray actor),
  ``Placement.pool`` holds them for rounds;
- ``deal`` / ``warmup_cut`` / ``warm_share`` (``deal.py``): the one rule giving shard ``k`` of ``N``
  items ``k, k+N, ...`` and the one cut of the shards' warm-up prompts;
- ``shares.py``: how many shards, and why (``workers: N | auto``, one per Ray node); ``plan.py``: the
  prompts and connections a workload's load needs, its shards' warm-ups included.

May import the client's earlier stages (``transport`` to ``load``) and ``core``; never a driver
(``client/drivers``): a shard names its own worker-side runner (``processes/shard.py``)."""
from __future__ import annotations

from .base import Placement, PlacementKind, Shares
from .choose import placement_for
from .deal import deal, warm_share, warmup_cut

__all__ = ["Placement", "PlacementKind", "Shares", "deal", "placement_for", "warm_share", "warmup_cut"]
