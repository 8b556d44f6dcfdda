"""The load engine's loops sent by worker processes (``workers: N``, ``client/workers.py``): the same
sample drivers as ``open_loop`` and ``closed_loop`` inside the same pipeline, bound to the
measurement's client so that their shards can name the target.  An open loop: the engine's
schedule, sharded, merged back in schedule order; a closed loop: the ``concurrency`` streams
spread over the workers, one steady-state window decided across them (``client/workers_closed.py``)."""
from __future__ import annotations

import math
import multiprocessing

from ...core.workload import Workload
from ..load import ClosedPlan, in_flight, open_loop_schedule, worker_count
from .base import Run, Sent


class WorkerOpenLoop:
    name = "open_loop"
    engine = True

    def __init__(self, client):
        self.client = client

    def applies(self, workload: Workload) -> bool:
        return workload.load is not None and workload.load.open_loop and worker_count(workload) > 1

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
        load_run = run_workers(shards, Credentials.of(self.client), span_s=due[-1] if due else 0.0,
                               request_timeout_s=timeouts.total_s, progress=run.progress)
        return Sent(outcomes=list(load_run.outcomes), load_run=load_run)  # load.workers says it (notes warn)

    def measure(self, client, workload: Workload, run: Run):
        from .pipeline import measure_samples

        return measure_samples(client, workload, run, WorkerOpenLoop(client))


class WorkerClosedLoop(WorkerOpenLoop):
    name = "closed_loop"

    def applies(self, workload: Workload) -> bool:
        return not (workload.load is not None and workload.load.open_loop) and worker_count(workload) > 1

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        from ..workers import Credentials, WorkerTarget, run_workers
        from ..workers_closed import SharedLoopState, make_closed_shards

        n = worker_count(workload)
        warm = workload.warmup
        cut = max(len(samples) - warm * n, 0)  # each worker's warm-up prompts: prepared last (planned_requests)
        loop, spares = samples[:cut], samples[cut:]
        plan = ClosedPlan.of(workload)
        shards = make_closed_shards(plan, loop, spares, n, WorkerTarget.of(self.client), warmup=warm,
                                    output_tokens=workload.output_tokens, extra=run.extra)
        timeout_s = self.client.timeouts.total_s
        # a hang guard, not a forecast: each stream ends a request within the timeout, so all the
        # prompts are spent (or the duration over) by then; plus the start barrier's and ramp's waits
        per_stream = math.ceil(len(loop) / max(plan.concurrency, 1)) + 1
        span_s = plan.ramp_up_s + (plan.duration_s or timeout_s * per_stream) + 90.0
        shared = SharedLoopState(multiprocessing.get_context("spawn"), plan.concurrency)  # inherited at start
        load_run = run_workers(shards, Credentials.of(self.client), span_s=span_s, request_timeout_s=timeout_s,
                               progress=run.progress, shared=shared)
        return Sent(outcomes=list(load_run.outcomes), load_run=load_run)

    def measure(self, client, workload: Workload, run: Run):
        from .pipeline import measure_samples

        return measure_samples(client, workload, run, WorkerClosedLoop(client))
