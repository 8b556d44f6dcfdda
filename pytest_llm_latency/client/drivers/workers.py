"""The load engine's loops sent by worker processes (``workers: N``, ``client/placement/processes/workers.py``):
the sample drivers of ``open_loop`` and ``closed_loop`` (the closed loop's shared books:
``client/placement/processes/closed.py``) and the trace replay (whole sessions per worker, the declared cache
hits decided after the run from the merged stamps: ``core.spec.trace_tokens.declared_from_stamps``), bound to
the measurement's client so that their shards can name the target.  With ``ray:`` each shard runs on a node of
the cluster instead (``client.placement.Placement.run``).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from ...core.spec.workload import Workload
from ..transport.http import request_bound_s
from ..load.engine import MAX_OPEN_LOOP_THREADS, ClosedPlan, open_loop_schedule
from ..placement.plan import in_flight
from ..placement import Placement, deal, placement_for, warmup_cut
from .base import Run, Sent
from .trace_replay import Replay


class WorkerOpenLoop:
    name = "open_loop"
    engine = True
    warms_in_send = True  # each worker warms its own connections: ``run.on_ready`` once all are warm
    count: int | None = None     # the processes, sized after the controller's warm-up (``resize``)
    worker_sizing: Any = None    # ``core.spec.worker_sizing.WorkerSizing``: the count and why (load.workers_reason)

    def __init__(self, client, single: Any = None):
        self.client = client
        self.single = single  # the one-process driver it stands for (its class sends ``auto`` sized to 1)

    def applies(self, workload: Workload) -> bool:
        return workload.load is not None and workload.load.open_loop and placement_for(workload).dealt

    def one_process(self):
        """A fresh one-process driver of this loop (``workers: auto`` sized to 1), or None where none
        was given (then one worker process sends it)."""
        return None if self.single is None else type(self.single)()

    def resize(self, workload: Workload, warmed: list, samples: list) -> tuple[Any, list]:
        """After the controller's warm-up (``warmed``: its outcomes), before any worker is spawned: the
        processes (``Placement.shares``: ``N`` as given, ``auto`` by the load's token events).
        ``auto`` sized to 1: this loop's one-process driver, the workers' spare warm-up prompts dropped
        (its samples then are exactly those of ``workers: 1``).  Ray's nodes: unchanged."""
        return resized(self, placement_for(workload), warmed, samples)

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        from ..placement.processes.shard import Credentials, WorkerTarget, make_shards

        placement = placement_for(workload)
        n = self.count or placement.count()
        due = open_loop_schedule(workload, run.seed)[:len(samples)]
        scheduled = samples[:len(due)]
        warm = workload.warmup
        _, spares = warmup_cut(samples[len(due):], warm * n)  # prepared last (client.placement.plan.planned_requests)
        shards = make_shards(due, scheduled, spares, n, WorkerTarget.of(self.client), warmup=warm,
                             output_tokens=workload.output_tokens, extra=run.extra, in_flight=in_flight(workload))
        load_run = placement.run(shards, Credentials.of(self.client), span_s=due[-1] if due else 0.0,
                                 request_timeout_s=request_bound_s(self.client.timeouts), progress=run.progress,
                                 on_ready=run.on_ready)
        return Sent(outcomes=list(load_run.outcomes), load_run=load_run)  # load.workers says it (notes warn)

    def measure(self, client, workload: Workload, run: Run):
        from .pipeline import measure_samples

        return measure_samples(client, workload, run, type(self)(client, self.single))


class WorkerClosedLoop(WorkerOpenLoop):
    name = "closed_loop"

    def applies(self, workload: Workload) -> bool:
        return not (workload.load is not None and workload.load.open_loop) and placement_for(workload).dealt

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        from ..placement.processes.shard import Credentials, WorkerTarget
        from ..placement.processes.closed import make_closed_shards

        placement = placement_for(workload)
        n = min(self.count, workload.concurrency) if self.count else placement.over(workload.concurrency).count
        warm = workload.warmup
        loop, spares = warmup_cut(samples, placement.spare_prompts())  # the workers' warm-ups: prepared last
        plan = ClosedPlan.of(workload)
        shards = make_closed_shards(plan, loop, spares, n, WorkerTarget.of(self.client), warmup=warm,
                                    output_tokens=workload.output_tokens, extra=run.extra)
        timeout_s = request_bound_s(self.client.timeouts)
        # a hang guard, not a forecast: each stream ends a request within the timeout, so all the
        # prompts are spent (or the duration over) by then; plus the start barrier's and ramp's waits
        per_stream = math.ceil(len(loop) / max(plan.concurrency, 1)) + 1
        span_s = plan.ramp_up_s + (plan.duration_s or timeout_s * per_stream) + 90.0
        load_run = placement.run(shards, Credentials.of(self.client), span_s=span_s,
                                 request_timeout_s=timeout_s, progress=run.progress, on_ready=run.on_ready)
        return Sent(outcomes=list(load_run.outcomes), load_run=load_run)


@dataclass
class WorkerReplay(Replay):
    """A trace replay over worker processes: session ``i`` on worker ``i mod N`` (whole: its later
    turns follow its own answers), each first turn due at its offset from the common start.  The
    declared-hit books (``DeclaredCache``) are not shared across processes: the controller decides
    each row's declared hits and the judge's bound after the run, from the merged records' send and
    end stamps (``core.spec.trace_tokens.declared_from_stamps``).  A later turn's planned length is the
    additive plan (history + ``input_length``; a worker has no tokenize counter of its own), checked
    against the server's count like every prompt."""
    client: Any = None
    warms_in_send = True  # see WorkerOpenLoop

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        from ...core.spec.trace import arrival_offsets_ms, sessions, turn_delay_ms
        from ...core.spec.trace_tokens import declared_from_stamps
        from ...core.measure.record import RequestRecord
        from ..placement.processes.shard import Credentials, WorkerTarget

        placement = placement_for(workload)
        n = self.worker_sizing.count if self.worker_sizing is not None else placement.count()
        groups = sessions(self.rows)
        shards = make_trace_shards(groups, {p.key: p for p in samples}, n, WorkerTarget.of(self.client), self.spec,
                                   output_tokens=workload.output_tokens, extra=run.extra)
        timeout_s = request_bound_s(self.client.timeouts)
        offsets = arrival_offsets_ms(self.rows, self.spec.speed, self.spec.start_ms)
        # a hang guard: the last session's start, its turns' delays and one request timeout a turn
        span_s = max((off + sum(turn_delay_ms(r, self.spec.speed) for r in g[1:])) / 1e3 + timeout_s * len(g)
                     for g, off in zip(groups, offsets)) if groups else 0.0
        load_run = placement.run(shards, Credentials.of(self.client), span_s=span_s,
                                 request_timeout_s=timeout_s, progress=run.progress, on_ready=run.on_ready)
        load_run.mode = "trace"
        for b in load_run.worker_books:  # every finished worker's (a failed one is an error naming it)
            self.skipped += b["skipped"]
            self.rejected_row = self.rejected_row or b["rejected_row"]
            self.stopped = self.stopped or b["stopped"]
            self.unsent += b["unsent"]
        stamps = {o.trace.row: (o.t_send_ns, o.t_end_ns if isinstance(o, RequestRecord) else None)
                  for o in load_run.outcomes if o.trace is not None}
        self.declared, self.bound = declared_from_stamps(self.rows, stamps, self.spec.block_tokens)
        return Sent(outcomes=list(load_run.outcomes), notes=self.run_notes(), load_run=load_run)


def resized(driver: Any, placement: Placement, warmed: list, samples: list) -> tuple[Any, list]:
    """A dealt driver after the controller's warm-up (``warmed``): sized to the placement's shares;
    ``auto`` sized to one process: the driver's one-process twin (``driver.one_process()``, None:
    one worker process), the shards' spare warm-up prompts dropped; Ray's nodes: unchanged."""
    shares = placement.shares(getattr(driver.client, "base_url", None), warmed)
    if shares.sizing is None:
        return driver, samples
    single = driver.one_process() if placement.workload.workers == "auto" and shares.count == 1 else None
    if single is not None:
        single.worker_sizing = shares.sizing
        return single, warmup_cut(samples, placement.spare_prompts())[0]
    sized = copy.copy(driver)
    sized.count, sized.worker_sizing = shares.count, shares.sizing
    return sized, samples


def make_trace_shards(groups: list[list], by_row: dict, workers: int, target, spec: Any, *,
                      output_tokens: int, extra: dict | None) -> list:
    """A trace replay's ``TraceShard``s: session ``i`` (``core.spec.trace.sessions``, in the order of their
    first turns) on worker ``i mod N``, whole; each row's prompt (``by_row``, by row index) with it."""
    from .trace_replay import TraceShard

    out = []
    for k, mine in enumerate(deal(groups, workers)):
        rows = tuple(r for g in mine for r in g)
        streams = min(max(len(mine), 1), MAX_OPEN_LOOP_THREADS)  # one thread a session in flight
        out.append(TraceShard(k, workers, target, tuple(r.index for r in rows), (),
                              tuple(by_row[r.index] for r in rows), (), output_tokens, extra, streams,
                              spec=spec, rows=tuple(rows)))
    return out
