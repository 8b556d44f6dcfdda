"""From a judged result to the evidence the diagnosis rules read (``core.result.diagnosis``), and the
causes it adds to ``WorkloadResult.causes`` when a budget fails.  Pure."""
from __future__ import annotations

from ..measure import metrics as m
from ..measure.prefill_overlap import possessive
from .diagnosis import Evidence, diagnose
from .result import WorkloadResult
from ..measure.stats import percentile


def _p(values: list[float], q: float) -> float | None:
    return percentile(sorted(values), q) if values else None


def evidence(res: WorkloadResult) -> Evidence:
    w, client, sd = res.workload, res.client, res.spec_decode
    done = res.completed
    ttft = done["ttft"].p50 if "ttft" in done else None
    ttft_mean = done["ttft"].mean if "ttft" in done else None
    itl50 = done["itl"].p50 if "itl" in done else None
    itl99 = done["itl"].p99 if "itl" in done else None
    early, late = [], []
    for r in res.records:
        gaps = m.itl_ms(r)
        if len(gaps) >= 8:
            q = len(gaps) // 4
            early += gaps[:q]
            late += gaps[-q:]
    prompts = tuple((r.prompt_tokens, t) for r in res.records
                    if r.prompt_tokens and (t := m.ttft_ms(r)) is not None)
    return Evidence(
        ttft_p50=ttft, ttft_mean=ttft_mean, itl_p50=itl50, itl_p99=itl99, concurrency=w.concurrency,
        open_loop=bool(w.load and w.load.open_loop), prompt_tokens=w.prompt_tokens,
        shared_prefix_tokens=w.shared_prefix_tokens,
        client_lag_p99=client.client_lag_ms_p99, client_fell_behind=bool(client.client_fell_behind),
        ttft_by_prompt=prompts, itl_early=_p(early, 50), itl_late=_p(late, 50),
        server={k: v for k, v in res.server.to_json().items() if k.startswith("server_")},
        tokens_per_step=sd.tokens_per_step, acceptance_rate=sd.acceptance_rate, spec_source=sd.source,
        spec_scope=sd.scope, step_ms=sd.step_ms,
        step_efficiency=res.roofline.step_efficiency if res.roofline.status in ("pass", "fail", "report") else None,
        **stall_evidence(res))


def stall_evidence(res: WorkloadResult) -> dict:
    """The stall split's figures (``res.stall``, ``core.checks.stalls``) as ``Evidence`` fields."""
    st = res.stall
    if not st.stall_gaps:
        return {}
    top = st.causes[0] if st.causes else None
    cause = (f"{top['share']:.0%} of the stall gaps during {possessive(top['cause'])} prefills"
             if top and top.get("cause") != "other requests" else None)
    return {"stall_p99": st.stall_ms_p99, "stall_p50": st.stall_ms_p50, "clean_p99": st.clean_ms_p99,
            "clean_p50": st.clean_ms_p50,
            "stall_gaps": st.stall_gaps, "stall_prompt_tokens": st.stall_prompt_tokens,
            "long_prompt_tokens": st.long_prompt_tokens_p50, "long_window_ms": st.long_window_ms_p50,
            "stall_cause": cause}


def failing_metrics(res: WorkloadResult) -> set[str]:
    out = {v.budget.metric for v in res.violations}
    out |= {c.split(" ", 1)[0] for c in res.failed_checks if c.startswith(("goodput", "fluidity"))}
    return out


def causes(res: WorkloadResult) -> list[str]:
    """The likely causes of the failed budgets, with their evidence (``core.checks.diagnosis``)."""
    failing = failing_metrics(res)
    if not failing:
        return []
    found = diagnose(evidence(res), failing)
    if res.client.client_fell_behind:  # already the run's error
        found = [c for c in found if c.name != "client starved"]
    return [c.line for c in found]
