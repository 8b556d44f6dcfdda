"""Failed requests and short outputs against ``max_error_rate``.

Server failures over the limit: a failed check.  Other failures (rejected requests) and short
outputs over the limit: an error (the run did not do what was asked).  Under the limit: notes
(the failures are misses in the percentiles; short outputs are out of TPOT/ITL/E2E)."""
from __future__ import annotations

from ..result.result import WorkloadResult, failed_text, short_reasons
from ..findings import Finding, found
from ..measure.structured import SCHEMA_VIOLATION
from .samples import judgeable, server_faults

CHECK = "error_rate"
SCHEMA_HINT = ("schema_violation: answers not valid for the workload's JSON Schema -- does the server honour the "
               "schema field of this API (llama.cpp's /v1/messages drops it; use openai-chat there)?")


def check_error_rate(res: WorkloadResult) -> list[Finding]:
    if not judgeable(res):
        return []
    workload = res.workload
    faults, others = server_faults(res)
    total = res.n + res.failed_requests
    limit = workload.max_error_rate
    forced = "their trace rows' forced" if workload.trace is not None else \
        "their drawn" if workload.output_dist is not None else f"the forced {workload.output_tokens}"
    short = (f"{res.short_outputs} of {res.n} requests stopped before {forced} output "
             f"tokens (finish_reason {short_reasons(res.records)}); excluded from TPOT/ITL/E2E -- does the server "
             f"ignore ignore_eos/min_tokens? Allow it with max_error_rate") if res.short_outputs else ""
    if any(f.kind == SCHEMA_VIOLATION for f in res.failures):
        short = "; ".join(p for p in (short, SCHEMA_HINT) if p)
    fault_rate = len(faults) / total
    if faults and fault_rate > limit:
        parts = [f"server failed: {failed_text(faults, total)}", f"also {failed_text(others, total)}" if others else "",
                 short]
        return [Finding(CHECK, "failed", "; ".join(p for p in parts if p) + f" -- server error rate {fault_rate:.1%} > "
                                                                           f"max_error_rate {limit:.1%}")]
    if (res.failed_requests or res.short_outputs) and res.error_rate > limit:
        parts = [failed_text(res.failures, total) if res.failures else "", short]
        return [Finding(CHECK, "error", "; ".join(p for p in parts if p) + f" -- error rate {res.error_rate:.1%} > "
                                                                          f"max_error_rate {limit:.1%}")]
    allowed = (f"{failed_text(res.failures, total)} -- allowed by max_error_rate {limit:.1%}; counted as misses "
               f"(+inf) in the percentiles") if res.failures else ""
    return found(CHECK, "note", [allowed, short])
