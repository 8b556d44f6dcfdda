"""What a load run adds to its result: throughput, goodput, fluidity and the excluded ramp-up
and drain; and, for every run, the client's health and who bunched the tokens.  (Why a budget failed: ``core.why``.)
"""
from __future__ import annotations

from ..core import metrics as m
from ..core.goodput import fluidity, goodput
from ..core.record import RequestRecord
from ..core.result import WorkloadResult
from ..core.stats import percentile
from .load import LoadRun

#: the client fell behind when its threads woke this late (p99) ...
STARVED_LAG_MS = 20.0
#: ... and that lateness is at least this fraction of the ITL it measures
STARVED_LAG_OF_ITL = 0.5
#: bunched: more than this share of token gaps under 0.1 ms (``core.metrics.burst_chunks``) ...
BURST_SHARE = 0.1
#: ... by the client unless its lag p99 stayed under this fraction of the token interval (TPOT p50)
CLIENT_BUNCHING_LAG_OF_TPOT = 0.5
#: a server decoding faster than this (TPOT p50, ms) sends gaps under 0.1 ms on its own: not bunching
FAST_TOKEN_MS = 1.0


def _p(values: list[float], q: float) -> float | None:
    return percentile(sorted(values), q) if values else None


def events_per_read(records: list[RequestRecord]) -> float | None:
    """Token events per socket read: the adapters stamp once per read, so chunks with the same
    timestamp arrived in one read (1.0: every event read on its own)."""
    chunks = reads = 0
    for r in records:
        chunks += len(r.chunks)
        reads += len({c.t_ns for c in r.chunks})
    return chunks / reads if reads else None


def client_health(lag_ns: list[int], send_lag_ns: list[int], records: list[RequestRecord],
                  itl_p50: float | None) -> dict:
    """The client's scheduling lag (``LagMonitor`` wake-ups, and an open loop's late sends),
    events per read, and whether it fell behind."""
    lags = [x / 1e6 for x in lag_ns] + [x / 1e6 for x in send_lag_ns]
    out: dict = {}
    p99 = _p(lags, 99)
    if p99 is not None:
        out["client_lag_ms_p50"] = round(_p(lags, 50), 3)
        out["client_lag_ms_p90"] = round(_p(lags, 90), 3)
        out["client_lag_ms_p99"] = round(p99, 3)
        out["client_lag_ms_max"] = round(max(lags), 3)
    sched = [v for v in (m.client_lag_ms(r) for r in records) if v is not None]
    if sched:
        out["client_send_lag_ms_p99"] = round(_p(sched, 99), 3)
    epr = events_per_read(records)
    if epr is not None:
        out["events_per_read"] = round(epr, 3)
    behind = p99 is not None and p99 >= STARVED_LAG_MS and (itl_p50 is None or p99 >= STARVED_LAG_OF_ITL * itl_p50)
    out["client_fell_behind"] = int(behind)
    return out


def client_summary(res: WorkloadResult, lag_ns: list[int], send_lag_ns: list[int] = (), *,
                   engine: bool = True) -> None:
    """Every run: the client's health (extra keys) and who bunched the tokens when many arrived
    together (``bunching``).  A load-engine run (``engine``) whose client fell behind is
    a fact for the checks (an error); a run of one stream at a time says so in the bunching note (its one thread reads
    as soon as it runs, so a lag there delays stamps by less than what it measures)."""
    itl50 = res.completed["itl"].p50 if "itl" in res.completed else None
    extra = res.extra
    extra.update(client_health(list(lag_ns), list(send_lag_ns), res.records, itl50))
    if extra["client_fell_behind"] and engine:  # an error (core.checks.measurement_validity)
        res.facts.client_fell_behind = True
    bunching(res)


