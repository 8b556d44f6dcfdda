"""A token counter that records every text it is asked about (how many counter calls a
preparation made, and which)."""
from __future__ import annotations

from typing import Callable


def counting(count: Callable[[str], int]) -> tuple[Callable[[str], int], list[str]]:
    calls: list[str] = []

    def counted(text: str) -> int:
        calls.append(text)
        return count(text)
    return counted, calls
