"""TTFT budgets per prompt-length bucket (``ttft_<stat>_by_prompt``, ``core.spec.prompt_buckets``;
docs/writing-slos.md#ttft-per-prompt-length-bucket): each bucket judged like the ordinary ``ttft_<stat>``
budget on its requests (failed ones with a known length as misses; at the workload's confidence with
fixed-n bounds, else the point estimate).  An empty bucket is an error, never a pass on 0 samples;
requests above the last bucket are named in a note.  Writes one row per bucket to ``res.by_prompt``."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..spec.budgets import Budget
from ..findings import Finding, part_update
from ..measure.metrics import ttft_ms
from ..spec.prompt_buckets import PromptBucket, PromptBudget, request_prompt_tokens, split
from ..result.result import Violation, WorkloadResult, verdict_text
from ..measure.stats import min_samples_for, summarize
from ..measure.verdict import budget_verdict
from .samples import judgeable

CHECK = "budgets"
INF = math.inf


@dataclass(frozen=True)
class BucketViolation(Violation):
    """A bucket's miss: the ordinary message after the bucket's name and range."""
    bucket: str = ""        # ttft_p95_by_prompt[<1024] ([0, 1024) prompt tokens)

    @property
    def message(self) -> str:
        return f"{self.bucket}: {super().message}"


def length_source(res: WorkloadResult) -> str:
    """Which prompt length bucketed the requests: the server's count, the planned one, or both."""
    server = sum(1 for r in res.records if r.prompt_tokens is not None)
    if server == len(res.records):
        return "server count"
    if server == 0:
        return "planned (the server reported no prompt count)"
    return f"server count ({len(res.records) - server} of {len(res.records)} planned: no server count)"


def request_lengths(res: WorkloadResult) -> list[tuple[int | None, float]]:
    """(prompt length, TTFT ms; +inf: a miss) of every request in send order -- the order of the
    report's request table (``plugin/report/detail.py``), so "request 4" is its 4th row."""
    rows: list[tuple[int | None, int | None, float | None]] = [
        (r.t_send_ns, request_prompt_tokens(r), ttft_ms(r)) for r in res.records]
    rows += [(f.t_send_ns, f.prompt_tokens, f.ttft_ms) for f in res.failures]
    rows.sort(key=lambda x: (x[0] is None, x[0] or 0))
    return [(length, INF if ttft is None else ttft) for _, length, ttft in rows]


def check_by_prompt(res: WorkloadResult) -> list[Finding]:
    if not res.workload.prompt_budgets or not judgeable(res):
        return [part_update(CHECK, "by_prompt", buckets=[], length_source=None)]
    rows = request_lengths(res)
    buckets: list[dict] = []  # the part's rows, set by judge (a part finding)
    out: list[Finding] = [part_update(CHECK, "by_prompt", buckets=buckets, length_source=length_source(res))]
    for pb in res.workload.prompt_budgets:
        split_ = split(pb, rows)
        for b in pb.buckets:
            out += _bucket(res, pb, b, split_.values[b], buckets)
        if split_.overflow:
            n = len(split_.overflow)
            numbers = ", ".join(map(str, split_.overflow))
            buckets.append({"key": f"{pb.key}[>={pb.top}]", "budget": pb.key, "bucket": f">={pb.top}",
                                 "lo": pb.top, "n": n, "status": "no_bucket", "requests": numbers,
                                 "longest": split_.longest})
            out.append(Finding(CHECK, "note", f"{pb.key}: {n} request{'s' if n != 1 else ''} had a prompt of >= "
                                              f"{pb.top} tokens (longest {split_.longest}), above every bucket: "
                                              f"not judged by it (requests {numbers} of the request table) -- add an "
                                              f"open top bucket {{at_least: {pb.top}, budget: ...}} to judge them"))
        if split_.unknown:
            out.append(Finding(CHECK, "note", f"{pb.key}: {split_.unknown} failed request(s) with no known prompt "
                                              f"length are in no bucket (the ordinary TTFT budgets count them)"))
    return out


def _bucket(res: WorkloadResult, pb: PromptBudget, b: PromptBucket, vals: list[float],
            buckets: list[dict]) -> list[Finding]:
    w = res.workload
    key = pb.bucket_key(b)
    name = f"{key} ({b.range_text})"
    row: dict = {"key": key, "budget": pb.key, "bucket": b.label, "lo": b.lo, "hi": b.hi, "budget_ms": b.limit,
                 "n": len(vals)}
    buckets.append(row)
    if not vals:
        row["status"] = "not_judged"
        return [Finding(CHECK, "error", f"{name}: not judged -- no request had a prompt in this bucket; widen "
                                        f"the prompt_tokens distribution or drop the bucket")]
    s = summarize(vals, f"TTFT in {key}", censored=0)
    misses = sum(1 for v in vals if v == INF)
    if misses:
        row["censored"] = misses
    budget = Budget(key, "ttft", pb.stat, b.limit, pb.source)
    if w.confidence is None:
        need = min_samples_for(pb.stat)
        observed = s.get(pb.stat)
        row["estimate_ms"] = observed
        if s.n < need:
            row["status"] = "too_few"
            return [Finding(CHECK, "error", f"{name}: {s.n} samples cannot support a {pb.stat} (needs >= {need}); "
                                            f"raise samples")]
        row["status"] = "fail" if observed > b.limit else "pass"
        if observed > b.limit:
            v = BucketViolation(budget, observed, s, bucket=name)
            return [Finding(CHECK, "violation", v.message, v)]
        return []
    verdict = budget_verdict(key, "ttft", pb.stat, b.limit, False, vals, w.confidence)
    row.update(status=verdict.status, estimate_ms=verdict.estimate, confidence=verdict.confidence,
               method=verdict.method)
    if verdict.method not in ("point", "extreme"):
        row.update(lower_ms=verdict.lower, upper_ms=verdict.upper)
    if verdict.would_decide is not None:
        row["would_decide"] = verdict.would_decide
    if verdict.status == "fail" or (verdict.status == "inconclusive" and w.inconclusive == "fail"):
        v = BucketViolation(budget, verdict.estimate, s, verdict, bucket=name)
        return [Finding(CHECK, "violation", v.message, v)]
    if verdict.status == "inconclusive" and w.inconclusive == "warn":
        return [Finding(CHECK, "note", f"{name}: {verdict_text(verdict, budget)}")]
    return []

