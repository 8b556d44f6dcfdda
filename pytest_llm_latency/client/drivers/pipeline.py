"""The pipeline every sample driver runs in: pick a token counter, build prompts, measure the
cold start, warm up, scrape ``/metrics`` around the samples, let the driver send them, and
record what was measured (statistics, facts for the checks, the typed parts' figures).  Never judges."""
from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

import httpx

from ...core.measure import coldstart, metrics as m, reasoning
from ...core.errors import MeasurementError
from ...core.result.facts import ColdStarts
from ...core.prompts.synthesis import Prompt
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure, WorkloadResult, is_deterministic_rejection, measured, unprepared
from ...core.result.result_parts import ClientHealth
from ...core.measure.verdict import SequentialVerdicts
from ...core.spec.workload import Workload
from ..prepare.chunk_counts import CountRecovery
from ..transport.http import ensure_connections
from ..load.engine import LagMonitor
from ..placement.plan import in_flight, planned_requests
from .load_report import client_summary, load_summary
from ..server.pools import fetch_pools, record_pools
from ..server.server_view import ServerTimeline
from ..prepare.tokens import model_note, new_nonce, prepare_prompts
from ...core.spec.mix_spec import window
from ..load.send_one import no_gc_pauses as _no_gc_pauses, sender
from . import structured_run
from .base import Run, Sent

if TYPE_CHECKING:
    from .base import SampleDriver


