"""The open loop sent by worker processes (``workers: N``, ``client/workers.py``): the same sample
driver as ``open_loop`` inside the same pipeline, bound to the measurement's client so that its
shards can name the target; the engine's schedule, sharded, merged back in schedule order."""
from __future__ import annotations

from ...core.workload import Workload
from ..load import in_flight, open_loop_schedule, worker_count
from .base import Run, Sent


class WorkerOpenLoop:
    name = "open_loop"
    engine = True

    def __init__(self, client):
        self.client = client

    def applies(self, workload: Workload) -> bool:
        return workload.load is not None and workload.load.open_loop and (
            workload.ray is not None or worker_count(workload) > 1)

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        from ..workers import Credentials, WorkerTarget, make_shards, run_workers

        n = worker_count(workload)
        due = open_loop_schedule(workload, run.seed)[:len(samples)]
        scheduled = samples[:len(due)]
        spare = samples[len(due):]
        warm = workload.warmup
        spares = spare[max(len(spare) - warm * n, 0):]  # prepared last (client.load.planned_requests)
        shards = make_shards(due, scheduled, spares, n, WorkerTarget.of(self.client), warmup=warm,
                             output_tokens=workload.output_tokens, extra=run.extra, in_flight=in_flight(workload))
        timeouts = self.client.timeouts
        if workload.ray is not None:  # one shard per node of a Ray cluster (client/ray_shards.py)
            from ..ray_shards import run_on_ray

            load_run = run_on_ray(workload.ray, shards, Credentials.of(self.client), span_s=due[-1] if due else 0.0,
                                  request_timeout_s=timeouts.total_s)
        else:
            load_run = run_workers(shards, Credentials.of(self.client), span_s=due[-1] if due else 0.0,
                                   request_timeout_s=timeouts.total_s, progress=run.progress)
        return Sent(outcomes=list(load_run.outcomes), load_run=load_run)  # load.workers says it (notes warn)

    def measure(self, client, workload: Workload, run: Run):
        from .pipeline import measure_samples

        return measure_samples(client, workload, run, WorkerOpenLoop(client))
