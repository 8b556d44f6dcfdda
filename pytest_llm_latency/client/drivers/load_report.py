"""What a load run adds to its result: throughput, goodput, fluidity and the excluded ramp-up
and drain; and, for every run, the client's health and who bunched the tokens.  (Why a budget failed:
``core.result.why``.)
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...core.measure import metrics as m
from ...core.measure.bunching import Attribution, StallTimeline, attribute, bursts as burst_reads
from ...core.result.goodput import fluidity, goodput
# defined once, in core.metrics
from ...core.measure.metrics import events_per_read
from ...core.measure.prefill_overlap import prefill_windows
from ...core.measure.record import RequestRecord
from ...core.result.result import WorkloadResult
from ...core.measure.stamp_bounds import read_bound_ms, read_delays_ms, stamp_mode, token_bounds_ms
from ...core.measure.stats import percentile
from ..load.engine import LoadRun
from ..placement.plan import uses_load_engine

#: the client fell behind when its threads woke this late (p99) ...
STARVED_LAG_MS = 20.0
#: ... and that lateness is at least this fraction of the ITL it measures
STARVED_LAG_OF_ITL = 0.5
#: bunched: more than this share of token gaps under 0.1 ms (``core.measure.metrics.burst_chunks``) ...
BURST_SHARE = 0.1
#: ... by the client unless its lag p99 stayed under this fraction of the token interval (TPOT p50)
CLIENT_BUNCHING_LAG_OF_TPOT = 0.5
#: a server decoding faster than this (TPOT p50, ms) sends gaps under 0.1 ms on its own: not bunching
FAST_TOKEN_MS = 1.0
#: the end of a client-limited note that puts every burst on the client
READ_LATE = ("the client read them late, bunched, not a proxy (ITL looks falsely small) -- give the test process a CPU "
             "of its own, or fewer streams")


def _p(values: list[float], q: float) -> float | None:
    return percentile(sorted(values), q) if values else None


def client_health(lag_ns: list[int], send_lag_ns: list[int], records: list[RequestRecord],
                  itl_p50: float | None) -> dict:
    """The client's scheduling lag (``LagMonitor`` wake-ups, and an open loop's late sends),
    events per read, and whether it fell behind."""
    lags = [x / 1e6 for x in lag_ns] + [x / 1e6 for x in send_lag_ns]
    out: dict = {}
    p99 = _p(lags, 99)
    if p99 is not None:
        out["client_lag_ms_p50"] = round(percentile(sorted(lags), 50), 3)
        out["client_lag_ms_p90"] = round(percentile(sorted(lags), 90), 3)
        out["client_lag_ms_p99"] = round(p99, 3)
        out["client_lag_ms_max"] = round(max(lags), 3)
    sched = [v for v in (m.client_lag_ms(r) for r in records) if v is not None]
    if sched:
        out["client_send_lag_ms_p99"] = round(percentile(sorted(sched), 99), 3)
    epr = events_per_read(records)
    if epr is not None:
        out["events_per_read"] = round(epr, 3)
    out.update(stamp_health(records, p99))
    # with kernel stamps a late read is still stamped at its arrival: the budgets its errors could
    # flip are refused one by one (core.checks.client_skew), not the whole run
    kernel = stamp_mode(records) == "kernel"
    behind = not kernel and p99 is not None and p99 >= STARVED_LAG_MS and \
        (itl_p50 is None or p99 >= STARVED_LAG_OF_ITL * itl_p50)
    out["client_fell_behind"] = int(behind)
    return out


def stamp_health(records: list[RequestRecord], lag_ms_p99: float | None) -> dict:
    """The bound on the token stamps' error (``core.measure.stamp_bounds``) and, with kernel stamps, the
    client's own delay per read: ``client.stamp_bound_ms_p99/max``, ``client.read_delay_ms_p99/max``."""
    out: dict = {}
    bounds = sorted(token_bounds_ms(records, read_bound_ms(lag_ms_p99)))
    if bounds and stamp_mode(records) is not None:
        out["stamp_bound_ms_p99"] = round(percentile(bounds, 99), 3)
        out["stamp_bound_ms_max"] = round(bounds[-1], 3)
    delays = sorted(read_delays_ms(records))
    if delays:
        out["read_delay_ms_p99"] = round(percentile(delays, 99), 3)
        out["read_delay_ms_max"] = round(delays[-1], 3)
    return out


def workers_behind(res: WorkloadResult, workers: list) -> list[str]:
    """Each worker judged on its own lag by the one-process rule (``client_health``): a worker that
    fell behind, named (the merged figures could hide one starved worker among several)."""
    itl50 = res.completed["itl"].p50 if "itl" in res.completed else None
    out = []
    for wk in workers:
        mine = [r for r in res.records if r.worker == wk.name]
        health = client_health(wk.lag_ns, wk.send_lag_ns, mine, itl50)
        if health.get("client_fell_behind"):
            out.append(f"worker {wk.index} ({wk.name}) fell behind (CPU-starved: lag p99 "
                       f"{health.get('client_lag_ms_p99', 0):.0f} ms)")
    return out


