"""Length distributions for synthetic workloads (issue 27) and shared-prefix groups.  Pure stdlib.

``prompt_tokens``/``output_tokens`` as an integer or ``{distribution: uniform|normal|lognormal|fixed, ...}``,
drawn per request from the run seed, rounded and clipped (the lognormal's parameters from the lengths' mean and
stdev): docs/concepts.md#length-distributions-and-shared-prefix-groups.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Mapping

from .budgets import did_you_mean
from ..errors import ConfigError

DISTRIBUTIONS = ("uniform", "normal", "lognormal", "fixed")
_PARAMS = {"uniform": ("min", "max"), "normal": ("mean", "stdev"), "lognormal": ("mean", "stdev"),
           "fixed": ("value",)}
_OPTIONAL = {"uniform": (), "normal": ("min", "max"), "lognormal": ("min", "max"), "fixed": ()}
EXAMPLE = "{distribution: lognormal, mean: 512, stdev: 256, min: 64, max: 4096}"


@dataclass(frozen=True)
class LengthDist:
    """One length distribution, parsed and validated (``parse_length``)."""
    kind: str
    mean: float = 0.0
    stdev: float = 0.0
    min: int | None = None
    max: int | None = None
    value: int = 0

    @property
    def nominal(self) -> int:
        """The one number where a single length is needed before drawing (the requested mean,
        the midpoint of a uniform range, the fixed value), clipped to ``[min, max]``."""
        if self.kind == "fixed":
            return self.value
        if self.kind == "uniform":
            assert self.min is not None and self.max is not None
            return round((self.min + self.max) / 2)
        return clip(round(self.mean), self.min, self.max, 1)

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"fixed {self.value}"
        if self.kind == "uniform":
            return f"uniform {self.min}..{self.max}"
        bounds = "" if self.min is None and self.max is None else \
            f" in [{self.min if self.min is not None else 1}, {self.max if self.max is not None else '...'}]"
        return f"{self.kind} mean {self.mean:g} stdev {self.stdev:g}{bounds}"

    def draw(self, n: int, rng: random.Random, *, floor: int = 1, clip_to: int | None = None) -> list[int]:
        """``n`` integer lengths: rounded, clipped to ``[min, max]``, to ``clip_to`` (the model's
        context, when known) and to at least ``floor``."""
        hi = self.max if clip_to is None else (clip_to if self.max is None else min(self.max, clip_to))
        if self.kind == "fixed":
            return [clip(self.value, None, hi, floor)] * n
        if self.kind == "uniform":
            assert self.min is not None and self.max is not None
            return [clip(rng.randint(self.min, self.max), None, hi, floor) for _ in range(n)]
        if self.kind == "normal":
            return [clip(round(rng.gauss(self.mean, self.stdev)), self.min, hi, floor) for _ in range(n)]
        sigma2 = math.log(1.0 + (self.stdev / self.mean) ** 2)
        mu = math.log(self.mean) - sigma2 / 2.0
        sigma = math.sqrt(sigma2)
        return [clip(round(rng.lognormvariate(mu, sigma)), self.min, hi, floor) for _ in range(n)]


def clip(v: int, lo: int | None, hi: int | None, floor: int) -> int:
    if lo is not None:
        v = max(v, lo)
    if hi is not None:
        v = min(v, hi)
    return max(v, floor)


def draw_lengths(spec: "int | LengthDist", n: int, *, seed: int, key: str, floor: int = 1,
                 clip_to: int | None = None) -> list[int]:
    """``n`` lengths for ``key`` (prompt_tokens / output_tokens): an integer repeated, or a
    seeded draw from the distribution (the same ``seed`` gives the same lengths)."""
    if isinstance(spec, int):
        return [spec] * n
    return spec.draw(n, random.Random(f"lengths|{key}|{seed}"), floor=floor, clip_to=clip_to)


def mean_lengths(workload: Any, records: list) -> tuple[float, float]:
    """(prompt, output) length where one number is needed after the run (the roofline's mean
    context): with a distribution or a trace, the mean of the completed requests' own planned lengths
    (``expected_prompt_tokens`` / ``expected_output_tokens``, else what the server counted);
    otherwise, or with no records, the workload's numbers."""
    varied = workload.prompt_dist is not None or workload.output_dist is not None or \
        getattr(workload, "trace", None) is not None or getattr(workload, "mix", None) is not None
    if not varied or not records:
        return float(workload.prompt_tokens), float(workload.output_tokens)
    prompts = [r.expected_prompt_tokens or r.prompt_tokens or workload.prompt_tokens for r in records]
    outputs = [r.expected_output_tokens or r.output_tokens or workload.output_tokens for r in records]
    return sum(prompts) / len(prompts), sum(outputs) / len(outputs)


def _number(value: Any, where: str, *, positive: bool, integer: bool) -> Any:
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if not ok or value < 0 or (positive and value == 0):
        what = "an integer" if integer else "a number"
        raise ConfigError(f"{where}: expected {what} {'> 0' if positive else '>= 0'}, got {value!r}")
    return value


