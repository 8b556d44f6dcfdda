"""Baselines in a pytest run: compare each latency result with a saved baseline's raw samples
(``--llm-latency-baseline``), and collect the samples a new baseline is saved from
(``--llm-latency-save-baseline``, ``--llm-latency-json-samples``).  What fails and what is a note:
docs/deploy-gate.md."""
from __future__ import annotations

import datetime as _dt
import os
import platform
from typing import Any

from ..core.measure.compare import DEFAULT_TOLERANCES, compare_all, fingerprint_changes, parse_tolerances
from ..core.errors import ConfigError
from ..core.result.facts import Comparison
from ..core.result.result import WorkloadResult, metric_values
from ..files import baseline as bfile
from ..files.baseline_match import describe, match_entry

#: what this module sets: ``res.baseline`` (``core.result.result_parts.BaselineComparison``): status
#: (regression | improvement | ok | new), label, cdf, comparisons, skipped, fingerprint_changes, fingerprint;
#: ``explanation`` is written by ``core.checks.regression``.  A baseline entry also keeps the run's
#: decode on run totals (``decode_totals``: ``core.measure.decode_totals``), which explains a TPOT regression.


def load_for_session(settings) -> dict | None:
    """The baseline document of ``--llm-latency-baseline`` (None when not set); a bad file or a
    bad ``--llm-latency-regression`` is a ConfigError naming its source."""
    tolerances(settings, None)  # validate the CLI/env/ini tolerances at start-up
    path = settings.get("baseline")
    if not path:
        return None
    try:
        return bfile.load(path)
    except bfile.BaselineError as exc:
        raise ConfigError(f"{settings.source('baseline')}: {exc}") from None


def tolerances(settings, workload) -> dict[str, float]:
    """marker/YAML ``regression:`` (on the workload) > --llm-latency-regression > defaults;
    a key not named keeps its default, so ``ttft_p95=10%`` changes only that tolerance."""
    out = dict(DEFAULT_TOLERANCES)
    raw = settings.get("regression")
    if raw:
        out.update(parse_tolerances(raw, settings.source("regression")))
    if workload is not None and getattr(workload, "regression", None):
        out.update(workload.regression)
    return out


