"""The prefill keys of a workload: the prefill budgets (``prefill_tps_min``, ``min_prefill_efficiency``,
``ttft_overhead_max``, ``require_linear_prefill``) and the ``prompt_sweep`` they are judged on."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .budgets import parse_duration_ms, parse_positive_number
from ..errors import ConfigError

#: prefill roofline budgets, judged on the prompt sweep's fit: ``min_prefill_efficiency`` is written in
#: ``roofline:`` beside the decode floor (its old place ``slo:`` still works, deprecated), the others in ``slo:``
PREFILL_SLO_KEYS = ("prefill_tps_min", "min_prefill_efficiency", "ttft_overhead_max", "require_linear_prefill")
#: the prefill budget read from ``roofline:``
PREFILL_ROOFLINE_KEYS = ("min_prefill_efficiency",)


def parse_prefill_slo(key: str, value: Any, where: str) -> Any:
    """One prefill budget: tok/s floor, MFU fraction, overhead ceiling (ms) or the linearity switch."""
    if key == "prefill_tps_min":
        return parse_positive_number(value, where)
    if key == "min_prefill_efficiency":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ConfigError(f"{where}: expected a fraction of the compute ceiling in (0, 1] such as 0.35, "
                              f"got {value!r}")
        return float(value)
    if key == "ttft_overhead_max":
        return parse_duration_ms(value, where)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def parse_prompt_sweep(spec: Mapping[str, Any], where) -> tuple[int, ...]:
    """``prompt_sweep``: two or more different prompt lengths, alone (no ``prompt_tokens``), at concurrency 1."""
    sweep = spec.get("prompt_sweep")
    if sweep is None:
        return ()
    w = where(("prompt_sweep",))
    if not isinstance(sweep, (list, tuple)) or len(set(sweep) if all(isinstance(n, int) for n in sweep) else ()) < 2 \
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sweep):
        raise ConfigError(f"{w}: expected a list of two or more different prompt lengths in tokens, such as "
                          f"[256, 1024, 4096], got {sweep!r}")
    if "prompt_tokens" in spec:
        raise ConfigError(f"{w}: give prompt_sweep or prompt_tokens, not both (the sweep sets the prompt lengths)")
    if spec.get("concurrency", 1) != 1:
        raise ConfigError(f"{w}: a prompt sweep runs at concurrency 1 (no queue in TTFT); drop concurrency")
    return tuple(sorted(set(sweep)))
