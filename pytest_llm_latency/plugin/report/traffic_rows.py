"""The typed rows of issue 37's result parts, as the renderers read them (``plugin.report.entry``): a mixed
workload's classes, a disaggregated target's TTFT split, the stall's causes, a server sweep's arms."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .values import _dict, _list, count, num, text


@dataclass(frozen=True)
class ClassRow:
    """One class of a mixed workload (``core.checks.mix``: JSON ``mix.classes``)."""
    name: str
    status: str
    requests: int | None
    stats: dict[str, float]                 # ttft_p95_ms, ... (None values left out)
    budgets: tuple[tuple[str, str], ...]    # (key, status)
    scalars: tuple[tuple[str, Any], ...]    # weight, requests, completed, failed, status: for JUnit

    def stat(self, key: str) -> float | None:
        return self.stats[key] if key in self.stats else None

    @classmethod
    def parse(cls, raw: dict) -> "ClassRow":
        stats = {str(k): float(v) for k, v in _dict(raw.get("stats")).items() if num(v) is not None}
        budgets = tuple((str(b.get("key")), str(b.get("status"))) for b in _list(raw.get("budgets"))
                        if isinstance(b, dict))
        return cls(text(raw.get("name")) or "?", text(raw.get("status")) or "?", count(raw.get("requests")), stats,
                   budgets, tuple((k, raw[k]) for k in ("status", "weight", "requests", "completed", "failed")
                                  if isinstance(raw.get(k), (int, float, str))))


@dataclass(frozen=True)
class SplitRow:
    """One part of a disaggregated target's TTFT split (``disagg.ttft_split``; ``core.measure.kv_transfer``)."""
    part: str
    ms: float
    source: str

    @property
    def label(self) -> str:
        return self.part.replace("_", " ")

    @classmethod
    def parse(cls, raw: dict) -> "SplitRow | None":
        ms = num(raw.get("ms"))
        return None if ms is None else cls(text(raw.get("part")) or "?", ms, text(raw.get("source")) or "")


@dataclass(frozen=True)
class StallCause:
    """One cause of the stall gaps (``stall.causes``, ``core.measure.prefill_overlap.cause_rows``)."""
    cause: str
    gaps: int | None
    share: float | None
    prompt_tokens_p50: float | None
    window_ms_p50: float | None

    @classmethod
    def parse(cls, raw: dict) -> "StallCause":
        return cls(text(raw.get("cause")) or "?", count(raw.get("gaps")), num(raw.get("share")),
                   num(raw.get("prompt_tokens_p50")), num(raw.get("window_ms_p50")))


def _stall_p99(stall: dict[str, float]) -> float | None:
    """The stall gaps' p99 of a stall part's figures (``stall_ms_p99``; else the first p99 among them)."""
    if "stall_ms_p99" in stall:
        return stall["stall_ms_p99"]
    return next((v for k, v in stall.items() if "p99" in k and "clean" not in k), None)


def _numbers(raw: Any) -> dict[str, float]:
    return {str(k): float(v) for k, v in _dict(raw).items() if num(v) is not None}


@dataclass(frozen=True)
class ArmClass:
    """One class of a mixed workload in one arm (``arms.arms[].classes``): its verdict, first violation,
    requests, figures (``stats``: ttft_p95_ms, ...), stall figures and budgets (key -> limit, in its unit)."""
    name: str
    verdict: str
    why: str | None = None
    requests: int | None = None
    failed: int | None = None
    stats: dict[str, float] = field(default_factory=dict)
    stall: dict[str, float] = field(default_factory=dict)
    budgets: dict[str, float] = field(default_factory=dict)

    def stat(self, key: str) -> float | None:
        return self.stats.get(key)

    @property
    def stall_p99_ms(self) -> float | None:
        return _stall_p99(self.stall)

    @classmethod
    def parse(cls, raw: dict) -> "ArmClass":
        budgets = {str(b.get("key")): float(b["limit"]) for b in _list(raw.get("budgets"))
                   if isinstance(b, dict) and num(b.get("limit")) is not None}
        return cls(str(raw.get("name", "?")), str(raw.get("verdict", "?")), text(raw.get("why")),
                   count(raw.get("requests")), count(raw.get("failed")), _numbers(raw.get("stats")),
                   _numbers(raw.get("stall")), budgets)


@dataclass(frozen=True)
class ArmRow:
    """One arm of a server sweep (``arms.arms``: ``core.result.sweep_parts.ArmsInfo``); ``setting`` its flags
    ('' : none) or URL; ``stall`` its stall figures (numbers), ``stall_p99_ms`` their p99; ``classes`` a mixed
    workload's, in this arm."""
    name: str
    setting: str
    is_url: bool
    verdict: str
    requests: int | None = None
    failed: int | None = None
    ttft_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_p95_ms: float | None = None
    headroom: float | None = None
    why: str | None = None
    stall: dict[str, float] = field(default_factory=dict)
    classes: tuple[ArmClass, ...] = ()
    scalars: tuple[tuple[str, Any], ...] = ()   # the row's scalar figures for JUnit, in the JSON's order

    @property
    def stall_p99_ms(self) -> float | None:
        return _stall_p99(self.stall)

    @classmethod
    def parse(cls, raw: dict) -> "ArmRow":
        classes = [c for c in _list(raw.get("classes")) if isinstance(c, dict)]
        return cls(str(raw.get("name", "?")), text(raw.get("url")) or text(raw.get("flags")) or "",
                   text(raw.get("url")) is not None, str(raw.get("verdict", "?")), count(raw.get("requests")),
                   count(raw.get("failed")), num(raw.get("ttft_p95_ms")), num(raw.get("itl_p99_ms")),
                   num(raw.get("tpot_p95_ms")), num(raw.get("headroom")), text(raw.get("why")),
                   _numbers(raw.get("stall")), tuple(ArmClass.parse(c) for c in classes),
                   tuple((k, v) for k, v in raw.items() if k != "name" and isinstance(v, (int, float, str))
                         and not isinstance(v, bool)))
