"""Candidate vs baseline: is a percentile worse by more than a tolerance, *and* significantly?  Pure
Python (``random`` and ``math`` only).  The design -- a seeded percentile bootstrap of the ratio (why not
Mann-Whitney), absolute floors, whole blocks resampled in an A/B run and widened when they are few:
docs/deploy-gate.md#a-regression-is-worse-than-the-tolerance-and-significant and #ab-in-one-run.

``ratio`` = candidate / baseline percentile (for ``output_tps``, where lower is worse, baseline /
candidate).  ``regression``: the ratio above ``1 + tolerance``, its interval wholly above 1 and the
change beyond the metric's floor (``DEFAULT_FLOORS_MS``); ``improvement`` the mirror image (reported,
never failed); ``ok`` otherwise.  Failed requests are misses (+inf): inf/inf counts as +inf (worse).
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Mapping, Sequence

from ..errors import ConfigError
from .stats import percentile
from ..statuses import ComparisonStatus

#: tolerances when none is configured (README "Deploy gate"): TTFT median and tail, TPOT median, E2E median
DEFAULT_TOLERANCES: dict[str, float] = {"ttft_p50": 0.10, "ttft_p95": 0.15, "tpot_p50": 0.05, "e2e_p50": 0.10}
DEFAULT_CONFIDENCE = 0.95
DEFAULT_BOOTSTRAP = 2000
#: absolute floors (ms): a change smaller than this is never a regression or an improvement
#: (README "Deploy gate": a few scheduler time slices of a loaded 2-core runner for the
#: per-request waits; TPOT averages such a stall over the output tokens, ITL takes it whole)
DEFAULT_FLOORS_MS: dict[str, float] = {"ttft": 5.0, "ttfo": 5.0, "e2e": 5.0, "itl": 2.0, "tpot": 0.25}
FLOOR_SUFFIX = "_floor"
#: a tail percentile is compared only when each sample has at least this many values beyond it
#: (40 for a p95, 200 for a p99): below that the percentile is one or two values, and the
#: bootstrap of it calls a single stalled request significant
MIN_BEYOND = 2
#: metrics a baseline stores per request, and the tolerance keys' metric names
METRICS = ("ttft", "ttfo", "tpot", "itl", "e2e", "output_tps")
STATS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
LABEL = {"ttft": "TTFT", "ttfo": "TTFO", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E", "output_tps": "output tok/s"}
_TOL = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")
_MS = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$")


def parse_floor(key: str, value, where: str) -> tuple[str, float]:
    """``ttft_floor``, ``5ms`` (or ``5``, ``0.005s``) -> ``("ttft_floor", 5.0)`` (ms)."""
    metric = str(key)[:-len(FLOOR_SUFFIX)]
    if metric not in DEFAULT_FLOORS_MS:
        raise ConfigError(f"{where}: unknown regression key {key!r}: a floor is <metric>_floor with metric in "
                          f"{', '.join(DEFAULT_FLOORS_MS)} (e.g. ttft_floor: 5ms)")
    mt = _MS.match(str(value)) if not isinstance(value, bool) and isinstance(value, (int, float, str)) else None
    ms = float(mt.group(1)) * (1000.0 if mt.group(2) == "s" else 1.0) if mt else math.nan
    if not (math.isfinite(ms) and ms >= 0):
        raise ConfigError(f"{where}: regression {key}: expected a duration like 5ms (0 = no floor), got {value!r}")
    return str(key), ms


def parse_tolerance(key: str, value, where: str) -> tuple[str, float]:
    """``ttft_p95``, ``10%`` (or ``0.1``) -> ``("ttft_p95", 0.1)``; ``ttft_floor``, ``5ms`` ->
    ``("ttft_floor", 5.0)`` (see ``parse_floor``); bad keys/values raise ConfigError."""
    if str(key).endswith(FLOOR_SUFFIX):
        return parse_floor(key, value, where)
    metric, _, stat = str(key).rpartition("_")
    if metric not in METRICS or stat not in STATS:
        keys = ", ".join(f"{m}_{s}" for m in ("ttft", "tpot", "e2e") for s in ("p50", "p95"))
        raise ConfigError(f"{where}: unknown regression key {key!r}: expected <metric>_<stat> with metric in "
                          f"{', '.join(METRICS)} and stat in {', '.join(STATS)} (e.g. {keys}), or "
                          f"<metric>_floor (e.g. ttft_floor: 5ms)")
    mt = _TOL.match(value) if isinstance(value, str) else None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or (isinstance(value, str) and not mt):
        raise ConfigError(f"{where}: regression {key}: expected a percentage like 10% or 0.1, got {value!r}")
    tol = float(mt.group(1)) / (100.0 if mt.group(2) else 1.0) if mt else float(value)
    if not (math.isfinite(tol) and 0 <= tol < 10):
        raise ConfigError(f"{where}: regression {key}: tolerance must be >= 0 and under 1000% (10% = 0.1), "
                          f"got {value!r}")
    return str(key), tol


def parse_tolerances(spec, where: str) -> dict[str, float]:
    """A mapping ``{ttft_p95: 10%}`` or a list/comma string ``ttft_p95=10%,tpot_p50=5%``."""
    if spec is None:
        return {}
    if isinstance(spec, str):
        spec = [p for p in spec.split(",") if p.strip()]
    if isinstance(spec, (list, tuple)):
        out: dict[str, Any] = {}
        for item in spec:
            key, sep, val = str(item).partition("=")
            if not sep:
                raise ConfigError(f"{where}: expected metric_stat=tolerance like ttft_p95=10%, got {item!r}")
            out.update([parse_tolerance(key.strip(), val.strip(), where)])
        return out
    if isinstance(spec, Mapping):
        return dict(parse_tolerance(k, v, where) for k, v in spec.items())
    raise ConfigError(f"{where}: regression: expected a mapping like {{ttft_p95: 10%}}, got {spec!r}")


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (pure Python): exact for 1 and 2 degrees of freedom, else the
    Cornish-Fisher expansion in the normal quantile (within 1 % of the table from df 3 on)."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) * math.sqrt(2.0 / (4 * p * (1 - p)))
    z = NormalDist().inv_cdf(p)
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


def few_blocks_factor(blocks: int, confidence: float) -> float:
    """How much wider a block bootstrap's interval is made for ``blocks`` blocks (docs/deploy-gate.md#ab-in-one-run)."""
    if blocks < 2:
        return 1.0
    p = 1 - (1 - confidence) / 2
    return t_quantile(p, blocks - 1) / NormalDist().inv_cdf(p) * math.sqrt(blocks / (blocks - 1))


