"""The lenient readers of a result entry's JSON values (``plugin.report.entry``): a value of the wrong type is
None (or empty), never an exception, so a malformed part draws nothing rather than failing."""
from __future__ import annotations

import math
from typing import Any

Point = tuple[float, float]


def num(v: Any) -> float | None:
    """``v`` as a finite float, else None (a miss, a null, a string)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def points(v: Any) -> tuple[Point, ...]:
    """``[[x, y], ...]`` with finite numbers; anything else dropped."""
    pairs = [p for p in _list(v) if isinstance(p, (list, tuple)) and len(p) == 2]
    return tuple((float(p[0]), float(p[1])) for p in pairs if num(p[0]) is not None and num(p[1]) is not None)
