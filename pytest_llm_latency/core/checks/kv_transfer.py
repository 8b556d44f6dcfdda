"""The KV-transfer budgets of a disaggregated target, ``kv_transfer_<stat>`` (ms ceilings;
``core.spec.budgets.KV_TRANSFER_BUDGETS``), judged on the pools' own histogram over the run
(``res.disagg``, measured by ``core.measure.kv_transfer``): the statistic is a point estimate from the
buckets (a percentile interpolated inside its bucket, the bucket stated).  A violation names the link and
the floor (``core.roofline.kv_transfer``); a budget on a target whose pools report no transfer is an
error naming the metrics URLs and the names looked for, never a pass.
"""
from __future__ import annotations

from ..findings import Finding
from ..measure.kv_transfer import looked_for
from ..result.result import WorkloadResult
from ..roofline.kv_transfer import transfer_text
from .samples import judgeable

CHECK = "kv_transfer"
HOW_TO = ("give the prefill and decode pools' /metrics URLs: --llm-latency-prefill-metrics-url and "
          "--llm-latency-decode-metrics-url (env LLM_LATENCY_PREFILL_METRICS_URL..., ini, YAML "
          "target.prefill_metrics_url / decode_metrics_url), or a reference://...?pd_link=... target")


def check_kv_transfer(res: WorkloadResult) -> list[Finding]:
    budgets = [b for b in res.workload.budgets if b.is_kv_transfer]
    if not budgets or not judgeable(res):
        return []
    d = res.disagg
    keys = ", ".join(b.key for b in budgets)
    urls = [u for u in (d.prefill_metrics_url, d.decode_metrics_url) if u]
    if not urls:
        return [Finding(CHECK, "error", f"{keys}: cannot be judged: the target is not disaggregated (no prefill or "
                                        f"decode pool /metrics URL) -- {HOW_TO}")]
    if d.kv_transfer_ms_mean is None:
        why = f" ({d.transfer_note})" if d.transfer_note else ""
        return [Finding(CHECK, "error", f"{keys}: cannot be judged: no KV transfer was reported during the run at "
                                        f"{' or '.join(urls)}{why}; looked for the histograms {looked_for()}")]
    out: list[Finding] = []
    for b in budgets:
        observed = getattr(d, f"kv_transfer_ms_{b.stat}", None)
        if observed is None:
            out.append(Finding(CHECK, "error", f"{b.key}: cannot be judged: {d.transfer_source} gives no {b.stat}"))
            continue
        if observed <= b.limit:
            continue
        kv_bytes, floor_ms = d.floor_at(b.stat)
        text = transfer_text(b.stat, observed, kv_bytes=kv_bytes, floor_ms=floor_ms, link_gb_s=d.link_gb_s,
                             link_name=d.link_name if d.link != "custom" else None)
        bucket = d.kv_transfer_buckets.get(b.stat)
        where = f"{d.transfer_source}, {d.transfers:g} transfers" + (f"; {b.stat} {bucket}" if bucket else "")
        out.append(Finding(CHECK, "failed", f"{text} > budget {b.limit:g} ms ({where})"))
    return out