def _widen(ratio: float, lo: float, hi: float, factor: float) -> tuple[float, float]:
    """Scale the interval's distance from ``ratio`` by ``factor`` on the log scale."""
    if factor == 1.0 or not (math.isfinite(ratio) and ratio > 0):
        return lo, hi
    r = math.log(ratio)
    lo = math.exp(r - factor * max(0.0, r - math.log(lo))) if 0 < lo < math.inf else lo
    hi = math.exp(r + factor * max(0.0, math.log(hi) - r)) if 0 < hi < math.inf else hi
    return lo, hi


def _pct(vals: Sequence[float], q: float) -> float:
    return percentile(sorted(vals), q)


def _ratio(cand: float, base: float, higher_is_worse: bool) -> float:
    num, den = (cand, base) if higher_is_worse else (base, cand)
    if math.isinf(num):
        return math.inf
    if den == 0:
        return math.inf if num > 0 else 1.0
    return num / den


@dataclass(frozen=True)
class Comparison:
    key: str              # ttft_p95
    metric: str
    stat: str
    base: float           # baseline percentile
    cand: float           # candidate percentile
    ratio: float          # "worse" ratio: > 1 = the candidate is worse
    lower: float          # confidence interval of ratio
    upper: float
    tolerance: float
    confidence: float
    n_base: int
    n_cand: int
    status: ComparisonStatus
    floor: float = 0.0    # ms: a change below it is "ok" whatever its ratio
    blocks: int = 0       # blocks the bootstrap resampled (0: single requests or pairs)

    @property
    def under_floor(self) -> bool:
        return self.floor > 0 and math.isfinite(self.cand) and abs(self.cand - self.base) <= self.floor

    @property
    def unit(self) -> str:
        return "tok/s" if self.metric == "output_tps" else "ms"

    def message(self, label: str = "baseline") -> str:
        """``TPOT p50 +14.8% vs baseline (6.88 → 7.90 ms; 95% CI +12.1%..+17.6%) > tolerance 5%``."""
        def pct(r: float) -> str:
            return "+inf%" if math.isinf(r) else f"{(r - 1) * 100:+.1f}%"
        op = {"regression": ">", "improvement": "better than", "ok": "within"}[self.status]
        floor = (f" (a change of {abs(self.cand - self.base):.3g} ms, under the {self.floor:g} ms floor)"
                 if self.status == "ok" and self.under_floor else "")
        return (f"{LABEL[self.metric]} {self.stat} {pct(self.ratio)} vs {label} ({_fmt(self.base)} → "
                f"{_fmt(self.cand)} {self.unit}; {self.confidence:.0%} CI {pct(self.lower)}..{pct(self.upper)}) "
                f"{op} tolerance {self.tolerance * 100:g}%{floor}")

    def as_dict(self, label: str = "baseline") -> dict:
        def f(v):
            return None if not math.isfinite(v) else round(v, 6)
        return {"key": self.key, "base": f(self.base), "candidate": f(self.cand), "ratio": f(self.ratio),
                "lower": f(self.lower), "upper": f(self.upper), "tolerance": self.tolerance,
                "confidence": self.confidence, "n_base": self.n_base, "n_candidate": self.n_cand,
                "floor_ms": self.floor, "blocks": self.blocks, "status": self.status, "message": self.message(label)}


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return "inf"
    return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def compare(key: str, base: Sequence[float], cand: Sequence[float], tolerance: float, *,
            confidence: float = DEFAULT_CONFIDENCE, seed: int = 0, n_boot: int = DEFAULT_BOOTSTRAP,
            paired: bool = False, block: int = 1, floor: float | None = None) -> Comparison:
    """Compare one percentile (module docstring).  ``paired``: ``base[i]`` and
    ``cand[i]`` were measured together (an interleaved A/B block): resample the pairs, so
    what both arms shared (drift, a noisy neighbour) cancels.  ``block`` > 1 (paired only):
    pairs ``[k*block, (k+1)*block)`` were measured in one block; resample whole blocks.
    ``floor``: ms (None: ``DEFAULT_FLOORS_MS`` of the metric; 0: none).  Raises ValueError on
    an empty sample or, when ``paired``, samples of different length."""
    metric, _, stat = key.rpartition("_")
    floor = DEFAULT_FLOORS_MS.get(metric, 0.0) if floor is None else float(floor)
    q = STATS[stat]
    if not base or not cand:
        raise ValueError(f"{key}: empty sample (baseline n={len(base)}, candidate n={len(cand)})")
    if paired and len(base) != len(cand):
        raise ValueError(f"{key}: a paired comparison needs samples of one length, got {len(base)} and {len(cand)}")
    hiw = metric != "output_tps"
    b0, c0 = _pct(base, q), _pct(cand, q)
    ratio = _ratio(c0, b0, hiw)
    rng = random.Random(f"{seed}:{key}")   # seeded per key: adding a metric does not shift another's draws
    nb, nc = len(base), len(cand)
    ratios = []
    starts = list(range(0, nb, block)) if paired and block > 1 else []
    for _ in range(n_boot):
        if starts:  # block bootstrap: as many whole blocks as the run had, drawn with replacement
            idx: list[int] = []
            for _ in starts:
                s0 = starts[rng.randrange(len(starts))]
                idx.extend(range(s0, min(s0 + block, nb)))
            bs, cs = [base[i] for i in idx], [cand[i] for i in idx]
        elif paired:
            idx = [rng.randrange(nb) for _ in range(nb)]
            bs, cs = [base[i] for i in idx], [cand[i] for i in idx]
        else:
            bs, cs = rng.choices(base, k=nb), rng.choices(cand, k=nc)
        ratios.append(_ratio(_pct(cs, q), _pct(bs, q), hiw))
    ratios.sort()
    alpha = 1.0 - confidence
    lo = percentile(ratios, 100.0 * alpha / 2)
    hi = percentile(ratios, 100.0 * (1 - alpha / 2))
    if starts:
        lo, hi = _widen(ratio, lo, hi, few_blocks_factor(len(starts), confidence))
    beyond_floor = not (floor > 0 and math.isfinite(c0) and abs(c0 - b0) <= floor)
    status: ComparisonStatus = ("regression" if ratio > 1 + tolerance and lo > 1 and beyond_floor else
                                "improvement" if ratio < 1 - tolerance and hi < 1 and beyond_floor else "ok")
    return Comparison(key, metric, stat, b0, c0, ratio, lo, hi, tolerance, confidence, nb, nc, status,
                      floor=floor, blocks=len(starts))