def measure_samples(client, workload: Workload, run: Run, driver: "SampleDriver") -> WorkloadResult:
    """Measure ``workload`` on ``client``, sending its samples with ``driver``; never raises for a
    server fault (counted as failure).  The result is a measurement: ``core.checks.judge`` gives
    it its verdict.

    ``run.seed`` fixes the prompt bodies; the salts come from ``run.nonce`` (the run's: a fresh
    one when None) and ``run.salt_context`` (which measurement of the run this is, so that two
    measurements of one workload in a run never share prompts)."""
    seed, nonce, salt_context, counter, extra = run.seed, run.nonce, run.salt_context, run.counter, run.extra
    notes: list[str] = []
    info: dict[str, str] = {}
    sending = structured_run.sent_workload(workload)  # with unconstrained twins: twice the samples
    nonce = new_nonce() if nonce is None else nonce
    try:
        model = model_note(client)
        notes += [model] if model else []
        own = getattr(driver, "prepare", None)  # a driver with prompts of its own (trace replay)
        if own is not None:
            prompts, how = own(client, workload, seed=seed, nonce=f"{nonce}|{salt_context}", counter=counter)
        else:
            # a mix's class sequence cycles over the measured samples, not the planned extras (core.spec.mix_spec)
            to_plan = replace(sending, samples=planned_requests(sending),
                              mix=window(sending.mix, sending.mix.start, sending.mix.cycle or sending.samples)
                              if sending.mix is not None else None)
            prompts, how = prepare_prompts(client, to_plan, seed=seed, nonce=f"{nonce}|{salt_context}",
                                           counter=counter)
        prompts = structured_run.ask(prompts, workload)  # a structured workload's schema, and its twins
        if how:
            info["prompt_counter"] = how  # information, not a note (notes are warnings)
    except (MeasurementError, httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        kind = getattr(exc, "kind", "tokenize")
        msg = exc.message if isinstance(exc, MeasurementError) else \
            f"{type(exc).__name__}: {client_redact(client, str(exc))}"
        res = unprepared(workload, Failure(kind, msg))  # a fail or an error by kind (core.checks.samples)
        res.measurement.nonce = nonce
        return res

    one = sender(client, workload.output_tokens, extra)
    cold_prompt = prompts.pop() if workload.cold_budget else None  # prepared last: the samples' salts stay put
    cold_outcome = measure_cold_start(client, one, cold_prompt) if cold_prompt is not None else None
    ensure_connections(getattr(client, "http", None), in_flight(sending))  # keep every connection alive
    warmed = warm_up_outcomes(one, prompts[:workload.warmup], workload.concurrency)
    warm_failures = [o for o in warmed if isinstance(o, Failure)]
    if warm_failures:  # one note, not one per request
        notes.append(f"{len(warm_failures)} warm-up request(s) failed: {warm_failures[0].message}")
    samples = prompts[workload.warmup:]
    outcomes: list[RequestRecord | Failure] = []
    if warm_failures and is_deterministic_rejection(warm_failures[0].kind):  # the samples would get it too
        samples, outcomes = [], [warm_failures[0]]
        notes.append(f"stopped before the samples: a warm-up request was rejected ({warm_failures[0].kind}), "
                     f"as every sample would be")
    resize = getattr(driver, "resize", None)  # workers: N | auto, sized now, with the warm-up's token rate
    if resize is not None and samples:
        driver, samples = resize(sending, warmed, samples)
    before = scrape(client)
    pools_before = fetch_pools(client, run.disagg)  # a disaggregated target's pools (issue 37)
    late = bool(samples) and getattr(driver, "warms_in_send", False)  # worker processes, Ray nodes
    ready: dict[str, Any] = {}
    if late and (before is not None or run.disagg is not None):  # "before": once the workers' warm-ups are done
        run = replace(run, on_ready=lambda: ready.update(before=scrape(client) if before is not None else None,
                                                         pools=fetch_pools(client, run.disagg)))
    recovery = CountRecovery(client, workload)  # per-chunk token counts the streams did not give
    engine = bool(samples) and driver.engine
    with _no_gc_pauses(), ServerTimeline(client, before) as timeline, \
            contextlib.nullcontext() if engine else LagMonitor() as lag:  # the load engine has its own
        sent = driver.send(one, samples, sending, run, recovery.apply) if samples else Sent()
    never_ready = late and "pools" not in ready and run.disagg is not None
    if late:  # no reading when no worker got ready: no deltas (the run is an error naming the worker)
        before, pools_before = ready.get("before"), ready.get("pools", {})
    outcomes += sent.outcomes
    outcomes, twins = structured_run.split_twins(outcomes)
    notes += sent.notes
    load_run, sequential = sent.load_run, sent.sequential
    after = scrape(client) if before is not None else None
    pools_after = fetch_pools(client, run.disagg)
    records = [o for o in outcomes if isinstance(o, RequestRecord)]
    failures = [o for o in outcomes if isinstance(o, Failure)]
    recovery.apply(records)  # after the samples: off every stream's timing path
    cold_numbers, cold = coldstart.split(records)
    if cold and workload.cold_starts == "exclude":  # the load is not the server's serving latency
        records = [r for r in records if not any(r is c for c in cold)]
    res = measured(workload, records, failures, sequential=sequential)
    structured_run.record_structured(res, twins)
    res.measurement.set(**stop_info(workload, sequential, len(outcomes)))
    record_cold_starts(res, cold_numbers, cold, len(outcomes), cold_outcome)
    scraped = None
    if before is not None and after is not None:
        from ..server.prometheus import delta

        scraped = delta(before, after)
        res.server.metrics.update({k: round(v, 6) for k, v in scraped.items()})
    res.measurement.nonce = nonce
    if load_run is not None:
        load_summary(res, load_run)
    sizing = getattr(driver, "worker_sizing", None)  # how many processes ran and why (load.workers_reason)
    if sizing is not None:
        res.load.workers = res.load.workers or sizing.count
        res.load.workers_reason = sizing.reason
    lags = (load_run.lag_ns, load_run.send_lag_ns) if load_run else (lag.samples if lag is not None else [], [])
    stalls = load_run.lag_timeline if load_run else (lag.timeline() if lag is not None else None)
    client_summary(res, *lags, engine=engine, timeline=stalls)
    if timeline is not None:
        timeline.attach(res, records, failures)
    record_prefix_cache(res, scraped)
    record_pools(res, run.disagg, pools_before, pools_after, never_ready=never_ready)
    record_spec_decode(res, records, before, after, timeline, len(failures))
    res.server.set(**server_timing_summary(records))
    deviations = [r.prompt_deviation for r in records if r.prompt_deviation]
    if deviations:
        planned = "rows' input_length" if workload.trace is not None else \
            "drawn lengths" if workload.prompt_dist is not None else \
            "classes' lengths" if workload.mix is not None else workload.prompt_tokens
        res.notes.append(f"prompt_tokens deviated from the planned {planned} on {len(deviations)} "
                         f"of {len(records)} requests (by {min(deviations):+d}..{max(deviations):+d} tokens)")
    counted, count_notes, res.facts.per_chunk_itl = recovery.report(records)
    res.measurement.set(**counted)
    res.notes += count_notes
    reasoned, reasoning_notes = reasoning.totals(records)  # after the counts were recovered
    res.measurement.set(**reasoned)
    res.notes += reasoning_notes
    connection_counts(records, res.client)
    retried = [r.retries for r in records if r.retries]
    if retried:
        res.notes.append(f"{len(retried)} requests succeeded after 429/503 retries ({sum(retried)} retries in all)")
    res.notes[:0] = notes
    res.measurement.set(**info, prompt_deviation_requests=len(deviations),
                        prompt_exact_requests=sum(1 for r in records if r.prompt_deviation == 0), retries=sum(retried))
    return res


def stop_info(workload: Workload, sequential: SequentialVerdicts | None, sent: int) -> dict:
    """Why sampling stopped (``llm.stop_reason``) and how many samples were sent."""
    if sequential is None:
        return {"samples_mode": "fixed", "stop_reason": f"fixed samples ({sent})"}
    why = sequential.stop_reason(sent, workload.samples)
    return {"samples_mode": "auto", "stop_reason": why, "min_samples": workload.min_samples,
            "max_samples": workload.samples}


def measure_cold_start(client, one: Callable[[Prompt], "RequestRecord | Failure"],
                       prompt: Prompt) -> "RequestRecord | Failure":
    """The ``cold_ttft_max`` request: unload the model (Ollama ``keep_alive: 0``), then send one
    request, which loads it inside its TTFT (``core.measure.coldstart``)."""
    unload = getattr(client, "unload", None)
    if unload is None:
        return Failure("config", f"{coldstart.COLD_BUDGET} needs a server whose model can be unloaded on request: "
                                 f"use --llm-latency-api ollama or ollama-chat")
    try:
        unload()
    except MeasurementError as exc:
        return Failure.from_error(exc)
    return one(prompt)


def record_cold_starts(res: WorkloadResult, numbers: list[int], cold: list[RequestRecord], total: int,
                       cold_outcome: "RequestRecord | Failure | None") -> None:
    """Cold samples counted and named (``res.cold_start``) and the
    ``cold_ttft_max`` request's figures; the facts for ``core.checks.cold_starts``."""
    if cold or any(coldstart.load_ms(r) is not None for r in res.records):  # servers that report loads
        res.cold_start.cold_starts = len(cold)
    if cold:
        res.cold_start.cold_start_samples = ",".join(map(str, numbers))
    res.facts.cold = ColdStarts(list(numbers), list(cold), total, cold_outcome)
    if isinstance(cold_outcome, RequestRecord) and res.workload.cold_budget is not None:
        ttft = m.ttft_ms(cold_outcome)
        res.cold_start.cold_ttft_ms = round(ttft, 4) if ttft is not None else None
        res.cold_start.cold_load_ms = round(coldstart.load_ms(cold_outcome) or 0.0, 4)


def warm_up(one: Callable[[Prompt], "RequestRecord | Failure"], prompts: list[Prompt],
            concurrency: int) -> list[Failure]:
    """The failures of ``warm_up_outcomes``."""
    return [o for o in warm_up_outcomes(one, prompts, concurrency) if isinstance(o, Failure)]


def warm_up_outcomes(one: Callable[[Prompt], "RequestRecord | Failure"], prompts: list[Prompt],
                     concurrency: int) -> list["RequestRecord | Failure"]:
    """Unmeasured requests at the workload's concurrency, so every connection the samples will use is
    open before measuring: ``max(len(prompts), concurrency)`` (the prompts reused in turn), the first
    ``concurrency`` started together (a barrier).  Every outcome: the records' chunk stamps size
    ``workers: auto`` (``client.placement.Placement.shares``)."""
    if not prompts:
        return []
    batch = [prompts[i % len(prompts)] for i in range(max(len(prompts), concurrency))]
    if concurrency == 1:
        return [one(p) for p in batch]
    barrier = threading.Barrier(concurrency, timeout=30.0)

    def go(indexed: tuple[int, Prompt]):
        i, p = indexed
        if i < concurrency:  # the first ``concurrency`` start together
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        return one(p)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="llm-latency-warmup") as pool:
        return list(pool.map(go, enumerate(batch)))


