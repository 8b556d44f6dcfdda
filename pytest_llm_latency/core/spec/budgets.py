"""Budgets and the values they are written in: durations with units, positive numbers,
fractions; ``did_you_mean`` for every "unknown key" message.  Pure.

Budget keys are ``<metric>_<stat>`` with metric in ttft, ttfo, tpot, itl, e2e and stat in
mean, p50, p90, p95, p99, max -- a ceiling in ms -- plus ``output_tps_min`` (a floor on the
slowest request's output tok/s), ``goodput_min``/``fluidity_min`` (fractions of the run) and
``cold_ttft_max`` (``core.measure.coldstart``), and the speculative-decoding floors ``tokens_per_step_min``
(tokens each engine step emitted, >= 1) and ``acceptance_rate_min`` (accepted ÷ drafted tokens,
in (0, 1]), figures of ``core.measure.spec_decode`` judged by ``core.checks.acceptance_budgets``;
``reasoning_tokens_<stat>``: a ceiling on the reasoning tokens of one request, a count
(``core.measure.metrics.reasoning_tokens``); ``kv_transfer_<stat>``: a ceiling in ms on a disaggregated
target's KV transfer, from its pools' own histograms (``core.measure.kv_transfer``), judged by
``core.checks.kv_transfer`` and kept out of the per-request budgets.
``itl_stall_<stat>`` / ``stall_max`` (``core.spec.stall_spec``):
ceilings in ms on the gaps that overlapped another request's long prefill, judged by ``core.checks.stalls``.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

from ..measure.coldstart import COLD_BUDGET
from ..measure.kv_transfer import METRIC as KV_TRANSFER
from ..errors import ConfigError
from ..measure.metrics import COUNT_METRICS, METRICS
from ..measure.stats import STATS
from .stall_spec import STALL_BUDGETS, STALL_METRIC, stall_stat

_UNITS_MS = {"ms": 1.0, "s": 1000.0, "sec": 1000.0, "us": 1e-3, "µs": 1e-3, "ns": 1e-6, "min": 60000.0}
#: units refused because a reader cannot tell what they mean ('500m': 500 ms typed short, or minutes?)
_AMBIGUOUS_UNITS = {"m": "did you mean 'ms' or 'min'?"}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)\s*$")

#: floors on fractions of the run (``core.result.goodput``): requests meeting every per-request budget,
#: and tokens meeting their deadline (Etalon's fluidity index)
FRACTION_BUDGETS = ("goodput_min", "fluidity_min")
#: floors on speculative decoding (``core.measure.spec_decode``): tokens per engine step and draft acceptance
ACCEPTANCE_BUDGETS = ("tokens_per_step_min", "acceptance_rate_min")
# cold_ttft_max: the first request after an unload (core.measure.coldstart), judged apart from the samples
#: ceilings (ms) on a disaggregated target's KV transfer, from the pools' histograms (``core.checks.kv_transfer``)
KV_TRANSFER_BUDGETS = tuple(f"{KV_TRANSFER}_{s}" for s in STATS)
BUDGET_KEYS = tuple(f"{m}_{s}" for m in METRICS + COUNT_METRICS for s in STATS) + ("output_tps_min", COLD_BUDGET) \
    + FRACTION_BUDGETS + ACCEPTANCE_BUDGETS + KV_TRANSFER_BUDGETS + STALL_BUDGETS
#: TTFT per prompt-length bucket, a list of buckets each (``core.spec.prompt_buckets``; judged by
#: ``core.checks.by_prompt``)
BY_PROMPT_KEYS = tuple(f"ttft_{s}_by_prompt" for s in STATS)


def did_you_mean(word: str, choices) -> str:
    word = str(word)
    swapped = [c for c in choices if c != word and sorted(c) == sorted(word)]  # '500sm': letters swapped
    near = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    if near:  # only the best and those nearly as close ('sample': samples, not min_samples)
        best = difflib.SequenceMatcher(None, word, near[0]).ratio()
        near = [c for c in near if difflib.SequenceMatcher(None, word, c).ratio() >= best - 0.15]
    close = (swapped + [c for c in near if c not in swapped])[:3]
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def parse_duration_ms(value: Any, where: str) -> float:
    """``500`` → 500 ms; ``"500ms"``, ``"1.5s"``, ``"250us"`` → ms.  Rejects negatives, NaN, typos."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a duration like 500 or '500ms', got boolean {value!r} "
                          f"(YAML reads yes/no/on/off/true/false as booleans)")
    if isinstance(value, (int, float)):
        ms = float(value)
    elif isinstance(value, str):
        m = _DURATION.match(value)
        unit = m.group(2) if m else None
        if m is not None and unit in _AMBIGUOUS_UNITS:
            raise ConfigError(f"{where}: duration {value!r} is ambiguous: '{unit}' is not a unit here; "
                              f"{_AMBIGUOUS_UNITS[unit]} (e.g. '{m.group(1)}ms' or '{m.group(1)}min')")
        if not m or (unit and unit not in _UNITS_MS):
            hint = did_you_mean(unit, _UNITS_MS) if m and unit else ""
            raise ConfigError(f"{where}: cannot read duration {value!r}{hint} -- write a number of ms "
                              f"or a number with a unit: {', '.join(u for u in _UNITS_MS if u != 'µs')} "
                              f"(e.g. '500ms', '1.5s')")
        ms = float(m.group(1)) * _UNITS_MS[unit or "ms"]
    else:
        raise ConfigError(f"{where}: expected a duration like 500 or '500ms', got {type(value).__name__} {value!r}")
    if not math.isfinite(ms) or ms <= 0:
        raise ConfigError(f"{where}: a budget must be a positive duration, got {value!r}")
    return ms