def compare_all(base: Mapping[str, Sequence[float]], cand: Mapping[str, Sequence[float]],
                tolerances: Mapping[str, float], **kw) -> tuple[list[Comparison], list[str]]:
    """Every tolerance whose metric both samples have; the second list says which were skipped and why.
    ``<metric>_floor`` entries of ``tolerances`` are that metric's floors (ms), not comparisons."""
    out, skipped = [], []
    for key, tol in tolerances.items():
        if key.endswith(FLOOR_SUFFIX):
            continue
        metric, _, stat = key.rpartition("_")
        kw = {**kw, "floor": tolerances.get(metric + FLOOR_SUFFIX)}
        b, c = list(base.get(metric) or []), list(cand.get(metric) or [])
        if not b or not c:
            skipped.append(f"{key}: no {LABEL[metric]} samples in the {'baseline' if not b else 'candidate'}")
            continue
        q = STATS[stat]
        need = math.ceil(MIN_BEYOND / (1 - q / 100) - 1e-9)
        if q > 50 and min(len(b), len(c)) < need:
            skipped.append(f"{key}: {min(len(b), len(c))} samples put {min(len(b), len(c)) * (1 - q / 100):.3g} "
                           f"beyond the {stat}, too few to compare a tail; it needs {need}")
            continue
        unpaired = kw.get("paired") and len(b) != len(c)
        out.append(compare(key, b, c, tol, **({**kw, "paired": False, "block": 1} if unpaired else kw)))
    return out, skipped


def fingerprint_changes(base: Mapping, cand: Mapping, ignore: Sequence[str] = ("time", "plugin_version")) -> list[str]:
    """``["model: llama-a -> llama-b", ...]`` for every fingerprint field that differs (nested
    mappings are compared key by key, ``hardware.cpu``); ``ignore`` = fields expected to change."""
    out: list[str] = []

    def walk(a, b, path: str):
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for k in sorted(set(a) | set(b)):
                if k in ignore and not path:
                    continue
                walk(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        elif a != b:
            out.append(f"{path}: {a!r} -> {b!r}")

    walk(base or {}, cand or {}, "")
    return out


def md_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table (``|`` in cells escaped, newlines flattened)."""
    def cell(v: object) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