def bunching(res: WorkloadResult) -> None:
    """Token chunks arriving < 0.1 ms after the previous one (``burst_chunks``) on more than
    ``BURST_SHARE`` of the gaps make ITL look falsely small.  Who bunched them:

    * the client, unless 99 % of its wake-ups came within ``CLIENT_BUNCHING_LAG_OF_TPOT`` of a
      token interval (lag p99 against TPOT p50), or when it fell behind: the events waited in
      the socket for a client that was busy, and were read together.  ``client_limited`` = 1
      and a note that names the client, never a proxy;
    * a buffering proxy or compression only when the client was demonstrably idle (its lag
      measured, and below that).  Without a lag or a TPOT the cause is left open."""
    extra = res.extra
    records = res.records
    chunks = sum(max(len(r.chunks) - 1, 0) for r in records)
    bursts = sum(m.burst_chunks(r) for r in records)
    extra["burst_chunks"] = bursts
    behind = bool(extra.get("client_fell_behind"))
    extra["client_limited"] = int(behind)
    tpot = res.completed["tpot"].p50 if "tpot" in res.completed and res.completed["tpot"].n else None
    if not chunks or bursts <= BURST_SHARE * chunks or (tpot is not None and tpot < FAST_TOKEN_MS):
        return  # few bursts, or a server whose tokens come that fast anyway
    lag = extra.get("client_lag_ms_p99")
    said = f"{bursts} of {chunks} token chunks arrived < 0.1 ms after the previous one"
    if lag is None or tpot is None:
        res.notes.append(f"{said} (ITL then looks falsely small); the client's lag could not be set against the "
                         f"token interval, so whether a buffering proxy, compression or a busy client bunched "
                         f"them is not known")
    elif behind or lag >= CLIENT_BUNCHING_LAG_OF_TPOT * tpot:
        extra["client_limited"] = 1
        res.notes.append(f"client-limited: {said} while the client's own threads woke up late (lag p99 {lag:.2f} "
                         f"ms against a {tpot:.2f} ms token interval; {extra.get('events_per_read')} events per "
                         f"read): the client read them late, bunched, not a proxy (ITL looks falsely small) -- "
                         f"give the test process a CPU of its own, or fewer streams")
    else:
        res.notes.append(f"{said} while the client was idle (lag p99 {lag:.2f} ms against a {tpot:.2f} ms token "
                         f"interval): a buffering proxy or compression may be bunching tokens (ITL then looks "
                         f"falsely small)")


def load_summary(res: WorkloadResult, run: LoadRun) -> None:
    """Extra keys (JSON, JUnit ``llm.*``) and notes for a run of the load engine."""
    w = res.workload
    window_s = run.window_ns / 1e9
    extra = res.extra
    extra["load_mode"] = run.mode
    if w.load is not None and w.load.open_loop:
        extra["offered_rate_rps"] = w.load.rate
        extra["arrival"] = w.load.arrival
    if window_s > 0:
        extra["window_s"] = round(window_s, 4)
        done = len(res.records) + len(res.failures)
        extra["throughput_rps"] = round(done / window_s, 4)
        extra["output_tok_s"] = round(sum(r.output_tokens for r in res.records) / window_s, 3)
        g = goodput(res.records, len(res.failures), w.budgets, window_s)
        if g is not None:
            extra["goodput_rps"] = round(g.per_s, 4)
            extra["goodput_fraction"] = round(g.fraction, 4)
    fl = fluidity(res.records, res.failures, w)
    if fl is not None:
        extra["fluidity_index"] = round(fl, 4)
    itl = res.summaries.get("itl")
    if itl is not None and itl.n:
        extra["itl_ms_p99_under_load"] = round(itl.p99, 4) if itl.p99 != float("inf") else "inf"
    if run.mode == "closed":
        extra["ramp_excluded"] = len(run.ramp)
        extra["drain_excluded"] = len(run.drain)
        res.notes.append(f"closed loop at concurrency {w.concurrency}: {len(res.records) + len(res.failures)} "
                         f"requests measured at full concurrency; {len(run.ramp)} ramp-up and {len(run.drain)} "
                         f"drain requests (at lower concurrency) excluded")
    if run.prompts_short:
        res.notes.append("ran out of prepared prompts before the bound was reached: fewer samples than asked")
    if run.stopped:
        res.notes.append(f"stopped early: a request was rejected ({run.stopped}) as every other would be; "
                         f"{run.unsent} request(s) were not sent")
