"""``rate_sweep``: the highest request rate that still meets the SLO, by bisection over the rate.

Pure: ``bisect_rate(run_at, spec)`` calls ``run_at(rate) -> Step`` (one open-loop run at that
rate, judged against the workload's budgets) at most ``max_steps`` times:

1. ``rate_max``: if it passes, the capacity is at least ``rate_max`` (said so, not guessed);
2. ``rate_min``: if it fails, the capacity is below ``rate_min``;
3. the geometric midpoint of the highest passing and the lowest failing rate, until they are
   within ``tolerance`` of each other or the steps run out.

The capacity reported is the highest rate that passed; the curve is every step, in rate order.
A step whose run could not be judged (``unjudged``: its client fell behind, a cached sample) is
neither a pass nor a fail: the bisection goes on below it, and the capacity stands only when a
step the *server* failed brackets it (``unjudged_bracket`` is None); otherwise the sweep is an
error (``core.checks.sweeps``) -- a fail would put the client's limit into the capacity.  A step
that lost a worker process or Ray node (``stopped``) ends the sweep there: the run is an error
whatever the other steps say.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..errors import ConfigError

SWEEP_KEYS = ("rate_min", "rate_max", "max_steps", "tolerance", "capacity_min")


@dataclass(frozen=True)
class SweepSpec:
    rate_min: float
    rate_max: float
    max_steps: int = 8
    tolerance: float = 0.05           # stop when lowest failing / highest passing - 1 <= this
    capacity_min: float | None = None  # a floor on the capacity (req/s): the sweep's own budget


@dataclass(frozen=True)
class Step:
    rate: float
    passed: bool
    summary: str = ""                 # what decided it (the failure's first line, or key figures)
    stopped: bool = False             # a worker or node lost: neither pass nor fail; it ends the sweep
    unjudged: bool = False            # its run was an error (the client fell behind...): neither; bisect below it


@dataclass
class SweepResult:
    spec: SweepSpec
    steps: list[Step] = field(default_factory=list)

    @property
    def capacity(self) -> float | None:
        ok = [s.rate for s in self.steps if s.passed and not s.stopped]
        return max(ok) if ok else None

    @property
    def lowest_failing(self) -> float | None:
        """The lowest rate the server failed (an unjudged or stopped step is not one)."""
        bad = [s.rate for s in self.steps if not s.passed and not s.stopped and not s.unjudged]
        return min(bad) if bad else None

    @property
    def unjudged_bracket(self) -> Step | None:
        """The lowest unjudged step above the capacity and below the lowest failing rate, if any:
        the capacity's upper bracket is then not the server's (None: the server's fail brackets it)."""
        cap, bad = self.capacity or 0.0, self.lowest_failing
        above = [s for s in self.steps if s.unjudged and s.rate > cap and (bad is None or s.rate < bad)]
        return min(above, key=lambda s: s.rate) if above else None

    @property
    def stopped_at(self) -> Step | None:
        """The step that ended the sweep unjudged (a worker lost), if one did."""
        return next((s for s in self.steps if s.stopped), None)

    @property
    def bounded(self) -> str:
        """'' when bracketed (or stopped, or bracketed by an unjudged step), else which end it ran into."""
        if self.stopped_at is not None or self.unjudged_bracket is not None:
            return ""
        if self.capacity is None:
            return f"below rate_min {self.spec.rate_min:g} req/s"
        if self.lowest_failing is None:
            return f"at least rate_max {self.spec.rate_max:g} req/s"
        return ""

    def curve(self) -> list[Step]:
        return sorted(self.steps, key=lambda s: s.rate)

    def describe(self) -> str:
        cap, bad, stop, unjudged = self.capacity, self.lowest_failing, self.stopped_at, self.unjudged_bracket
        if stop is not None:
            head = f"stopped at {stop.rate:.3g} req/s, not judged ({stop.summary})"
        elif unjudged is not None:
            head = (f"capacity {'at least ' + format(cap, '.3g') + ' req/s' if cap is not None else 'unknown'}, "
                    f"not judged at {unjudged.rate:.3g} req/s ({unjudged.summary})")
        elif self.bounded:
            head = f"capacity {self.bounded}"
        else:
            head = f"capacity {cap:.3g} req/s (passes; {bad:.3g} req/s fails)"
        pts = ", ".join(f"{s.rate:.3g} {'pass' if s.passed else 'ERROR' if s.stopped or s.unjudged else 'FAIL'}"
                        for s in self.curve())
        return f"{head} after {len(self.steps)} steps: {pts}"


def bisect_rate(run_at: Callable[[float], Step], spec: SweepSpec) -> SweepResult:
    res = SweepResult(spec)

    def step(rate: float) -> bool:
        s = run_at(rate)
        res.steps.append(s)
        return s.passed

    def over() -> bool:
        return len(res.steps) >= spec.max_steps or res.steps[-1].stopped

    if step(spec.rate_max) or over():
        return res
    if not step(spec.rate_min) or over():
        return res
    lo, hi = spec.rate_min, spec.rate_max
    while not over() and hi / lo - 1 > spec.tolerance:
        mid = math.sqrt(lo * hi)
        if step(mid):
            lo = mid
        else:
            hi = mid
    return res


def make_sweep(spec: Mapping[str, Any] | None, where: str) -> SweepSpec | None:
    """``rate_sweep: {rate_min, rate_max, max_steps, tolerance, capacity_min}`` of a workload."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: expected a mapping like {{rate_min: 1, rate_max: 64}}")
    for k in spec:
        if k not in SWEEP_KEYS:
            raise ConfigError(f"{where}.{k}: unknown key {k!r} -- allowed: {', '.join(SWEEP_KEYS)}")

    def pos(key, default=None):
        v = spec.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ConfigError(f"{where}.{key}: expected a positive number, got {v!r}")
        return float(v)

    lo, hi = pos("rate_min"), pos("rate_max")
    if lo is None or hi is None:
        raise ConfigError(f"{where}: rate_sweep needs rate_min and rate_max (requests/s), e.g. "
                          f"{{rate_min: 1, rate_max: 64}}")
    if lo >= hi:
        raise ConfigError(f"{where}: rate_min ({lo:g}) must be below rate_max ({hi:g})")
    steps = spec.get("max_steps", 8)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 2 <= steps <= 30:
        raise ConfigError(f"{where}.max_steps: expected an integer from 2 to 30, got {steps!r}")
    tol = pos("tolerance", 0.05)
    return SweepSpec(lo, hi, steps, tol, pos("capacity_min"))
