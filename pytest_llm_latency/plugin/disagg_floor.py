"""A disaggregated target in a latency test (issue 37): its pools and link resolved before any request, and
the KV-transfer floor's arithmetic added to the ``disagg`` part after the samples.

* ``preflight``: a ``kv_transfer_<stat>`` budget on a target with no pool metrics URL is a configuration
  error, before any request (never a pass, never a measurement that can only be an error).
* ``pools_of``: the pools' ``/metrics`` URLs (a path is joined to the target's resolved URL) and the link
  (``kv_link``: a catalog key or GB/s; ``roofline.catalog.resolve_link``), for the pipeline's scrapes
  (``client/drivers/pipeline.py`` -> ``core.measure.kv_transfer``).
* ``apply_floor``: the prompt's KV bytes (the roofline's model bytes: ``roofline_gate._model_bytes``; the
  completed requests' mean prompt tokens) over the link (``core.roofline.kv_transfer``), with the
  achieved fraction of the link at the mean transfer; where the prompts' lengths differ, each percentile's
  floor at that percentile of the prompts (``floor_by_stat``: a mix's p95 transfer is its long prompts').
"""
from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError
from ..core.measure.kv_transfer import DisaggTarget
from ..core.result.result import WorkloadResult
from ..core.spec.workload import Workload


#: the transfer statistics whose floor is the same percentile of the prompts' lengths
PERCENTILE_STATS = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("max", 100.0))


def preflight(spec, workload: Workload, where: str) -> None:
    """Refuse a ``kv_transfer_<stat>`` budget on a target that names no pool, naming the ways to give one."""
    keys = [b.key for b in workload.budgets if b.is_kv_transfer]
    if keys and not spec.disaggregated:
        from ..core.checks.kv_transfer import HOW_TO

        raise ConfigError(f"{where}: {', '.join(keys)} needs a disaggregated target, and {spec.url} names no prefill "
                          f"or decode pool: {HOW_TO}")


def pools_of(spec, base_url: str | None) -> DisaggTarget | None:
    """The pools' absolute ``/metrics`` URLs and the link; None for a target that is not disaggregated."""
    if not spec.disaggregated:
        return None
    from ..roofline.catalog import resolve_link

    def absolute(u: str | None) -> str | None:
        if u is None or not u.startswith("/"):
            return u
        if not base_url:
            raise ConfigError(f"{u}: a pool's metrics path needs the target's http URL; give the full URL")
        return base_url.rstrip("/") + u

    link = resolve_link(spec.kv_link, "kv_link") if spec.kv_link is not None else None
    return DisaggTarget(absolute(spec.prefill_metrics_url), absolute(spec.decode_metrics_url), link)


def apply_floor(res: WorkloadResult, pools: DisaggTarget | None, spec, workload: Workload, base_dir: Path,
                client) -> None:
    """The link and the floor on ``res.disagg`` (figures only: ``core.checks.kv_transfer`` judges)."""
    if pools is None:
        return
    d = res.disagg
    link = pools.link
    if link is None:
        d.floor_note = "no link given (kv_link: a catalog key or GB/s): no transfer floor"
        return
    d.set(link=link.key, link_name=link.name, link_gb_s=link.gb_s, link_source=link.source)
    prompts = [p for r in res.records if (p := r.prompt_tokens or r.expected_prompt_tokens)]
    if not prompts:
        d.floor_note = "no completed request: no prompt length for the floor"
        return
    from ..core.roofline.kv_transfer import transfer_floor
    from .roofline_gate import _model_bytes

    try:
        model = _model_bytes(dict(workload.roofline or {}), spec, base_dir, client)
        floor = transfer_floor(model, sum(prompts) / len(prompts), link)
    except ConfigError as exc:
        d.floor_note = f"no transfer floor: {exc}"
        return
    d.set(kv_bytes_per_token=round(floor.bytes_per_token, 3), prompt_tokens=round(floor.prompt_tokens, 3),
          kv_bytes=round(floor.bytes, 1), floor_ms=round(floor.floor_ms, 4), floor_arithmetic=floor.arithmetic())
    frac = floor.fraction(d.kv_transfer_ms_mean)
    if frac is not None:
        d.achieved_fraction = round(frac, 4)
    if len(set(prompts)) > 1:  # the mean prompt's floor bounds the mean transfer, not a long prompt's p95
        from ..core.measure.stats import percentile

        ordered = sorted(float(p) for p in prompts)
        for stat, q in PERCENTILE_STATS:
            at = transfer_floor(model, percentile(ordered, q), link)
            d.floor_by_stat[stat] = {"prompt_tokens": round(at.prompt_tokens, 3), "kv_bytes": round(at.bytes, 1),
                                     "floor_ms": round(at.floor_ms, 4)}