def workers_summary(res: WorkloadResult, run: LoadRun) -> None:
    """``load.workers`` / ``load.worker_lag`` of a run sent by worker processes
    (``client/placement/processes/workers.py``), and
    the workers that died, hung or fell behind as facts (an error: ``core.checks.measurement_validity``)."""
    if run.workers or run.worker_failures:
        res.load.workers = len(run.workers) + len(run.worker_failures)
        res.load.worker_lag = [wk.as_json() for wk in run.workers]
        res.facts.workers_failed = list(run.worker_failures) + workers_behind(res, run.workers)
    if run.warm_failures:  # one note, as one process gives for its own warm-ups
        res.notes.append(f"{run.warm_failures} warm-up request(s) failed on the workers (unmeasured: each worker "
                         f"warms its own connections before the start)")


def workers_lost(res: WorkloadResult) -> list[str]:
    """The worker processes (or Ray nodes) of ``res``'s run that died, hung or never got ready:
    ``workers_summary`` lists them first in ``facts.workers_failed``, then those that fell behind (a
    run's own figures: a rate sweep's step that fell behind is unjudgeable, as one process's is)."""
    lost = (res.load.workers or 0) - len(res.load.worker_lag)
    return res.facts.workers_failed[:max(lost, 0)]


def client_summary(res: WorkloadResult, lag_ns: Sequence[int], send_lag_ns: Sequence[int] = (), *,
                   engine: bool = True, timeline: StallTimeline | None = None) -> None:
    """Every run: the client's health (``res.client``) and who bunched the tokens when many arrived
    together (``bunching``).  A load-engine run (``engine``) whose client fell behind is a fact
    for the checks (an error, ``core.checks.measurement_validity``); a run of one stream at a time
    says so in the bunching note (its one thread reads as soon as it runs, so a lag there delays
    stamps by less than what it measures).  ``timeline``: the lag monitor's stalls, to judge each
    burst by the stall at its read."""
    itl50 = res.completed["itl"].p50 if "itl" in res.completed else None
    client = res.client
    client.set(**client_health(list(lag_ns), list(send_lag_ns), res.records, itl50))
    res.measurement.stamp = stamp_mode(res.records)
    res.facts.client_stalls = timeline
    if client.client_fell_behind and engine:  # an error (core.checks.measurement_validity)
        res.facts.client_fell_behind = True
    bunching(res, timeline)