def connection_counts(records: list[RequestRecord], client: ClientHealth) -> None:
    """Samples that paid a connect (``connect_ms``, outside TTFT) or were re-sent after a
    stale keep-alive connection, counted in ``client`` (JSON ``client.connect_samples`` ...).
    Information, not a note: neither is inside TTFT, and servers that close kept-alive
    connections every few requests (llama.cpp's cpp-httplib) would warn on every run."""
    import statistics

    connects = [c for c in (m.connect_ms(r) for r in records) if c is not None]
    client.connect_samples = len(connects)
    client.reconnected_samples = sum(1 for r in records if r.reconnected)
    if connects:
        client.connect_ms_p50 = round(float(statistics.median(connects)), 4)


def record_spec_decode(res: WorkloadResult, records: list[RequestRecord], before, after,
                       timeline: ServerTimeline | None, failed: int = 0) -> None:
    """Tokens per engine step and the draft acceptance (``core.measure.spec_decode``, the one definition)
    on ``res.spec_decode``; nothing when no source says the server speculates."""
    from ...core.measure import spec_decode

    gauges = timeline.gauges() if timeline is not None else []
    acc = spec_decode.acceptance(records, before.counters if before is not None else None,
                                 after.counters if after is not None else None, gauges)
    if acc is None:
        return
    res.spec_decode.set(**spec_decode.as_part(acc, spec_decode.decode_time_ms(records)))
    res.notes += list(acc.notes)
    if failed and acc.scope != "per request":  # the server's counters also count the failed requests' decode
        res.notes.append(f"speculative decoding ({acc.source}): {failed} request(s) failed during the samples; "
                         "the server's figures include what they decoded, the decode tokens do not, so tokens "
                         "per step may be a little off")


