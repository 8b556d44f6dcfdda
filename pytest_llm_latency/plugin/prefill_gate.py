"""Wire the prefill roofline into a ``prompt_sweep`` workload (``core.roofline.prefill``).

Budgets: ``min_prefill_efficiency`` (MFU) with marker > CLI/env/ini
(``--llm-latency-min-prefill-efficiency``) > YAML ``roofline:``; ``prefill_tps_min``,
``ttft_overhead_max`` and ``require_linear_prefill`` from ``slo:`` (a marker's win over
the file's).  The model comes from the same sources as the decode gate (``roofline_gate``);
the attention shape from the catalog, a config.json, or ``layers`` + ``hidden_size``.  The
peak from ``roofline.peak_tflops``, the catalog (the dtype's figure where it has one), or,
for ``local-cpu``, the matmul probe (``roofline.flops_probe``).
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import ConfigError
from ..core.result.result import WorkloadResult
from ..core.spec.workload import Workload
from .roofline_gate import LOCAL_HARDWARE, _reference_config, prefill_model_of


def _peak(sess, spec, roof: Mapping[str, Any], overrides: Mapping[str, Any], refresh: bool = False):
    from ..roofline.flops_probe import local_cpu_peak, resolve_peak
    from ..roofline.hwdetect import resolve_hardware

    hw_name = sess.settings.pick("hardware", marker=overrides.get("hardware"), yaml=roof.get("hardware"))
    ref = _reference_config(spec)
    peak_tflops = roof.get("peak_tflops") or (ref.peak_tflops if ref is not None and not hw_name.value else None)
    name = hw_name.value or (ref.hardware if ref is not None else None)
    if name is None and peak_tflops is None:
        return None
    if name is not None and str(name).lower() in LOCAL_HARDWARE[1:] and peak_tflops is None:
        return local_cpu_peak(refresh=refresh, only_if_higher=refresh)
    hardware = None if name is None else resolve_hardware(name, tp=int(roof.get("tensor_parallel", 1)),
                                                          where=hw_name.source)
    return resolve_peak(hardware, peak_tflops=peak_tflops, dtype=roof.get("dtype"))


def _server(points) -> Any:
    from ..core.roofline.prefill import ServerPrefill
    from ..core.roofline.prefill_fit import theil_sen

    timed = [p for p in points if p.server_ms is not None]
    if not timed:
        return None
    fit = None
    if len({p.prompt_tokens for p in timed}) >= 2:
        fit = theil_sen([p.prompt_tokens for p in timed], [p.server_ms for p in timed])
    longest = max(p.prompt_tokens for p in timed)
    reported = [1000.0 * (p.server_tokens or p.prompt_tokens) / p.server_ms for p in timed
                if p.prompt_tokens == longest and p.server_ms > 0]
    return ServerPrefill(source=timed[0].server_source, tok_s=1000.0 / fit.slope if fit and fit.slope > 0 else None,
                         overhead_ms=statistics.median(p.ttft_ms - p.server_ms for p in timed),
                         reported_tok_s=statistics.median(reported) if reported else None)


def prefill_gate(sess, spec, workload: Workload, res: WorkloadResult, overrides: Mapping[str, Any],
                 base_dir: Path | None = None, client=None) -> None:
    from ..core.result.facts import GateOutcome
    from ..core.roofline.prefill import PrefillBudgets, measure_prefill

    points, res.prefill.points = res.prefill.points, None
    if not workload.prompt_sweep or points is None or not res.records:
        return  # no sweep, or nothing measured (already an error)
    slo = workload.prefill_slo
    value = lambda k: slo[k][0] if k in slo else None  # noqa: E731
    min_eff = sess.settings.pick("min_prefill_efficiency", marker=overrides.get("min_prefill_efficiency"),
                                 yaml=value("min_prefill_efficiency"),
                                 marker_source="llm_slo(min_prefill_efficiency=)",
                                 yaml_source=slo.get("min_prefill_efficiency", (None, "roofline"))[1])
    budgets = PrefillBudgets(min_eff.value, value("prefill_tps_min"), value("ttft_overhead_max"),
                             bool(value("require_linear_prefill")))
    roof = dict(workload.roofline or {})
    base_dir = base_dir or Path.cwd()
    try:
        try:
            model = prefill_model_of(roof, spec, base_dir, client)
        except ConfigError as exc:
            if min_eff.value is not None:
                raise
            model = None
            res.notes.append(f"prefill MFU not computed: {exc}")
        peak = _peak(sess, spec, roof, overrides) if model is not None else None
        if model is not None and min_eff.value is not None and (peak is None or peak.tflops is None):
            where = peak.name if peak is not None else "no hardware given"
            raise ConfigError(f"min_prefill_efficiency ({min_eff.source}) needs a peak FLOP/s, and none is known "
                              f"({where}): give roofline.hardware, or roofline.peak_tflops from the datasheet")
        pairs = [(p.prompt_tokens, p.ttft_ms) for p in points]

        def evaluate(pk):
            return measure_prefill(pairs, model=model, peak=pk, budgets=budgets, server=_server(points))

        result = evaluate(peak)
        if result.status == "config_error" and peak is not None and peak.source.startswith(("cached numpy", "numpy")):
            fresh = _peak(sess, spec, roof, overrides, refresh=True)  # a figure taken on a busy machine is too low
            if fresh.tflops > peak.tflops:
                result = evaluate(fresh)
    except ConfigError as exc:
        res.facts.gates.append(GateOutcome("prefill", "config_error", f"prefill roofline: {exc}"))
        return
    res.prefill.set(**result.as_properties())
    if result.linearity.why:  # visible on every run, pass or not
        res.notes.append(f"prefill: {result.linearity.why}")
    caveats = (f"prefill peak note: {result.peak.note}",) if result.peak is not None and result.peak.note else ()
    # measured, not judged: core.checks.gates applies the budgets (core.roofline.prefill.apply_prefill_budgets)
    res.facts.gates.append(GateOutcome("prefill", result.status, result.message, result, caveats))
