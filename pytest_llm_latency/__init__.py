"""pytest-llm-latency: LLM latency SLOs as pytest tests.

The public, typed names a user's test or conftest touches::

    from pytest_llm_latency import LatencyFixture, MeasuredResult, Summary, Verdict

    def test_chat(llm_latency: LatencyFixture) -> None:
        result: MeasuredResult = llm_latency.measure(workload="chat", samples=20)
        assert result.ttft.p95 < 800          # ms
        result.check(tpot_p95="40ms")

They load lazily (PEP 562): importing this package loads neither pytest, httpx, numpy nor
yaml, so the plugin's start-up stays small; the imports under ``TYPE_CHECKING`` let mypy
and an IDE see them.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .core.errors import (ConfigError, EmptySampleError, LatencyDeprecationWarning, LatencyError,
                              LatencyWarning, MeasurementError)
    from .core.measure.record import RequestRecord
    from .core.result.result import Failure, Verdict, Violation, WorkloadResult
    from .core.measure.stats import Summary
    from .core.spec.workload import Workload
    from .plugin.fixtures import LatencyFixture, MeasuredResult
    from .plugin.hookspecs import Clock

#: public name -> the module that defines it
_EXPORTS = {
    "LatencyError": ".core.errors",
    "ConfigError": ".core.errors",
    "EmptySampleError": ".core.errors",
    "MeasurementError": ".core.errors",
    "LatencyWarning": ".core.errors",  # -W error::pytest_llm_latency.LatencyWarning
    "LatencyDeprecationWarning": ".core.errors",
    "RequestRecord": ".core.measure.record",
    "Failure": ".core.result.result",
    "Verdict": ".core.result.result",
    "Violation": ".core.result.result",
    "WorkloadResult": ".core.result.result",
    "Summary": ".core.measure.stats",
    "Workload": ".core.spec.workload",
    "LatencyFixture": ".plugin.fixtures",
    "MeasuredResult": ".plugin.fixtures",
    "Clock": ".plugin.hookspecs",
}

__all__ = [
    "__version__",
    "LatencyFixture", "MeasuredResult", "WorkloadResult", "Summary", "Verdict", "Violation", "Failure",
    "RequestRecord", "Workload", "Clock",
    "LatencyError", "ConfigError", "EmptySampleError", "MeasurementError", "LatencyWarning",
    "LatencyDeprecationWarning",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
