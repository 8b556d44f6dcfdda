"""The ``llm_slo`` marker's registration line: a constant the plugin registers in every pytest
run, so it lives apart from ``fixtures.py`` (whose imports -- workloads, results, the executor --
would otherwise load at start-up in runs with no latency tests; ``benchmarks/startup.py``)."""
from __future__ import annotations

MARKER_SIGNATURE = ("llm_slo(workload='chat', *, ttft_p95=..., tpot_p95=..., e2e_p95=..., itl_p99=..., "
                    "output_tps_min=..., ttft_p95_by_prompt=[{below: N, budget: ...}, ...], "
                    "tokens_per_step_min=..., acceptance_rate_min=..., itl_stall_p99=..., stall_max=..., "
                    "stall_prompt_tokens=1024, samples='auto', "
                    "prompt_tokens=N|{distribution: ...}, output_tokens=N|{distribution: ...}, "
                    "shared_prefix_groups={groups, tokens}, concurrency=1, trace='traffic.jsonl', trace_speed=1, "
                    "min_decode_efficiency=..., prompt_sweep=[...], min_prefill_efficiency=..., prefill_tps_min=..., "
                    "rate=..., workers=N|'auto', rate_sweep={rate_min, rate_max}, regression={...}, "
                    "ttft_overhead_max=..., structured={json_schema: 'answer.schema.json'}, "
                    "structured_tpot_overhead_max=..., kv_transfer_p95=..., url=..., model=..., api=..., "
                    "prefill_metrics_url=..., decode_metrics_url=..., kv_link=...): measure the workload against the "
                    "llm-latency target and fail when a budget (<metric>_<stat>: ttft|ttfo|tpot|itl|e2e x "
                    "mean|p50|p90|p95|p99|max, values in ms or '500ms'/'1.5s') is missed")
