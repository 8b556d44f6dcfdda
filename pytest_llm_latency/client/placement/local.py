"""This process: ``workers: 1`` (or ``auto`` that can only be one).  Nothing is dealt; the drivers
send the samples themselves (``client.load.engine``)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Placement


@dataclass(frozen=True)
class Local(Placement):
    kind = "local"

    @property
    def dealt(self) -> bool:
        return False

    def planned(self) -> int:
        return 1
