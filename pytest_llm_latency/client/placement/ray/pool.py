"""``samples: auto`` rounds on Ray nodes (``ray: ADDRESS``): ``RayPool`` has ``WorkerPool``'s interface
(``client/placement/processes/pool.py``), so ``drivers/worker_rounds.py`` runs the same round loop over either, with
one ``RoundActor`` per node placed, named, clock-measured and warmed as ``client/placement/ray/shards.py`` does
(``reserve``, ``start_actors``).  At its first round a node maps its ``CLOCK_MONOTONIC`` onto the driver's through
one wall-clock anchor (``(driver wall + the node's offset, driver monotonic)``), so its records come back on the
driver's timeline.  See docs/load.md#several-hosts-on-ray (``samples: auto`` on Ray).
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from ....core.prompts.synthesis import Prompt
from ...transport.clock import MEASUREMENT_CLOCK
from ...load.engine import LoadRun
from .shards import ShardActor, _lost, describe_nodes, release, reserve, shift_run, start_actors
from ..processes.pool import ROUND_SLACK_S, deal_round, keep_round, merge_round
from ..processes.shard import Credentials, Shard, ShardRun

#: how long one ``ray.wait`` of a round may block before the deadline is looked at again
WAIT_S = 0.5


class RoundActor(ShardActor):
    """One node of the pool (made a Ray actor by ``_actor_class``): ``where``, ``clock`` and ``prepare``
    as a ``ShardActor``, then ``round`` on command."""
    _one: Any = None
    _shift: int | None = None

    def round(self, part: list[tuple[int, Prompt]], name: str, anchor: tuple[int, int]) -> ShardRun:
        """Send ``part`` (``(position, prompt)`` pairs) all at once; the records (each naming
        ``pid@name``) with their stamps on the driver's timeline (``anchor``: the driver's wall clock
        plus this node's offset, and the driver's monotonic, read at one instant)."""
        from ...load.send_one import sender
        from ..processes.pool import send_part

        if self._shift is None:
            wall, mono = time.time_ns(), MEASUREMENT_CLOCK()
            self._shift = anchor[1] - (mono + (anchor[0] - wall))  # the driver's monotonic minus this node's
            shard = self._prepared.shard
            self._one = sender(self._prepared.client, shard.output_tokens, shard.extra)
        try:
            out = send_part(self._one, part, f"{os.getpid()}@{name}")
        except Exception as exc:
            raise RuntimeError(self._redact(f"{type(exc).__name__}: {exc}")) from None
        return shift_run(out, self._shift)


def _actor_class(ray):
    return ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(RoundActor)


class RayPool:
    """One ``RoundActor`` per Ray node, prepared and warmed once, sending rounds on command; as
    ``client.placement.processes.pool.WorkerPool``: ``runs`` (each live node's ``ShardRun`` over the rounds so far,
    on the driver's timeline), ``failures`` (index -> why it was lost, naming its node)."""

    def __init__(self, address: str, shards: list[Shard], credentials: Credentials, *, request_timeout_s: float,
                 clock=MEASUREMENT_CLOCK):
        self.address, self.shards, self.credentials, self.clock = address, shards, credentials, clock
        self.request_timeout_s = request_timeout_s
        self.ray: Any = None
        self.pg: Any = None
        self.actors: list = []
        self.names: dict[int, str] = {}
        self.offsets: dict[int, tuple[int, int]] = {}
        self.anchors: dict[int, tuple[int, int]] = {}
        self.runs: dict[int, ShardRun] = {}
        self.failures: dict[int, str] = {}
        self.dealt = [0] * len(shards)   # requests handed to each node so far
        self.rounds = 0

    # ------------------------------------------------------------------ start and stop
    def __enter__(self) -> "RayPool":
        try:
            self._place()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        wall, mono = time.time_ns(), self.clock()  # one instant: each node's anchor
        self.anchors = {k: (wall + off, mono) for k, (off, _) in self.offsets.items()}
        return self

    def _place(self) -> None:
        """Connect, place one actor per node (``STRICT_SPREAD``), name the nodes, measure their clock
        offsets, prepare and warm them (bounded waits; a node that fails is in ``failures``)."""
        from .cluster import connect

        self.ray = connect(self.address)
        self.pg = reserve(self.ray, self.address, len(self.shards), self.shards[0].target.url)
        self.actors = start_actors(self.ray, _actor_class(self.ray), self.pg, self.shards, self.credentials,
                                   request_timeout_s=self.request_timeout_s,
                                   names=self.names, offsets=self.offsets, failures=self.failures)

    def __exit__(self, *exc) -> None:
        if self.ray is not None:
            release(self.ray, self.actors, self.pg)

    @property
    def live(self) -> list[int]:
        return [k for k in range(len(self.shards)) if k not in self.failures]

    # ------------------------------------------------------------------ one round
    def send_round(self, start: int, batch: list[Prompt]) -> list:
        """Send ``batch`` (the run's prompts ``start, ...``) split over the live nodes (``deal``); the
        outcomes that came back, in prompt order.  A node lost in the round is named in ``failures``
        (its part of the round is missing: the caller stops)."""
        live = self.live
        if not live:
            return []
        self.rounds += 1
        running: dict[Any, int] = {}
        for k, part in zip(live, deal_round(start, batch, len(live))):
            if part:
                self.dealt[k] += len(part)
                running[self.actors[k].round.remote(part, self.names[k], self.anchors[k])] = k
        got = self._collect(running, self.request_timeout_s + ROUND_SLACK_S)
        return merge_round([r.outcomes for r in got.values()])

    def _collect(self, running: dict[Any, int], within_s: float) -> dict[int, ShardRun]:
        """Wait (at most ``within_s``) for the nodes' answers (``running``: ref -> node index); a node
        whose task failed, whose actor died or that did not answer in time is named in ``failures``."""
        ray = self.ray
        deadline = self.clock() + int(within_s * 1e9)
        got: dict[int, ShardRun] = {}
        while running:
            left = (deadline - self.clock()) / 1e9
            if left <= 0:
                for k in running.values():
                    self._lost(k, TimeoutError("did not answer the round in time"))
                break
            ready, _ = ray.wait(list(running), num_returns=1, timeout=min(left, WAIT_S))
            for ref in ready:
                k = running.pop(ref)
                try:
                    got[k] = ray.get(ref)  # ready: no wait
                except ray.exceptions.RayError as exc:
                    self._lost(k, exc)
                    continue
                keep_round(self.runs, k, got[k])
        return got

    def _lost(self, k: int, exc: BaseException) -> None:
        with contextlib.suppress(Exception):  # already gone with its node
            self.ray.kill(self.actors[k])  # nothing of it is waited for any more
        done = len(self.runs[k].outcomes) if k in self.runs else 0
        self.failures[k] = _lost(k, self.names.get(k), exc, done, self.dealt[k],
                                 dead=isinstance(exc, self.ray.exceptions.RayActorError)) + f" (round {self.rounds})"
        self.runs.pop(k, None)  # the run is an error: a lost node's records are not merged (as workers.merge)

    def load_run(self) -> LoadRun:
        """The rounds as one ``LoadRun`` (mode ``rounds``): every live node's records in prompt order,
        its lag, its node and clock offset (``load.worker_lag``), and the lost nodes."""
        from ..processes.workers import merge

        run = merge(self.shards, self.runs, self.failures)
        run.mode = "rounds"
        return describe_nodes(run, self.names, self.offsets)
