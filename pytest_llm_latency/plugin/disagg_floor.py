"""A disaggregated target in a latency test (issue 37): its pools and link resolved before any request, and
the KV-transfer floor's arithmetic added to the ``disagg`` part after the samples.

* ``preflight``: a ``kv_transfer_<stat>`` budget on a target with no pool metrics URL, or in an A/B run
  (``baseline_target``) or a server sweep (``server_sweep:``), is a configuration error, before any request
  (never a pass, never a measurement that can only be an error).
* ``in_blocks``: an A/B run or a server sweep scrapes no pool (its blocks alternate deployments; the
  pools' histograms are not merged across blocks, and a restarted arm moves the port the pools' paths
  were joined to): the note that says so, for a disaggregated target there.
* ``pools_of``: the pools' ``/metrics`` URLs (a path is joined to the target's resolved URL) and the link
  (``kv_link``: a catalog key or GB/s; ``roofline.catalog.resolve_link``), for the pipeline's scrapes
  (``client/drivers/pipeline.py`` -> ``core.measure.kv_transfer``).
* ``apply_floor``: each completed request's prompt's KV bytes (the roofline's model bytes:
  ``roofline_gate._model_bytes``; the request's own prompt tokens, the server's count where it gave one)
  over the link (``core.roofline.kv_transfer.run_floor``): the mean of those floors and each percentile,
  for the transfers' same statistic, with the achieved fraction of the link: the mean floor ÷ the mean
  transfer.
"""
from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError
from ..core.measure.kv_transfer import DisaggTarget
from ..core.result.result import WorkloadResult
from ..core.spec.workload import Workload


#: what an A/B run or a server sweep does instead of judging or scraping the pools
SEPARATE_RUNS = ("measure each deployment in its own run (its pools scraped around its samples) and compare the runs "
                 "with the deploy gate: --llm-latency-save-baseline=FILE on one, --llm-latency-baseline=FILE on the "
                 "other")


def _blocks(workload: Workload) -> str | None:
    """An A/B run's or a server sweep's name, for the messages; None for a run of one target."""
    if workload.baseline_target is not None:
        return "an A/B run (baseline_target)"
    if workload.server_sweep is not None:
        return "a server sweep (server_sweep:)"
    return None


def preflight(spec, workload: Workload, where: str) -> None:
    """Refuse a ``kv_transfer_<stat>`` budget on a target that names no pool, naming the ways to give one,
    and one in an A/B run or a server sweep (whose blocks scrape no pool: ``in_blocks``)."""
    keys = [b.key for b in workload.budgets if b.is_kv_transfer]
    blocks = _blocks(workload)
    if keys and blocks is not None:
        raise ConfigError(f"{where}: {', '.join(keys)} cannot be judged in {blocks}: its blocks alternate between "
                          "deployments, so no pool's histogram covers one arm's samples -- " + SEPARATE_RUNS)
    if keys and not spec.disaggregated:
        from ..core.checks.kv_transfer import HOW_TO

        raise ConfigError(f"{where}: {', '.join(keys)} needs a disaggregated target, and {spec.url} names no prefill "
                          f"or decode pool: {HOW_TO}")


def in_blocks(workload: Workload, *specs) -> str | None:
    """The note of an A/B run or a server sweep on a disaggregated target (any of ``specs``): its pools are
    not scraped; None where they are (one target) or there are none."""
    blocks = _blocks(workload)
    if blocks is None or not any(s is not None and s.disaggregated for s in specs):
        return None
    return (f"disaggregated target: its pools' /metrics are not scraped in {blocks} (its blocks alternate between "
            "deployments, and a restarted arm's pools move with its port), so there is no KV transfer, floor or TTFT "
            "split here -- " + SEPARATE_RUNS)


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
    from ..core.roofline.kv_transfer import link_share, run_floor
    from .roofline_gate import _model_bytes

    try:
        model = _model_bytes(dict(workload.roofline or {}), spec, base_dir, client)
        floor = run_floor(model, prompts, link)
    except ConfigError as exc:
        d.floor_note = f"no transfer floor: {exc}"
        return
    d.set(kv_bytes_per_token=round(floor.bytes / floor.prompt_tokens, 3) if floor.prompt_tokens else None,
          prompt_tokens=round(floor.prompt_tokens, 3), prompt_tokens_min=min(prompts), prompt_tokens_max=max(prompts),
          kv_bytes=round(floor.bytes, 1), floor_ms=round(floor.floor_ms, 4), floor_arithmetic=floor.arithmetic(),
          **{f"floor_ms_{stat}": round(v, 4) for stat, v in floor.stats_ms().items()})
    frac = link_share(floor.floor_ms, d.kv_transfer_ms_mean)  # the mean's floor with the mean transfer
    if frac is not None:
        d.achieved_fraction = round(frac, 4)