def bunching(res: WorkloadResult, timeline: StallTimeline | None = None) -> None:
    """Who bunched the tokens when more than ``BURST_SHARE`` of the gaps are < 0.1 ms apart (``burst_chunks``):
    the client, a buffering proxy or compression, or both, burst by burst against the client's stall
    ``timeline`` (``core.measure.bunching``), else by the run's lag p99 against ``CLIENT_BUNCHING_LAG_OF_TPOT`` of
    the token interval; ``client_limited`` and a note.  The rules: docs/load.md#who-bunched-the-tokens."""
    client = res.client
    records = res.records
    chunks = sum(max(len(r.chunks) - 1, 0) for r in records)
    bursts = sum(m.burst_chunks(r) for r in records)
    client.burst_chunks = bursts
    behind = bool(client.client_fell_behind)
    client.client_limited = int(behind)
    tpot = res.completed["tpot"].p50 if "tpot" in res.completed and res.completed["tpot"].n else None
    if not chunks or bursts <= BURST_SHARE * chunks or (tpot is not None and tpot < FAST_TOKEN_MS):
        return  # few bursts, or a server whose tokens come that fast anyway
    lag = client.client_lag_ms_p99
    said = f"{bursts} of {chunks} token chunks arrived < 0.1 ms after the previous one"
    if lag is None or tpot is None:
        res.notes.append(f"{said} (ITL then looks falsely small); the client's lag could not be set against the "
                         f"token interval, so whether a buffering proxy, compression or a busy client bunched "
                         f"them is not known")
        return
    streams = [[c.t_ns for c in r.chunks] for r in records]
    per_burst = timeline is not None and not behind and timeline.covers(streams)
    waited = (0, 0)  # bursts put on the client because its stream threads waited for one another
    if per_burst and timeline is not None:
        a = attribute(streams, timeline, tpot)
        if a.upstream_gaps and uses_load_engine(res.workload) and lag >= CLIENT_BUNCHING_LAG_OF_TPOT * tpot:
            # many streams: a reader thread waits for the others (the GIL) longer than the monitor's
            # wake-ups show, so the run's lag p99 decides for the bursts no stall explained
            waited = (a.upstream_bursts, a.upstream_gaps)
            a = Attribution(a.client_bursts, a.client_gaps, 0, 0, a.longest_stall_ms)
    else:  # no timeline of the client's stalls: the run's lag p99 decides for every burst
        late = behind or lag >= CLIENT_BUNCHING_LAG_OF_TPOT * tpot
        reads = sum(len(burst_reads(t)) for t in streams)
        a = Attribution(*((reads, bursts, 0, 0) if late else (0, 0, reads, bursts)))
    client.bursts_client, client.bursts_upstream = a.client_bursts + waited[0], a.upstream_bursts
    health = (f"lag p99 {lag:.2f} ms against a {tpot:.2f} ms token interval; {client.events_per_read} "
              f"events per read")
    if not per_burst:  # the run-level rule, in its words
        if a.client_gaps:
            client.client_limited = 1
            res.notes.append(f"client-limited: {said} while the client's own threads woke up late ({health}): "
                             f"{READ_LATE}")
        else:
            res.notes.append(f"{said} while the client was idle ({health}): a buffering proxy or compression may "
                             f"be bunching tokens (ITL then looks falsely small)")
        return
    on_client = (f"{a.client_gaps} in {a.client_bursts} reads that came late while the client's own threads were "
                 f"stalled (up to {a.longest_stall_ms:.2f} ms)" if a.client_bursts else
                 "none in a read that came late while the client's own threads were stalled")
    on_time = (f"{a.upstream_gaps} in {a.upstream_bursts} reads with the client on time" if a.upstream_bursts else
               "none in a read with the client on time")
    if waited[0]:
        on_client += (f", {waited[1]} in {waited[0]} other reads while its stream threads waited for one "
                      f"another, which the lag monitor's wake-ups do not show (its lag p99 at least half the "
                      f"token interval)")
    client_gaps = a.client_gaps + waited[1]
    if client_gaps > BURST_SHARE * chunks and a.upstream_gaps > BURST_SHARE * chunks:  # both: say both
        client.client_limited = 1
        res.notes.append(f"client-limited: {said}, {on_client}, and {on_time} ({health}): the client read some "
                         f"late, bunched, and a buffering proxy or compression may be bunching the others (ITL "
                         f"looks falsely small) -- give the test process a CPU of its own, or fewer streams")
    elif client_gaps >= a.upstream_gaps:
        client.client_limited = 1
        res.notes.append(f"client-limited: {said}, {on_client}, {on_time} ({health}): {READ_LATE}")
    else:
        res.notes.append(f"{said}, {on_time}, {on_client} ({health}): a buffering proxy or compression may be "
                         f"bunching tokens, or the server sent them together (ITL then looks falsely small)")


def load_summary(res: WorkloadResult, run: LoadRun) -> None:
    """``res.load`` (JSON ``load``, JUnit ``llm.load.*``) and notes for a run of the load engine."""
    w = res.workload
    window_s = run.window_ns / 1e9
    load = res.load
    load.load_mode = run.mode
    if w.load is not None and w.load.open_loop:
        load.offered_rate_rps = w.load.rate
        load.arrival = w.load.arrival
    if window_s > 0:
        load.window_s = round(window_s, 4)
        done = len(res.records) + len(res.failures)
        load.throughput_rps = round(done / window_s, 4)
        load.output_tok_s = round(sum(r.output_tokens for r in res.records) / window_s, 3)
        g = goodput(res.records, len(res.failures), w.budgets, window_s)
        if g is not None:
            load.goodput_rps = round(g.per_s, 4)
            load.goodput_fraction = round(g.fraction, 4)
    fl = fluidity(res.records, res.failures, w)
    if fl is not None:
        load.fluidity_index = round(fl, 4)
    itl = res.summaries.get("itl")
    if itl is not None and itl.n:
        load.itl_ms_p99_under_load = round(itl.p99, 4)  # +inf: a miss (JSON null)
    if run.mode == "closed":
        # the excluded requests' long prompts still stalled the measured streams (core.checks.stalls)
        # (their failures are measured: core.measure.engine counts them)
        res.facts.unmeasured_windows = [replace(x, index=0) for x in prefill_windows(
            [o for o in run.ramp + run.drain if isinstance(o, RequestRecord)])]
        load.ramp_excluded = len(run.ramp)
        load.drain_excluded = len(run.drain)
        res.notes.append(f"closed loop at concurrency {w.concurrency}: {len(res.records) + len(res.failures)} "
                         f"requests measured at full concurrency; {len(run.ramp)} ramp-up and {len(run.drain)} "
                         f"drain requests (at lower concurrency) excluded")
    workers_summary(res, run)
    if run.prompts_short:
        res.notes.append("ran out of prepared prompts before the bound was reached: fewer samples than asked")
    if run.stopped:
        res.notes.append(f"stopped early: a request was rejected ({run.stopped}) as every other would be; "
                         f"{run.unsent} request(s) were not sent")

