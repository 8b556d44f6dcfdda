"""What every typed part of a result is (``core.result.result_parts`` holds the parts themselves).

A part is a plain dataclass whose field names are the keys of its object in the results JSON: strict
``set`` (a misspelled writer fails at once), one serialization (``to_json`` / ``from_json``; a
non-finite float, a miss, is None: JSON has no Infinity), and a field that is None or an empty
dict/list is "not measured" and left out of the JSON."""
from __future__ import annotations

import copy as _copy
import math
from dataclasses import fields
from typing import Any, ClassVar


def jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def unset(v: Any) -> bool:
    """None or an empty dict/list: not measured (left out of the JSON)."""
    return v is None or (isinstance(v, (dict, list)) and not v)


class Part:
    """What every part has: strict ``set``, ``to_json``, ``from_json``, emptiness."""

    NAME: ClassVar[str] = ""          # its key in a result's JSON object
    TRANSIENT: ClassVar[tuple[str, ...]] = ()  # working data, never serialized

    def set(self, **figures: Any) -> None:
        names = {f.name for f in fields(self)}  # type: ignore[arg-type]
        unknown = sorted(set(figures) - names)
        if unknown:
            raise AttributeError(f"{type(self).__name__} has no field {', '.join(map(repr, unknown))} "
                                 f"(fields: {', '.join(sorted(names))})")
        for k, v in figures.items():
            setattr(self, k, v)

    def to_json(self) -> dict[str, Any]:
        values = ((f.name, getattr(self, f.name)) for f in fields(self))  # type: ignore[arg-type]
        return {k: jsonable(v) for k, v in values if k not in self.TRANSIENT and not unset(v)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Part":
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"results JSON: {cls.NAME} has no key {', '.join(map(repr, unknown))} "
                             f"(keys: {', '.join(sorted(names))})")
        return cls(**data)

    def __bool__(self) -> bool:
        return bool(self.to_json())

    def copy(self):
        return _copy.deepcopy(self)
