"""How many samples a workload takes and how its budgets are decided: ``samples`` (a number or ``auto``),
``min_samples`` / ``max_samples``, ``confidence`` and ``inconclusive`` (docs/verdicts.md).

Pure: applied to a built ``core.spec.workload.Workload`` (``make_workload``, a run-wide CLI / env / ini
override, the fixture's keyword arguments); ``ConfigError`` names the key and the fix."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from .budgets import did_you_mean, parse_int
from ..errors import ConfigError

INCONCLUSIVE = ("fail", "warn", "pass")
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MAX_SAMPLES = 200
#: samples when none are given and the run is not ``auto`` (load runs, sweeps, sessions, ``confidence: null``)
DEFAULT_FIXED_SAMPLES = 20


def with_statistics(w: Any, spec: Mapping[str, Any], where, samples: Any = None, *,
                    samples_defaulted: bool = False) -> Any:  # a Workload (core.spec.workload imports this module)
    """Apply ``samples`` (an integer or ``auto``), ``min_samples``, ``max_samples``, ``confidence``
    and ``inconclusive`` from ``spec`` (keys absent keep ``w``'s).  ``confidence`` defaults to
    ``w``'s (``make_workload``: 0.95 for a closed-loop workload, None -- the point estimate -- for
    load runs, sweeps and agent sessions) and to 0.95 with ``samples: auto``;
    ``confidence: null`` (or ``"null"``) asks for the point estimate; where ``samples: auto`` was
    only the default (``samples_defaulted``, or ``w.samples_given`` False), it then falls back to
    ``DEFAULT_FIXED_SAMPLES``."""
    given = "samples" in spec or (samples is not None and not samples_defaulted) or w.samples_given
    samples = spec.get("samples", w.samples if not w.sequential else "auto") if samples is None else samples
    if samples == "auto" and (w.prompt_sweep or w.agent is not None or w.baseline_target is not None
                              or w.server_sweep is not None
                              or w.trace is not None or (w.structured is not None and w.structured.compares)
                              or w.mix is not None):
        # a run-wide ``auto`` (CLI, env, ini): sweeps, sessions, A/B, traces and mixes keep their own count
        samples = w.samples
    auto = samples == "auto"
    if not auto:
        samples = parse_int(samples, where(("samples",)), 1)
    lo = parse_int(spec.get("min_samples", w.min_samples), where(("min_samples",)), 1)
    hi = parse_int(spec.get("max_samples", w.samples if w.sequential else DEFAULT_MAX_SAMPLES),
              where(("max_samples",)), 1)
    if auto and lo > hi:
        raise ConfigError(f"{where(('min_samples',))}: min_samples ({lo}) must not exceed max_samples ({hi})")
    if not auto and ("min_samples" in spec or "max_samples" in spec):
        raise ConfigError(f"{where(('samples',))}: min_samples/max_samples apply to samples: auto only, "
                          f"got samples: {samples}")
    conf = spec["confidence"] if "confidence" in spec else w.confidence
    conf = None if conf in (None, "null", "none") else conf
    if auto and conf is None and not given:
        # samples: auto was only the default; the point estimate asked for gets the fixed default
        auto, samples, lo = False, DEFAULT_FIXED_SAMPLES, w.min_samples
    if conf is None and auto and "confidence" not in spec:
        conf = DEFAULT_CONFIDENCE
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0.5 <= conf < 1):
        raise ConfigError(f"{where(('confidence',))}: expected a confidence level in [0.5, 1) like 0.95, "
                          f"or null for the point estimate, got {conf!r}")
    if auto and conf is None:
        raise ConfigError(f"{where(('confidence',))}: samples: auto decides at a confidence: set confidence "
                          f"(e.g. 0.95), or use a fixed number of samples with confidence: null")
    inc = spec.get("inconclusive", w.inconclusive)
    if inc not in INCONCLUSIVE:
        raise ConfigError(f"{where(('inconclusive',))}: expected one of {', '.join(INCONCLUSIVE)}, got {inc!r}"
                          f"{did_you_mean(inc, INCONCLUSIVE)}")
    if auto and "max_samples" not in spec and not w.sequential:
        assert conf is not None  # auto without a confidence was refused above
        hi = default_horizon(w, float(conf), lo)
    return replace(w, samples=hi if auto else samples, sequential=auto, min_samples=min(lo, hi),
                   confidence=None if conf is None else float(conf), inconclusive=inc)


def default_horizon(w: Any, confidence: float, min_n: int) -> int:
    """``max_samples`` when none is given: 200, or the first of 300, 400, 600, 800, 1000 at which
    every budget can pass (a p99 at 95% needs 299), so that the default ``auto`` decides."""
    from ..measure.verdict import decidable

    for n in (DEFAULT_MAX_SAMPLES, 300, 400, 600, 800, 1000):
        if all(decidable(b.stat, b.metric, confidence, n, True, min(min_n, n)) for b in w.budgets):
            return n
    return DEFAULT_MAX_SAMPLES  # beyond 1000: check_min_samples names it
