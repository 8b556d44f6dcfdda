"""Sequential rounds over worker processes (``samples: auto`` with ``workers: N``, ``N <= concurrency``):
the same loop as one process (``rounds.send_rounds``), each round split over a persistent pool of ``N``
worker processes (``client/placement/processes/pool.py``) -- with ``ray:`` one actor per Ray node
(``client/placement/ray/pool.py``) -- and merged back in prompt order, so every decision is taken on all
the workers' exact records.  A lost worker stops the rounds; the run is then an error naming it
(``check_workers``).  See docs/load.md#worker-processes (``samples: auto`` over workers)."""
from __future__ import annotations

import math
from typing import Any, Callable

from ...core.prompts.synthesis import Prompt
from ...core.spec.workload import Workload
from ..placement import placement_for, warm_share, warmup_cut
from .base import Run, Sent


def round_shards(workers: int, target: Any, spares: list[Prompt], warmup: int, concurrency: int, *,
                 output_tokens: int, extra: dict | None) -> list:
    """The pool's ``client.placement.processes.shard.Shard``s: no prompts of their own (each round hands them
    out), ``warmup`` of the ``spares`` each for its unmeasured warm-up, connections for its share of
    a round (``ceil(concurrency / workers)``)."""
    from ..placement.processes.shard import Shard

    streams = max(1, math.ceil(concurrency / workers))
    return [Shard(k, workers, target, (), (), (), warm_share(spares, k, warmup), output_tokens, extra, streams)
            for k in range(workers)]


class WorkerRounds:
    name = "sequential_rounds"
    engine = True  # the workers' lag monitors, not this process's
    warms_in_send = True  # the pool's workers warm up on entering it: ``run.on_ready`` then
    count: int | None = None     # the processes, sized after the controller's warm-up (``resize``)
    worker_sizing: Any = None    # ``core.spec.worker_sizing.WorkerSizing``: the count and why

    def __init__(self, client, pool: Callable[..., Any] | None = None, single: Any = None):
        self.client = client
        self.pool = pool  # the pool's maker (tests inject one); default WorkerPool, or with ray: RayPool
        self.single = single  # the one-process driver it stands for (its class sends ``auto`` sized to 1)

    def applies(self, workload: Workload) -> bool:
        return bool(workload.sequential) and placement_for(workload).dealt

    def resize(self, workload: Workload, warmed: list, samples: list) -> tuple[Any, list]:
        """As ``drivers.workers.WorkerOpenLoop.resize``: ``auto`` sized to 1 sends the rounds in this process."""
        from .workers import resized

        return resized(self, placement_for(workload), warmed, samples)

    def one_process(self):
        """The one-process rounds (``workers: auto`` sized to 1), or None (one worker process)."""
        return None if self.single is None else type(self.single)()

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        from ..transport.http import request_bound_s
        from ..placement.processes.shard import Credentials, WorkerTarget
        from .rounds import send_rounds

        placement = placement_for(workload)
        n = min(self.count, workload.concurrency) if self.count else placement.over(workload.concurrency).count
        warm = workload.warmup
        rounds, spares = warmup_cut(samples, placement.spare_prompts())  # each worker's warm-ups: prepared last
        shards = round_shards(n, WorkerTarget.of(self.client), spares, warm, workload.concurrency,
                              output_tokens=workload.output_tokens, extra=run.extra)
        # worker processes (client/placement/processes/pool.py), Ray nodes (client/placement/ray/pool.py)
        make = self.pool or placement.pool
        with make(shards, Credentials.of(self.client), request_timeout_s=request_bound_s(self.client.timeouts)) as pool:
            if run.on_ready is not None and not pool.failures:  # every worker warmed: /metrics "before"
                run.on_ready()
            sent = [0]

            def send_round(batch: list[Prompt]) -> list:
                got = pool.send_round(sent[0], batch)
                sent[0] += len(batch)
                return got

            _, sequential = send_rounds(send_round, rounds, workload, run.progress, recover,
                                        halted=lambda: bool(pool.failures))
        load_run = pool.load_run()
        return Sent(outcomes=list(load_run.outcomes), sequential=sequential, load_run=load_run)

    def measure(self, client, workload: Workload, run: Run):
        from .pipeline import measure_samples

        return measure_samples(client, workload, run, WorkerRounds(client, self.pool, self.single))