def fingerprint(sess, spec, client, workload) -> dict:
    """What produced these samples: model, server (Server header, /version, system_fingerprint),
    target URL (redacted) and managed command, hardware, workload spec, plugin version, time."""
    from .. import __version__
    from ..core.redact import redact_url

    server: dict[str, Any] = {}
    http, base = getattr(client, "http", None), getattr(client, "base_url", None)
    if http is not None and base:
        for path in ("/version", "/v1/models"):
            try:
                r = http.get(base + path, timeout=5.0)
            except Exception:  # a fingerprint is best effort, never a test failure
                continue
            if r.headers.get("server"):
                server["header"] = r.headers["server"]
            if r.status_code == 200 and path == "/version":
                server["version"] = r.text.strip()[:200]
            if r.status_code == 200 and path == "/v1/models":
                try:
                    data = r.json().get("data") or []
                    server["models"] = [str(m.get("id")) for m in data if isinstance(m, dict)][:8]
                except Exception:
                    pass
    w = {k: v for k, v in vars(workload).items()
         if isinstance(v, (int, float, str, bool, tuple)) and k not in ("budgets", "name")}
    w.update({k: v.describe() for k in ("prompt_dist", "output_dist", "shared_prefix_groups")
              if (v := getattr(workload, k, None)) is not None})  # issue 27: lengths drawn per request
    return {
        "model": getattr(client, "model", None) or spec.model,
        "server": server,
        "target": redact_url(spec.url),
        "command": list(spec.command_template) if spec.command_template else None,
        "hardware": {"machine": platform.machine(), "processor": platform.processor() or None,
                     "cpus": os.cpu_count(), "system": platform.system()},
        "workload": {k: list(v) if isinstance(v, tuple) else v for k, v in w.items()},
        "plugin_version": __version__,
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def samples(res: WorkloadResult) -> dict[str, list]:
    """Raw per-request samples for a baseline (``files.baseline`` encoding)."""
    out = bfile.encode_samples(metric_values(res.records, res.failures, res.workload.output_tokens))
    out["output_tokens"] = [r.output_tokens for r in res.records]
    return out


def entry_of(res: WorkloadResult) -> dict:
    """A baseline entry made from a measured result (the A/B baseline arm, a saved baseline's samples):
    with the run's decode on run totals where it decoded (``core.measure.decode_totals``)."""
    from ..core.measure.decode_totals import totals_of

    entry: dict[str, Any] = {"samples": samples(res)}
    totals = totals_of(res)
    if totals is not None:
        entry["decode_totals"] = totals.to_json()
    return entry


def compare_with(res: WorkloadResult, entry: dict | None, tol: dict[str, float], *, seed: int = 0,
          label: str = "baseline", base_fingerprint: dict | None = None, paired: bool = False,
          block: int = 1) -> None:
    """Compare ``res`` with a baseline entry: the comparisons for ``core.checks.regression``, notes
    and the detail."""
    if not res.records:
        return  # nothing measured: the result is already an error or a fail of its own
    if entry is None:
        res.baseline.status = "new"
        res.notes.append(f"new: no {label} entry for this test, nothing to compare")
        return
    base = bfile.decode_samples(entry["samples"])
    cand = metric_values(res.records, res.failures, res.workload.output_tokens)
    comps, skipped = compare_all(base, cand, tol, seed=seed, paired=paired, block=block)
    detail: dict[str, Any] = {"label": label, "comparisons": [c.as_dict(label) for c in comps],
                              "skipped": list(skipped), "cdf": _cdf(base)}
    named = set(getattr(res.workload, "regression", None) or ())
    res.notes.extend(f"not compared with the {label}: {x}" for x in skipped if x.partition(":")[0] in named)
    said = {c.status for c in comps}
    status = "regression" if "regression" in said else "improvement" if "improvement" in said else "ok"
    changes = fingerprint_changes(base_fingerprint or {}, res.baseline.fingerprint or {}) \
        if base_fingerprint else []
    compared = tuple(changes) if base_fingerprint and res.baseline.fingerprint else None
    res.facts.comparisons.append(Comparison(label, tuple(comps), base_totals=_base_totals(entry),
                                            fingerprint_changes=compared,  # judged by core.checks.regression
                                            base_p50=_medians(base)))
    if changes:
        detail["fingerprint_changes"] = changes
        res.notes.append(f"fingerprint differs from the {label}: " + "; ".join(changes))
    res.baseline.set(status=status, **detail)


def _medians(values: dict[str, list[float]]) -> tuple[tuple[str, float], ...]:
    """The baseline's median TTFT and TPOT over its finite samples (ms)."""
    import math
    import statistics

    finite = {metric: [v for v in values.get(metric) or () if math.isfinite(v)] for metric in ("ttft", "tpot")}
    return tuple((metric, float(statistics.median(vals))) for metric, vals in finite.items() if vals)


def _base_totals(entry: dict):
    from ..core.measure.decode_totals import DecodeTotals

    raw = bfile.decode_totals_of(entry)
    return None if raw is None else DecodeTotals.from_json(raw)


def _cdf(values: dict[str, list[float]]) -> dict:
    """The baseline's CDF points in the HTML report's format (``report.detail.cdf_samples``)."""
    import math

    out = {}
    for metric in ("ttft", "tpot", "itl"):
        vals = sorted(values.get(metric) or [])
        if not vals:
            continue
        n = len(vals)
        step = max(1, n // 500)
        pts = [[round(v, 4), round((i + 1) / n, 6)] for i, v in enumerate(vals)
               if math.isfinite(v) and (i % step == 0 or i == n - 1)]
        out[f"{metric}_ms"] = {"n": n, "misses": sum(1 for v in vals if not math.isfinite(v)), "points": pts}
    return out


def apply(item, sess, spec, client, workload, res: WorkloadResult) -> None:
    """Called by ``execute.run_workload`` after the measurement."""
    s = sess.settings
    doc = getattr(sess, "baseline_doc", None)
    wanted = doc is not None or s.get("save_baseline") or s.get("json_samples")
    if not wanted or not res.records:
        return
    res.baseline.fingerprint = fingerprint(sess, spec, client, workload)
    if doc is None:
        return
    key = bfile.entry_key(item.nodeid, workload.name)
    entry = doc["tests"].get(key)
    if entry is None:  # pytest's rootdir may have moved since the save: match by file path suffix
        session = getattr(item, "session", None)
        others = [bfile.entry_key(i.nodeid, workload.name) for i in getattr(session, "items", None) or ()]
        found = match_entry(doc["tests"], key, current=others)
        said = describe(found, key)
        if said:
            res.notes.append(said)
        entry = doc["tests"].get(found.key) if found.key else None
    base_fp = (entry or {}).get("fingerprint") or doc.get("fingerprint")
    compare_with(res, entry, tolerances(s, workload), seed=s.get("seed") or 0, base_fingerprint=base_fp)


def detail_fields(res: WorkloadResult, settings) -> dict:
    """What the JSON/HTML detail of one result gains beyond its parts: the samples and
    fingerprint when a baseline is saved or ``--llm-latency-json-samples`` asks."""
    out: dict[str, Any] = {}
    if (settings.get("save_baseline") or settings.get("json_samples")) and res.records:
        out.update(entry_of(res))
        if res.baseline.fingerprint is not None:
            out["fingerprint"] = res.baseline.fingerprint
    return out


def save_from_results(path: str, results: list[dict]) -> int:
    """Write the baseline file from the session's result dicts (those with samples); returns
    how many tests it holds."""
    tests = {}
    fp: dict = {}
    for r in results:
        if isinstance(r.get("samples"), dict):
            entry = {"samples": r["samples"], "workload": {"name": r.get("workload")}}
            totals = bfile.result_totals(r)
            if totals:
                entry["decode_totals"] = totals
            if isinstance(r.get("fingerprint"), dict):
                entry["fingerprint"] = r["fingerprint"]
                fp = fp or {k: v for k, v in r["fingerprint"].items() if k != "workload"}
            tests[bfile.entry_key(str(r.get("nodeid")), str(r.get("workload")))] = entry
    if not tests:  # never replace a good baseline with an empty one
        raise bfile.BaselineError("no latency test measured any sample: nothing saved")
    bfile.save(path, bfile.make_document(tests, fp))
    return len(tests)
