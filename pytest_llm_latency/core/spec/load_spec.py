"""How a workload offers its load (``rate``/``arrival``/``burstiness``, ``requests``/``duration``,
``ramp_up``): the ``Load`` spec the engine in ``client/load/engine.py`` runs.  Pure."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from .budgets import did_you_mean, parse_duration_ms, parse_positive_number
from ..errors import ConfigError

@dataclass(frozen=True)
class Load:
    """How the load is offered (``client/load/engine.py``).  ``rate`` set: open loop, requests due on a
    seeded ``arrival`` schedule; else closed loop at ``concurrency`` with ``ramp_up_s`` to reach
    it.  Bounded by the workload's ``samples`` (``requests:``) and/or ``duration_s``."""

    rate: float | None = None         # requests/s (open loop)
    arrival: str = "poisson"          # poisson | gamma | constant
    burstiness: float = 1.0           # gamma shape
    duration_s: float | None = None   # stop sending after this long
    ramp_up_s: float = 0.0            # closed loop: workers start spread over this time

    @property
    def open_loop(self) -> bool:
        return self.rate is not None


#: the request cap of a ``duration:``-bounded run without ``requests:``
DURATION_MAX_REQUESTS = 1000
LOAD_KEYS = ("rate", "arrival", "burstiness", "requests", "duration", "ramp_up", "rate_sweep")


def make_load(spec: Mapping[str, Any], where) -> "Load | None":
    """The load keys of a workload spec (None when none is given)."""
    from .schedule import ARRIVALS

    if not any(k in spec for k in ("rate", "arrival", "burstiness", "duration", "ramp_up")):
        return None
    rate = spec.get("rate")
    if rate is not None:
        rate = parse_positive_number(rate, where(("rate",)))
    arrival = spec.get("arrival", "poisson")
    if arrival not in ARRIVALS:
        raise ConfigError(f"{where(('arrival',))}: unknown arrival {arrival!r}{did_you_mean(arrival, ARRIVALS)} -- "
                          f"use one of {', '.join(ARRIVALS)}")
    if rate is None and ("arrival" in spec or "burstiness" in spec):
        raise ConfigError(f"{where(('arrival',))}: arrival/burstiness shape an open loop: set rate (requests/s)")
    burst = parse_positive_number(spec.get("burstiness", 1.0), where(("burstiness",)))
    if "burstiness" in spec and arrival != "gamma":
        raise ConfigError(f"{where(('burstiness',))}: burstiness is the shape of arrival: gamma; "
                          f"set arrival: gamma (got {arrival!r})")
    duration = spec.get("duration")
    duration_s = None if duration is None else parse_duration_ms(duration, where(("duration",))) / 1000.0
    ramp = spec.get("ramp_up")
    ramp_s = 0.0 if ramp in (None, 0) else parse_duration_ms(ramp, where(("ramp_up",))) / 1000.0
    if rate is not None and ramp_s:
        raise ConfigError(f"{where(('ramp_up',))}: ramp_up is for a closed loop (concurrency); "
                          f"an open loop (rate) has no ramp")
    return Load(rate=rate, arrival=arrival, burstiness=burst, duration_s=duration_s, ramp_up_s=ramp_s)


# ---------------------------------------------------------------------- workers: N | auto
#: ``workers: auto`` sizing (the default of the load engine's loops): ``core.spec.worker_sizing``
WORKERS_EXPECT = "an integer >= 1 or 'auto'"


