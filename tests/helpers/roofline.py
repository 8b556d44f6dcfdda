"""The decode and prefill gates in one call each, measured then judged, as the plugin does in two
steps (``plugin.roofline_gate`` / ``plugin.prefill_gate`` measure, ``core.checks.gates`` judges)."""
from __future__ import annotations

from pytest_llm_latency.core.roofline.ceiling import RooflineResult, apply_floor, measure_roofline
from pytest_llm_latency.core.roofline.prefill import PrefillResult, apply_prefill_budgets, measure_prefill


def evaluate_roofline(hardware, model, **kwargs) -> RooflineResult:
    return apply_floor(measure_roofline(hardware, model, **kwargs))


def evaluate_prefill(points, **kwargs) -> PrefillResult:
    return apply_prefill_budgets(measure_prefill(points, **kwargs))