def parse_int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def parse_positive_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: expected a positive number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Budget:
    key: str          # e.g. "ttft_p95"
    metric: str       # ttft | ttfo | tpot | itl | e2e | output_tps | goodput | fluidity | tokens_per_step
    #                   | acceptance_rate | kv_transfer | itl_stall
    stat: str         # mean | p50 | ... | max | min
    limit: float      # ms, tok/s for output_tps, a fraction for goodput, fluidity and acceptance_rate,
    #                   tokens per engine step for tokens_per_step
    source: str = ""  # where it was set

    @property
    def is_floor(self) -> bool:
        return self.metric in ("output_tps", "goodput", "fluidity") or self.is_acceptance

    @property
    def is_fraction(self) -> bool:
        """A fraction of the run (goodput, fluidity), judged once on the whole run."""
        return self.metric in ("goodput", "fluidity")

    @property
    def is_acceptance(self) -> bool:
        """A speculative-decoding floor (``ACCEPTANCE_BUDGETS``), judged on ``core.measure.spec_decode``'s figures."""
        return self.key in ACCEPTANCE_BUDGETS

    @property
    def is_kv_transfer(self) -> bool:
        """A ceiling on the KV transfer of a disaggregated target (``KV_TRANSFER_BUDGETS``): a server histogram."""
        return self.metric == KV_TRANSFER

    @property
    def is_stall(self) -> bool:
        """A ceiling on the gaps a long prefill stalled (``STALL_BUDGETS``), judged by ``core.checks.stalls``."""
        return self.metric == STALL_METRIC

    @property
    def is_count(self) -> bool:
        """A ceiling on a per-request count (``COUNT_METRICS``: reasoning tokens), not a time."""
        return self.metric in COUNT_METRICS

    @property
    def unit(self) -> str:
        if self.is_count:
            return "tokens"
        return "" if self.is_fraction or self.is_acceptance else "tok/s" if self.is_floor else "ms"


_PERCENTILE_KEY = re.compile(r"^([a-z0-9_]+?)_p([0-9]+(?:\.[0-9]+)?)$")


def parse_budget(key: str, value: Any, where: str) -> Budget:
    if key not in BUDGET_KEYS:
        m = _PERCENTILE_KEY.match(str(key))
        if m and m.group(1) in METRICS + COUNT_METRICS + (KV_TRANSFER,):  # ttft_p101, tpot_p0, e2e_p99.9
            why = (f" -- percentile p{m.group(2)} is not computed (out of range or unsupported): stats are "
                   f"{', '.join(STATS)}, e.g. {m.group(1)}_p95")
        else:
            why = (f" -- budgets are <metric>_<stat> with metric in {', '.join(METRICS)} and stat in "
                   f"{', '.join(STATS)}, or reasoning_tokens_<stat> (a count), kv_transfer_<stat> (a disaggregated "
                   f"target's KV transfer, ms), itl_stall_<stat> / stall_max (gaps during another request's long "
                   f"prefill), output_tps_min, goodput_min, fluidity_min, tokens_per_step_min, acceptance_rate_min, "
                   f"or ttft_<stat>_by_prompt (a list of prompt-length buckets)")
        raise ConfigError(f"{where}: unknown budget {key!r}{did_you_mean(key, BUDGET_KEYS + BY_PROMPT_KEYS)}{why}")
    if key == "output_tps_min":
        return Budget(key, "output_tps", "min", parse_positive_number(value, where), where)
    if key in FRACTION_BUDGETS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ConfigError(f"{where}: {key} is a fraction of the run in (0, 1], e.g. 0.95, got {value!r}")
        return Budget(key, key[:-4], "min", float(value), where)
    if key == "tokens_per_step_min":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value >= 1):
            raise ConfigError(f"{where}: tokens_per_step_min is the tokens each engine step emits (1 + accepted "
                              f"draft tokens), a number >= 1, e.g. 2.5; got {value!r}")
        return Budget(key, "tokens_per_step", "min", float(value), where)
    if key == "acceptance_rate_min":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ConfigError(f"{where}: acceptance_rate_min is the fraction of drafted tokens the target accepted, "
                              f"in (0, 1], e.g. 0.6; got {value!r}")
        return Budget(key, "acceptance_rate", "min", float(value), where)
    if key in KV_TRANSFER_BUDGETS:
        return Budget(key, KV_TRANSFER, key.rsplit("_", 1)[1], parse_duration_ms(value, where), where)
    if key in STALL_BUDGETS:
        return Budget(key, STALL_METRIC, stall_stat(key), parse_duration_ms(value, where), where)
    metric, stat = key.rsplit("_", 1) if key == COLD_BUDGET or key.startswith(COUNT_METRICS) else key.split("_", 1)
    if metric in COUNT_METRICS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{where}: {key} is a ceiling on the {metric.replace('_', ' ')} of one request, a "
                              f"positive number of tokens (not a duration), e.g. {key}: 512; got {value!r}")
        return Budget(key, metric, stat, float(value), where)
    return Budget(key, metric, stat, parse_duration_ms(value, where), where)