def parse_workers(value: Any, where: str) -> "int | str":
    """``workers: N | auto`` (a YAML/marker value, or a CLI/env/ini string): 1 is one process; ``auto``
    (the default of the load engine's loops: ``default_workers``) sized by ``core.spec.worker_sizing``."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: expected {WORKERS_EXPECT} (worker processes sending the load), got {value!r}")
    return value


def workers_refusal(w: Any, workers: "int | str") -> str | None:
    """Why workload ``w`` (a ``core.spec.workload.Workload``) cannot spread over ``workers`` processes
    (None: it can -- an open loop, a closed loop of at least one stream per worker, ``samples: auto``
    rounds of at least one request per worker, a trace replay, or agent sessions with at least one
    session and one session slot per worker).  Worker processes shard the load engine's open-loop schedule, its
    closed loop's streams or each round's requests, or deal whole sessions; the rest is not (yet)
    supported.  A rate sweep (an open loop: every step over the workers) and an A/B run (every block
    of each arm, as its loop) spread as their loops do."""
    concurrency, samples = w.concurrency, w.samples
    if w.agent is not None and isinstance(workers, int):  # whole sessions per worker (client/agent/workers.py)
        if samples is not None and workers > samples:
            return (f"agent sessions are dealt whole, at least one per worker, and samples (sessions) is {samples}: "
                    f"give workers <= {samples} (or raise samples)")
        if workers > concurrency:
            return (f"agent sessions at concurrency {concurrency} run at least one session at once per worker: "
                    f"give workers <= {concurrency} (or raise concurrency, or workers: auto)")
    if w.agent is not None:
        return None
    if w.prompt_sweep:
        return ("a prompt_sweep sends one request at a time by design (no queue in the TTFT it fits against "
                "prompt length); workers spread the load engine's loops (rate: or concurrency:)")
    # rounds of ``concurrency`` requests, each split over the workers (client/placement/processes/pool.py)
    if w.sequential:
        if concurrency < 2 or (isinstance(workers, int) and workers > concurrency):
            n = workers if isinstance(workers, int) else "the workers"
            return (f"samples: auto sends rounds of {concurrency} request{'s' if concurrency != 1 else ''}, at "
                    f"least one per worker: give workers <= {concurrency} (or concurrency >= {n})")
        return None
    if w.trace is not None:
        return None  # whole sessions per worker (client/drivers/workers.py)
    if w.load is not None and w.load.open_loop:
        return None
    if concurrency < 2:
        return ("workers spread the load engine's loops over processes: give rate: R (requests/s) "
                "or concurrency: C (streams, C >= the workers)")
    if isinstance(workers, int) and workers > concurrency:
        return (f"a closed loop at concurrency {concurrency} runs at least one stream per worker: "
                f"give workers <= {concurrency} (or workers: auto)")
    return None


def resolve_workers(workers: "int | str", in_flight: int, cpus: int | None, *, local: bool = True) -> int:
    """The number of worker processes before any warm-up: ``N`` as given; ``auto`` =
    ``core.spec.worker_sizing.size_workers`` without a measured token rate (one per
    ``STREAMS_PER_PROCESS`` streams in flight, rounded up), at most one per stream, at most one per
    CPU but one when the target is on this host (``local``), at least 1."""
    from .worker_sizing import size_workers

    return size_workers(workers, streams=in_flight, cpus=cpus, local=local).count


def spreads_by_default(w: Any) -> bool:
    """Does ``w`` (a ``core.spec.workload.Workload``) default to ``workers: auto``?  The load engine's
    loops do -- an open loop, a closed loop at concurrency > 1 (``samples: auto`` rounds too), a
    trace replay, a rate sweep's steps -- where ``workers_refusal`` lets ``auto`` through; agent
    sessions, A/B runs and server sweeps stay in one process unless ``workers`` is given (an A/B or
    sweep block would spawn and warm its processes anew; agent sessions are sized by their own session
    slots), and so does whatever refuses workers (a prompt sweep, one stream at a time): never an error."""
    if w.agent is not None or w.baseline_target is not None or w.server_sweep is not None:
        return False
    return workers_refusal(w, "auto") is None


def default_workers(w: Any) -> Any:
    """``w`` with the default ``workers`` of a spec that does not give one: ``auto`` where it spreads
    by default (``spreads_by_default``), else 1 (one process, as before)."""
    return replace(w, workers="auto" if spreads_by_default(w) else 1)


def with_workers(w: Any, value: Any, where: str, *, run_wide: bool = False) -> Any:
    """``w`` (a ``core.spec.workload.Workload``) sent by ``value`` worker processes (``workers: N | auto``).
    Only the load engine's loops (an open loop; a closed loop of >= 1 stream per worker) spread over
    workers: elsewhere a ``ConfigError`` naming why, or, for a run-wide setting
    (``--llm-latency-workers``, env, ini: ``run_wide``), ``w`` unchanged (one process)."""
    workers = parse_workers(value, where)
    if workers == 1:
        return replace(w, workers=1)
    why = workers_refusal(w, workers)
    if why is None:
        return replace(w, workers=workers)
    if run_wide:
        return w
    raise ConfigError(f"{where}: {workers} worker processes -- {why}; or drop workers (one process)")


def with_ray(w: Any, value: Any, where: str, *, run_wide: bool = False, workers_given: bool = False) -> Any:
    """``w`` sent by one shard per node of the Ray cluster at ``value`` (``ray: ADDRESS``, a
    ``host:port`` or ``ray://host:port``): what ``workers`` spreads (an open loop, a closed loop, a
    trace replay, agent sessions, ``samples: auto`` rounds, a rate sweep), under the same rules;
    ``workers: N`` (default: ``auto``, one per node; a ``workers: 1`` given with it: one node) is then
    the number of nodes.  An A/B run and a server sweep are refused.  A run-wide setting leaves the rest
    alone (and takes a workload's ``workers: 1`` for the default)."""
    if not isinstance(value, str) or not value.strip() or any(ch.isspace() for ch in value.strip()):
        raise ConfigError(f"{where}: expected a Ray cluster address (host:port or ray://host:port), got {value!r}")
    why: str | None = None  # the Ray-only reason first: it names the real limit, not a count
    if w.baseline_target is not None or w.server_sweep is not None:
        what = "an A/B run (baseline_target)" if w.baseline_target is not None else "a server sweep (server_sweep)"
        why = (f"{what} on Ray nodes is not yet supported: every block of every arm would "
               "place its Ray actors anew, seconds for a block of a few requests (worker processes of this host: "
               "workers: N)")
    if why is None:
        why = workers_refusal(w, w.workers)
        why = why and f"with ray, workers is the number of nodes: {why}"
    if why is None:
        return replace(w, ray=value.strip(), workers="auto" if w.workers == 1 and not workers_given else w.workers)
    if run_wide:
        return w
    raise ConfigError(f"{where}: one shard per Ray node -- {why}; or drop ray")
