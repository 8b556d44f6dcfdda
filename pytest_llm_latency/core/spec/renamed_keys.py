"""YAML keys and marker arguments that were renamed or moved: the old ones still work for this
release, with a ``LatencyDeprecationWarning`` naming the new one; old and new together are a
``ConfigError``.  Pure (stdlib ``warnings`` only).

One name per concept (the CLI/env/ini renames are in ``plugin/options.py``'s ``RENAMED``):

========================================  =======================================
old                                       new
========================================  =======================================
``roofline.min_efficiency``               ``roofline.min_decode_efficiency``
``slo.min_prefill_efficiency``            ``roofline.min_prefill_efficiency``
``sweep`` (the request-rate search)       ``rate_sweep``
========================================  =======================================
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping

from ..errors import ConfigError, LatencyDeprecationWarning

#: workload keys (YAML ``workloads.<name>.<key>``, marker and fixture arguments): old -> new
RENAMED_WORKLOAD_KEYS = {"sweep": "rate_sweep"}
#: keys of a ``roofline:`` mapping (the file's or a workload's): old -> new
RENAMED_ROOFLINE_KEYS = {"min_efficiency": "min_decode_efficiency"}
#: ``slo:`` keys that moved into ``roofline:`` (the prefill floor sits beside the decode floor)
MOVED_TO_ROOFLINE = ("min_prefill_efficiency",)

Where = Callable[[tuple], str]


def deprecated(where: str, new: str) -> None:
    """One ``LatencyDeprecationWarning``: ``where`` names the file and the old key's path (or the marker)."""
    warnings.warn(LatencyDeprecationWarning(
        f"{where} is deprecated: use {new!r} instead (the old name works for this release)"), stacklevel=3)


def _both(where: str, old: str, new: str) -> ConfigError:
    return ConfigError(f"{where}: both {old!r} (deprecated) and {new!r} are given: keep {new!r} only")


def upgrade_roofline(roof: Any, where: Where, path: tuple = ("roofline",)) -> Any:
    """``roof`` with its old keys renamed (warning once each); anything not a mapping as it is
    (``make_workload`` rejects it with its own message)."""
    if not isinstance(roof, Mapping) or not any(k in roof for k in RENAMED_ROOFLINE_KEYS):
        return roof
    out = dict(roof)
    for old, new in RENAMED_ROOFLINE_KEYS.items():
        if old in out:
            if new in out:
                raise _both(where(path + (old,)), ".".join(path + (old,)), ".".join(path + (new,)))
            deprecated(where(path + (old,)), ".".join(path + (new,)))
            out = {(new if k == old else k): v for k, v in out.items()}
    return out


def upgrade_workload(spec: Mapping[str, Any], where: Where) -> Mapping[str, Any]:
    """A workload spec with every old key in its new place, each warned about once (the result
    has none left, so upgrading again is a no-op)."""
    out = dict(spec)
    for old, new in RENAMED_WORKLOAD_KEYS.items():
        if old in out:
            if new in out:
                raise _both(where((old,)), old, new)
            deprecated(where((old,)), new)
            out = {(new if k == old else k): v for k, v in out.items()}
    if "roofline" in out:
        out["roofline"] = upgrade_roofline(out["roofline"], where)
    slo = out.get("slo")
    if isinstance(slo, Mapping) and any(k in slo for k in MOVED_TO_ROOFLINE):
        roof = out.get("roofline")
        roof = dict(roof) if isinstance(roof, Mapping) else {} if roof is None else roof
        slo = dict(slo)
        for key in MOVED_TO_ROOFLINE:
            if key not in slo:
                continue
            if isinstance(roof, Mapping) and key in roof:
                raise _both(where(("slo", key)), f"slo.{key}", f"roofline.{key}")
            deprecated(where(("slo", key)), f"roofline.{key}")
            value = slo.pop(key)
            if isinstance(roof, dict):
                roof[key] = value
        out["slo"] = slo
        out["roofline"] = roof
    return out
