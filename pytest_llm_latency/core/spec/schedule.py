"""Open-loop arrival schedules: when each request is *due*, fixed before the run.

Pure and seeded: the same ``(rate, arrival, burstiness, seed)`` always gives the same
schedule, so two runs of a test send the same load.  Times are seconds from the start of the
measured run.

* ``poisson``   exponential inter-arrival times with mean ``1/rate`` (memoryless arrivals);
* ``gamma``     gamma inter-arrival times with shape ``burstiness`` and mean ``1/rate``:
                ``burstiness`` < 1 is burstier than Poisson, 1 is Poisson, > 1 smoother
                (vLLM ``benchmarks/serve.py --burstiness`` has the same meaning);
* ``constant``  exactly ``1/rate`` apart.

The load engine (``client/load/engine.py``) sends request ``i`` at ``t0 + offsets[i]`` and measures its
latency from that *scheduled* time (coordinated omission: a client that falls behind cannot
hide the server's queueing).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from itertools import accumulate

ARRIVALS = ("poisson", "gamma", "constant")


@dataclass(frozen=True)
class Arrival:
    rate: float                 # requests per second (> 0)
    kind: str = "poisson"       # one of ARRIVALS
    burstiness: float = 1.0     # gamma shape (> 0); 1.0 = Poisson

    def __post_init__(self):
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise ValueError(f"rate must be a positive number of requests per second, got {self.rate!r}")
        if self.kind not in ARRIVALS:
            raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, got {self.kind!r}")
        if not (math.isfinite(self.burstiness) and self.burstiness > 0):
            raise ValueError(f"burstiness must be > 0, got {self.burstiness!r}")


def gaps(arrival: Arrival, n: int, seed: int) -> list[float]:
    """``n`` inter-arrival times in seconds (the first is the gap before the first request)."""
    rng = random.Random(f"llm-latency-schedule|{seed}|{arrival.kind}|{arrival.rate!r}|{arrival.burstiness!r}")
    mean = 1.0 / arrival.rate
    if arrival.kind == "constant":
        return [mean] * n
    if arrival.kind == "poisson":
        return [rng.expovariate(arrival.rate) for _ in range(n)]
    shape = arrival.burstiness
    return [rng.gammavariate(shape, mean / shape) for _ in range(n)]


def offsets(arrival: Arrival, *, seed: int, n: int | None = None, duration_s: float | None = None,
            max_n: int = 1_000_000) -> list[float]:
    """Scheduled send times (s from the run's start; the first request at 0).

    Bounded by ``n`` requests, or by ``duration_s`` (every request due before it), or both
    (whichever ends first).  ``max_n`` caps a duration-bounded schedule."""
    if n is None and duration_s is None:
        raise ValueError("an open-loop schedule needs a bound: a number of requests or a duration")
    limit = max_n if n is None else min(n, max_n)
    want = limit if duration_s is None else min(limit, _duration_bound(arrival, duration_s))
    times = list(accumulate(gaps(arrival, want, seed)[1:], initial=0.0))[:want]  # the first request at 0
    return [t for t in times if duration_s is None or t < duration_s]  # gaps >= 0: the times never decrease


def _duration_bound(arrival: Arrival, duration_s: float) -> int:
    """Enough gaps for ``duration_s``, with margin for bursts."""
    return int(arrival.rate * duration_s * 1.5 + 10 * math.sqrt(arrival.rate * duration_s) + 10)


def planned_requests(arrival: Arrival, *, n: int | None, duration_s: float | None) -> int:
    """How many requests a schedule will hold at most (for preparing that many prompts)."""
    if duration_s is None:
        return int(n or 0)
    bound = _duration_bound(arrival, duration_s)
    return min(bound, n) if n is not None else bound