def record_prefix_cache(res: WorkloadResult, metrics_delta: dict[str, float] | None) -> None:
    """What the server served from its prefix cache during the samples (``core.measure.prefix_cache``), for
    ``core.checks.measurement_validity.check_prefix_cache``."""
    from ...core.measure.prefix_cache import evidence

    records = res.records
    cached = [bool(r.server_timings.get("prompt_cached")) for r in records]
    if any(cached):  # Ollama omitted prompt_eval_count: the whole prompt came from its cache
        ev = evidence(None, [(r.expected_prompt_tokens or 0) if c else 0 for r, c in zip(records, cached)],
                      [r.prompt_tokens or r.expected_prompt_tokens or 0 for r in records],
                      source=f"Ollama omitted prompt_eval_count on {sum(cached)} of {len(records)} responses: "
                             f"served from Ollama's prompt cache")
    else:
        ev = evidence(metrics_delta, [r.server_timings.get("cache_n") for r in records],
                      [r.prompt_tokens or 0 for r in records])
    if ev is None:
        return
    res.prefix_cache.cached_tokens = ev.cached_tokens
    groups = res.workload.shared_prefix_groups
    if groups is not None:
        from ...core.measure.prefix_cache import expected_shared

        res.prefix_cache.expected_cached_tokens = expected_shared(groups.tokens, ev.requests)
    res.facts.prefix_cache = ev


def client_redact(client, text: str) -> str:
    r = getattr(client, "redact", None)
    return r(text) if r else text


def scrape(client):
    """A /metrics scrape around the samples (never around probes or warm-up)."""
    from ..server.prometheus import scrape as scrape_metrics

    try:
        return scrape_metrics(client.http, client.base_url, client.timeouts.connect_s + 5)
    except MeasurementError:
        return None


def server_timing_summary(records: list[RequestRecord]) -> dict[str, float]:
    """p50 of the server's own prefill and per-token decode times, where it reports them."""
    import statistics

    out = {}
    for key, name in (("prefill_ms", "server_prefill_ms_p50"), ("predicted_per_token_ms", "server_tpot_ms_p50")):
        vals = [r.server_timings[key] for r in records if isinstance(r.server_timings.get(key), (int, float))]
        if vals:
            out[name] = round(float(statistics.median(vals)), 4)
    return out
