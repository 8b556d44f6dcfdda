"""The stall a long prompt imposes on the streams beside it (issue 37): the workload key
``stall_prompt_tokens`` (the shortest prompt whose prefill counts as long) and the stall budgets
``itl_stall_<stat>`` / ``stall_max``, measured by ``core.measure.prefill_overlap`` and judged by
``core.checks.stalls`` (docs/writing-slos.md#the-stall-a-long-prompt-imposes).  Pure."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError
from ..measure.prefill_overlap import STALL_METRIC

#: the workload keys of this module, in ``core.spec.workload.WORKLOAD_KEYS``
STALL_KEYS = ("stall_prompt_tokens",)
#: a prefill of at least this many prompt tokens is long (when the workload does not say)
DEFAULT_STALL_PROMPT_TOKENS = 1024
#: a ceiling (ms) on the stall gaps' statistic; ``stall_max``: on the worst single stall gap
STALL_BUDGETS = tuple(f"{STALL_METRIC}_{s}" for s in ("mean", "p50", "p90", "p95", "p99")) + ("stall_max",)


def stall_stat(key: str) -> str:
    """``itl_stall_p99`` -> ``p99``; ``stall_max`` -> ``max``."""
    return key.rsplit("_", 1)[1]


def parse_stall_prompt_tokens(spec: Mapping[str, Any], where) -> int:
    """``stall_prompt_tokens``: a whole number of prompt tokens >= 1 (default 1024)."""
    value = spec.get("stall_prompt_tokens", DEFAULT_STALL_PROMPT_TOKENS)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where(('stall_prompt_tokens',))}: expected a whole number of prompt tokens >= 1 (a "
                          f"prefill of at least that many tokens counts as long, e.g. stall_prompt_tokens: 2048), "
                          f"got {value!r}")
    return value
