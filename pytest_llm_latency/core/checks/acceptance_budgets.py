"""The speculative-decoding floors ``tokens_per_step_min`` and ``acceptance_rate_min``
(``core.spec.budgets.ACCEPTANCE_BUDGETS``), judged on ``core.measure.spec_decode``'s one definition
(docs/roofline.md#budgets-on-the-acceptance): per request where the server reports per request (the
lowest request must meet the floor, the median shown; a request without the figure is left out and
counted), else on the run's aggregate ``res.spec_decode``.  No source, or an undefined figure: an
error, never a pass.
"""
from __future__ import annotations

import statistics

from ..measure import spec_decode
from ..spec.budgets import Budget
from ..findings import Finding
from ..result.result import WorkloadResult

CHECK = "budgets"
LABEL = {"tokens_per_step": "tokens per step", "acceptance_rate": "acceptance rate"}


def check_acceptance_budget(res: WorkloadResult, b: Budget) -> list[Finding]:
    sd = res.spec_decode
    label = LABEL[b.metric]
    if sd.scope == "per request" or (sd.source is None and spec_decode.per_request(res.records) is not None):
        return _per_request(res, b, label)
    if sd.source is None:
        return [Finding(CHECK, "error", f"{b.key}: cannot be judged: the server reported no speculative-decoding "
                                        f"figures for this run; the budget needs {spec_decode.SOURCES_HINT}")]
    observed = sd.tokens_per_step if b.metric == "tokens_per_step" else sd.acceptance_rate
    how = _aggregate_how(res)
    if observed is None:
        why = "nothing was drafted" if b.metric == "acceptance_rate" and sd.draft_tokens == 0 else \
            "the figure is undefined for this run (see the notes)"
        return [Finding(CHECK, "error", f"{b.key}: cannot be judged: {why} ({how})")]
    if observed < b.limit:
        return [Finding(b.metric, "failed", f"{label} {observed:.2f} < {b.limit:g} ({how})")]
    return []


def _aggregate_how(res: WorkloadResult) -> str:
    sd = res.spec_decode
    if sd.scope == "window":
        return f"the run's aggregate from {sd.source}, averaged over the scrapes during the run; not a count"
    counts = [f"{sd.decode_tokens} decode tokens"] if sd.decode_tokens is not None else []
    if sd.accepted_tokens is not None:
        drafted = f" of {sd.draft_tokens:g} drafted" if sd.draft_tokens is not None else ""
        counts.append(f"{sd.accepted_tokens:g} accepted{drafted}")
    return f"run totals from {sd.source}" + (": " + ", ".join(counts) if counts else "")


def _per_request(res: WorkloadResult, b: Budget, label: str) -> list[Finding]:
    rows = spec_decode.per_request(res.records)
    if rows is None:
        return [Finding(CHECK, "error", f"{b.key}: cannot be judged: the run's acceptance is per request "
                                        f"({res.spec_decode.source}) but no response carried timings.draft_n")]
    bad = sum(1 for x in rows if x.accepted_tokens > x.decode_tokens)
    if bad:
        return [Finding(CHECK, "error", f"{b.key}: cannot be judged: {bad} of {len(rows)} responses report more "
                                        f"accepted draft tokens than decoded tokens (inconsistent timings.draft_n*)")]
    vals = [v for x in rows if (v := x.tokens_per_step if b.metric == "tokens_per_step" else x.acceptance_rate)
            is not None]
    left = len(rows) - len(vals)
    why_left = "decoded nothing" if b.metric == "tokens_per_step" else "drafted nothing"
    if not vals:
        return [Finding(CHECK, "error", f"{b.key}: cannot be judged: every one of the {len(rows)} requests "
                                        f"{why_left}, so no request has a {label}")]
    low = min(vals)
    if low >= b.limit:
        return []
    out = f"; {left} requests that {why_left} left out" if left else ""
    return [Finding(b.metric, "failed", f"{label} min {low:.2f} < {b.limit:g} (per request from "
                                        f"{spec_decode.SOURCE_LLAMACPP_TIMINGS}: the lowest of {len(vals)} requests, "
                                        f"median {statistics.median(vals):.2f}{out})")]
