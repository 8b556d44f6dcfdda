"""How a workload offers its load (``rate``/``arrival``/``burstiness``, ``requests``/``duration``,
``ramp_up``): the ``Load`` spec the engine in ``client/load.py`` runs.  Pure."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .budgets import did_you_mean, parse_duration_ms, parse_positive_number
from .errors import ConfigError

@dataclass(frozen=True)
class Load:
    """How the load is offered (``client/load.py``).  ``rate`` set: open loop, requests due on a
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