def parse_length(value: Any, where: str, minimum: int = 1) -> "int | LengthDist":
    """An integer length (>= ``minimum``) or a ``{distribution: ...}`` mapping, as a ``LengthDist``;
    ``ConfigError`` naming the key for an unknown distribution, a missing, unknown or negative
    parameter, or min > max."""
    if not isinstance(value, Mapping):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{where}: expected an integer >= {minimum} or a length distribution such as "
                              f"{EXAMPLE}, got {value!r}")
        return value
    kind = value.get("distribution")
    if kind not in DISTRIBUTIONS:
        hint = did_you_mean(kind, DISTRIBUTIONS) if isinstance(kind, str) else ""
        raise ConfigError(f"{where}.distribution: expected one of {', '.join(DISTRIBUTIONS)}, got {kind!r}{hint} "
                          f"-- e.g. {EXAMPLE}")
    allowed = ("distribution",) + _PARAMS[kind] + _OPTIONAL[kind]
    for k in value:
        if k not in allowed:
            raise ConfigError(f"{where}.{k}: unknown parameter of a {kind} distribution{did_you_mean(k, allowed)} "
                              f"-- allowed: {', '.join(allowed[1:])}")
    for k in _PARAMS[kind]:
        if k not in value:
            raise ConfigError(f"{where}: a {kind} distribution needs {' and '.join(_PARAMS[kind])}; {k} is missing "
                              f"-- e.g. {EXAMPLE if kind == 'lognormal' else _example(kind)}")
    lo = _number(value["min"], f"{where}.min", positive=True, integer=True) if "min" in value else None
    hi = _number(value["max"], f"{where}.max", positive=True, integer=True) if "max" in value else None
    if lo is not None and lo < minimum:
        raise ConfigError(f"{where}.min: expected an integer >= {minimum}, got {lo!r}")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"{where}: min ({lo}) must not exceed max ({hi})")
    if kind == "fixed":
        v = _number(value["value"], f"{where}.value", positive=True, integer=True)
        if v < minimum:
            raise ConfigError(f"{where}.value: expected an integer >= {minimum}, got {v!r}")
        return LengthDist(kind, mean=float(v), value=v)
    if kind == "uniform":
        return LengthDist(kind, mean=(lo + hi) / 2, min=lo, max=hi)  # type: ignore[operator]
    mean = float(_number(value["mean"], f"{where}.mean", positive=True, integer=False))
    stdev = float(_number(value["stdev"], f"{where}.stdev", positive=False, integer=False))
    if (lo is not None and mean < lo) or (hi is not None and mean > hi):
        raise ConfigError(f"{where}.mean: the mean ({mean:g}) must lie within [min, max] "
                          f"([{lo if lo is not None else 1}, {hi if hi is not None else '...'}])")
    return LengthDist(kind, mean=mean, stdev=stdev, min=lo, max=hi)


def _example(kind: str) -> str:
    return {"uniform": "{distribution: uniform, min: 128, max: 2048}",
            "normal": "{distribution: normal, mean: 512, stdev: 64, min: 256}",
            "fixed": "{distribution: fixed, value: 512}"}[kind]


def workload_lengths(spec: Mapping[str, Any], base: Any, where, sweep: bool) -> list["int | LengthDist"]:
    """``prompt_tokens`` and ``output_tokens``: integers or length distributions, from
    ``spec`` or the workload class ``base`` (``core.spec.workload.make_workload``)."""
    out = []
    for key in ("prompt_tokens", "output_tokens"):
        v = parse_length(spec.get(key, getattr(base, key) if base else None), where((key,)), 1)
        if isinstance(v, LengthDist) and sweep:
            raise ConfigError(f"{where((key,))}: a prompt_sweep sets each step's lengths itself; a length "
                              f"distribution is not supported there -- give an integer")
        out.append(v)
    return out


@dataclass(frozen=True)
class PrefixGroups:
    """``shared_prefix_groups: {groups: N, tokens: T}``: N prefixes of T tokens each, as in SGLang's
    generated-shared-prefix dataset; request i (warm-up first, then the samples, in send order)
    uses group ``i mod N``.  Each prefix is salted by the run's nonce, so no two runs share one."""
    groups: int
    tokens: int

    def describe(self) -> str:
        return f"{self.groups} groups x {self.tokens} tokens"


def parse_prefix_groups(value: Any, where: str) -> PrefixGroups | None:
    if value is None:
        return None
    example = "{groups: 4, tokens: 1024}"
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping like {example}, got {value!r}")
    for k in value:
        if k not in ("groups", "tokens"):
            raise ConfigError(f"{where}.{k}: unknown key{did_you_mean(k, ('groups', 'tokens'))} -- allowed: "
                              f"groups, tokens (e.g. {example})")
    for k in ("groups", "tokens"):
        if k not in value:
            raise ConfigError(f"{where}: {k} is missing -- e.g. {example}")
        v = value[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{where}.{k}: expected an integer >= 1, got {v!r}")
    return PrefixGroups(value["groups"], value["tokens"])
