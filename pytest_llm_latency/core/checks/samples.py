"""Is there a sample to judge?  Preparation failures, empty samples, nothing answering.

Also the helpers the sample checks share: which failures are the server's
(``core.result.result.is_server_fault``, knowing ``facts.server_failed``)."""
from __future__ import annotations

from ..result.result import UNREACHABLE_KINDS, Failure, WorkloadResult, is_server_fault
from ..findings import Finding

CHECK = "samples"


def answered(res: WorkloadResult) -> bool:
    """Did the server answer at all (or is it known to have failed during the run)?"""
    return res.facts.server_failed or bool(res.records) or any(f.kind not in UNREACHABLE_KINDS for f in res.failures)


def server_faults(res: WorkloadResult) -> tuple[list[Failure], list[Failure]]:
    """(the server's failures, the others)."""
    a = answered(res)
    faults = [f for f in res.failures if is_server_fault(f.kind, a)]
    return faults, [f for f in res.failures if not is_server_fault(f.kind, a)]


def judgeable(res: WorkloadResult) -> bool:
    """Do the budget and error-rate checks apply (a prepared run with a sample to judge)?"""
    return res.prepared and bool(res.records or server_faults(res)[0])


def check_samples(res: WorkloadResult) -> list[Finding]:
    """A preparation failure (a fail when it was the server's, else an error); an empty sample;
    nothing but unjudgeable failures (the statistics are cleared: ``result.ttft`` raises, never an
    all-miss statistic)."""
    if not res.prepared:
        failure = res.failures[0]
        text = (f"could not prepare the run (a request before the first sample failed: model check, tokenize "
                f"or probe; {failure.kind}): {failure.message}")
        if is_server_fault(failure.kind, server_answered=res.facts.server_failed):
            return [Finding(CHECK, "failed", f"server failed before any sample: {text}")]
        return [Finding(CHECK, "error", text)]
    cold = res.facts.cold
    if not res.records and not res.failures:
        if cold is not None and cold.cold and res.workload.cold_starts == "exclude":
            return [Finding("cold_starts", "error",
                            f"all {len(cold.cold)} samples were cold starts, excluded by cold_starts: exclude: no "
                            f"warm sample to judge -- the server unloads the model after every request; keep it "
                            f"loaded, or judge them with cold_starts: include")]
        return [Finding(CHECK, "error", "no successful requests out of 0: empty sample")]
    if not judgeable(res):
        kinds = sorted({f.kind for f in res.failures})
        why = "" if answered(res) else " -- nothing answered at the start: is the server running and the URL right?"
        res.summaries.clear()  # nothing was measured
        return [Finding(CHECK, "error", f"no successful requests out of {len(res.failures)} ({', '.join(kinds)}): "
                                        f"{res.failures[0].message}{why}")]
    return []
