"""The typed parts' JSON Schema, generated from their dataclasses (``core.result.result_parts``), for
``data/results.schema.json``'s ``$defs``.  ``tests/unit/plugin/report/test_results_schema.py`` checks that
the shipped file holds exactly what this generates; after changing a part, regenerate with

    python -m pytest_llm_latency.plugin.report.schema

(which rewrites the parts' ``$defs`` of the shipped file and leaves the rest as it is).
"""
from __future__ import annotations

import json
import typing
from dataclasses import fields
from pathlib import Path

from ...core.result.result_parts import PARTS, Part

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "data" / "results.schema.json"

#: what a field means where its name does not say it all
DESCRIPTIONS = {
    "measurement.itl_token_counts": "how ITL's per-chunk token counts were known (core.measure.metrics.COUNT_RULES): "
                                    "server | one each | tokenize | apportioned | per chunk, or each rule with its "
                                    "number of streams ('tokenize 30, apportioned 2')",
    "measurement.prompt_exact_requests": "samples whose server-reported prompt length equals the planned prompt_tokens",
    "measurement.api": "the streaming API that measured (openai-completions, openai-chat, openai-responses, "
                       "anthropic-messages, ollama, ollama-chat)",
    "measurement.prompt_counter": "how prompt lengths were counted (tokenize endpoint, or a probe estimate corrected "
                                  "on the server's count)",
    "measurement.reasoning_tokens": "Σ reasoning tokens of the completed requests (core.measure.reasoning); left out "
                                    "when no response reasoned",
    "measurement.answer_tokens": "Σ (output tokens − reasoning tokens): the answer; with reasoning_tokens, every "
                                 "output token (TPOT and the decode roofline count both)",
    "measurement.reasoning_share": "reasoning_tokens ÷ (reasoning_tokens + answer_tokens)",
    "measurement.reasoning_requests": "completed responses that reasoned",
    "measurement.request_fields": "the request-body fields every request was sent for the workload's reasoning / "
                                  "thinking keys (core.spec.request_fields), as sent, e.g. {\"reasoning_effort\": "
                                  "\"high\"} on openai-chat; left out when the workload asks for no reasoning",
    "measurement.reasoning_source": "where the counts came from: server "
                                    "(usage.completion_tokens_details.reasoning_tokens, preferred) | stream (the "
                                    "reasoning chunks), or each with its number of responses ('server 18, stream 2')",
    "load.workers": "workers: N: the worker processes that sent the load (open loop: worker k sent scheduled requests "
                    "k, k+N, ...; closed loop: worker k ran streams k, k+N, ... of the concurrency; trace replay: "
                    "worker k replayed sessions k, k+N, ...; samples: auto: worker k sent each round's requests k, "
                    "k+N, ..., load_mode rounds; client/placement/processes/workers.py, "
                    "client/placement/processes/pool.py); a rate sweep: its reported step's; an A/B arm: the most one "
                    "block had",
    "load.workers_reason": "why that many processes: 'workers: N (given)', or workers: auto's arithmetic (the default "
                           "of the load engine's loops; core/spec/worker_sizing.py): streams x the warm-up's tokens/s "
                           "per stream (an open loop: requests/s x token events per request) / "
                           "EVENTS_PER_S_PER_PROCESS, rounded up, at most one per stream and the CPUs, one left for a "
                           "server on this host; a rate sweep: its reported step's",
    "load.worker_lag": "per worker: {worker: pid@host, index, requests, send_lag_ms_p99 (how late its requests went "
                       "out against the schedule), client_lag_ms_p99 (its lag monitor); with ray: node, "
                       "clock_offset_ms, clock_rtt_ms (client/placement/ray/shards.py)}; an A/B arm: every block's "
                       "workers",
    "client.client_limited": "1: the client fell behind, or the bursts read while its threads stalled merged more "
                             "token gaps than those read with the client on time (decided per burst, "
                             "core/measure/bunching.py): the client, not a proxy, bunched them "
                             "(client/drivers/load_report.py)",
    "client.stamp_bound_ms_p99": "p99 over token chunks of how wrong a chunk's stamp can be "
                                 "(core.measure.stamp_bounds): kernel stamps: 0.02 ms, or the span of a read it "
                                 "shared with bytes written after it (a last token with the stream's end: about one "
                                 "ITL); read stamps: the lag monitor's p99 x 20 + 0.5 ms (calibrated in "
                                 "benchmarks/fidelity.py --stamp read)",
    "client.stamp_bound_ms_max": "the largest token chunk stamp bound (core.measure.stamp_bounds)",
    "client.read_delay_ms_p99": "kernel stamps: p99 of the client's own delay per read (its return - the bytes' "
                                "arrival), which the kernel stamps keep out of the figures",
    "client.read_delay_ms_max": "kernel stamps: the longest delay of the client on one read",
    "measurement.stamp": "how token reads were stamped (client/transport/recv_stamp.py): kernel (the kernel's arrival "
                         "stamp of every read, Linux, plain TCP) or read (when the read returned: TLS, another "
                         "platform)",
    "client.bursts_client": "reads that delivered several chunks while the client's own threads were stalled",
    "client.bursts_upstream": "reads that delivered several chunks while the client ran on time (a proxy, compression "
                              "or the server sent them together)",
    "cold_start.cold_starts": "measured samples that were cold model loads (load_duration > 100 ms; servers that "
                              "report loads, e.g. Ollama)",
    "cold_start.cold_start_samples": "1-based numbers of the cold samples, comma-separated",
    "cold_start.cold_ttft_ms": "TTFT of the cold_ttft_max request (sent right after unloading the model)",
    "cold_start.cold_load_ms": "load_duration the server reported for that request",
    "spec_decode.source": "where the acceptance came from (core.measure.spec_decode): vLLM /metrics counters, SGLang "
                          "/metrics gauges, llama.cpp timings (per request) or llama.cpp /metrics counters",
    "spec_decode.scope": "run (counter deltas around the samples), window (the server's windowed gauge, sampled "
                         "during the run) or per request (llama.cpp timings)",
    "spec_decode.decode_tokens": "Σ (output tokens − 1): the tokens decode produced",
    "spec_decode.decode_steps": "decode tokens − accepted tokens: engine steps, drafting or not",
    "spec_decode.tokens_per_step": "decode tokens ÷ decode steps (1 + accepted per step)",
    "spec_decode.acceptance_rate": "accepted ÷ drafted tokens",
    "spec_decode.decode_ms": "Σ (t_last − t_first) over the requests: the decode time",
    "spec_decode.step_ms": "decode_ms ÷ decode steps: the mean engine step time on run totals",
    "roofline.tokens_per_step": "speculative decoding / MTP: spec_decode.tokens_per_step, the gate then judges engine "
                                "steps (core.roofline.roofline_spec)",
    "roofline.step_efficiency": "steps/s ÷ (bandwidth ÷ step bytes): the judged figure of a speculating server (run "
                                "totals; decode_efficiency stays per token)",
    "roofline.steps_per_s": "decode tokens ÷ decode time ÷ tokens per step, per stream (run totals)",
    "roofline.draft_bytes": "the drafter's bytes per engine step: drafted tokens per step × bytes per drafted token "
                            "(0: n-gram; null: not counted)",
    "roofline.draft": "what the drafter's bytes are (roofline.draft), or 'not counted: why'",
    "server.metrics": "/metrics deltas over the measured samples (counters, histogram _count/_sum) and final gauge "
                      "values",
    "server.metrics_timeline": "/metrics gauges over the run: {metric name: [[t_ms, value], ...]} with t_ms on the "
                               "requests' axis; the HTML report draws queue depth, running requests and KV usage",
    "by_prompt.length_source": "which prompt length bucketed the requests: the server's count (usage), the planned "
                               "length, or both with counts",
    "by_prompt.buckets": "one row per bucket of each ttft_<stat>_by_prompt budget, then one (status no_bucket) for "
                         "the requests above every bucket where there is no open top bucket",
    "agent.prefix_reuse": "fraction of turn-2+ prompt tokens the server served from its prefix cache",
    "agent.prefix_reuse_source": "per request (each turn's cached_tokens / cache_n) or server counters (/metrics)",
    "agent.turn1_cached_tokens_max": "most cached tokens on any session's turn 1 (0: sessions share no prefix)",
    "agent.turns": "per turn index: reuse and medians of TTFT, prompt/cached/new tokens and tool-call times",
    "baseline.comparisons": "deploy gate (core.measure.compare): one per tolerance, status regression | improvement | "
                            "ok, with the seeded bootstrap CI of the candidate/baseline ratio and the message",
    "baseline.cdf": "the baseline's (or the other A/B arm's) CDF points, overlaid by the HTML report",
    "disagg.kv_transfer_ms_p95": "KV transfer p95 over the run from the pools' histogram (core.measure.kv_transfer): "
                                 "interpolated inside the bucket holding the rank (kv_transfer_buckets says which)",
    "disagg.kv_transfer_buckets": "per statistic, the bucket it was interpolated in (a bucketed percentile is known "
                                  "that far)",
    "disagg.transfer_gb_s": "achieved GB/s: Σ bytes ÷ Σ transfer time of the server's histograms, or SGLang's speed "
                            "histogram's mean",
    "disagg.kv_bytes": "the prompt's KV cache bytes (the roofline's per-layer KV at the mean prompt tokens; "
                       "core.roofline.kv_transfer)",
    "disagg.floor_ms": "the transfer floor: kv_bytes ÷ link_gb_s (one direction's line rate)",
    "disagg.floor_by_stat": "prompts of different lengths: per transfer statistic (p50, p90, p95, p99, max) the floor "
                            "at that percentile of the prompt tokens, which its budget's message compares with",
    "disagg.achieved_fraction": "floor_ms ÷ kv_transfer_ms_mean: the share of the link a mean transfer achieved",
    "disagg.ttft_split": "the client's mean TTFT split into queue, prefill, kv_transfer, first_decode_step (the pools' "
                         "own histograms' means) and the remainder (client TTFT − the parts), each with its source",
    "stall.stall_ms_p99": "p99 of the stall gaps: chunk-arrival gaps of a stream that overlapped another request's "
                          "prefill window (send to first token) of >= stall_prompt_tokens prompt tokens "
                          "(core/measure/prefill_overlap.py)",
    "stall.clean_ms_p99": "p99 of the other gaps (the client's own are left out of both: stall.client_gaps)",
    "stall.stalls": "stall gaps longer than twice the clean gaps' p99 (core.measure.prefill_overlap.NOTICED): a "
                    "pause a reader notices; summed over the streams",
    "stall.stalls_per_min": "stall.stalls per minute of the run (its first send to its last end)",
    "stall.worst_per_stream": "per stream that had a stall gap: {request (its number in the request table), "
                              "stall_ms (its longest), stall_gaps}",
    "stall.causes": "per cause, most stall gaps first: {cause (the class, or 'other requests', of the overlapped "
                    "prefill with the most prompt tokens), gaps, share, prefills (its long prefills), "
                    "prompt_tokens_p50, window_ms_p50}",
    "arms.mode": "flags: the managed target.command with each arm's flags, one server at a time; urls: servers "
                 "running at once",
    "arms.meeting": "the arms meeting every budget of the workload, in block order",
    "arms.recommended": "among them, the one with the most headroom on its tightest budget (core.result.arm_ranking)",
    "arms.reported": "the arm whose figures are the result's own (the recommended one; when none meets, the arm with "
                     "the most headroom)",
}
#: value sets that are closed (statuses that other modules may extend stay plain strings)
ENUMS = {"prefill.linearity": ["linear", "sublinear", "superlinear", "unknown"], "arms.mode": ["flags", "urls"],
         "measurement.samples_mode": ["fixed", "auto"]}
_TURN = {"type": "object", "additionalProperties": False, "required": ["turn"],
         "properties": {"turn": {"type": "integer", "minimum": 1},
                        **{k: {"type": ["number", "null"]} for k in (
                            "reuse", "ttft_ms_p50", "prompt_tokens_p50", "cached_tokens_p50", "new_tokens_p50",
                            "tool_first_ms_p50", "tool_complete_ms_p50")}}}
_COMPARISON = {"type": "object", "additionalProperties": False,
               "required": ["key", "ratio", "lower", "upper", "tolerance", "status", "message"],
               "properties": {**{k: {"type": ["number", "null"]} for k in (
                   "base", "candidate", "ratio", "lower", "upper", "tolerance", "confidence")},
                   "key": {"type": "string"}, "n_base": {"type": "integer", "minimum": 0},
                   "n_candidate": {"type": "integer", "minimum": 0},
                   "floor_ms": {"type": ["number", "null"], "minimum": 0,
                                "description": "absolute floor: a change of at most this many ms is never a "
                                               "regression"},
                   "blocks": {"type": ["integer", "null"], "minimum": 0,
                              "description": "A/B in one run: blocks the bootstrap resampled (0: single requests "
                                             "or pairs)"},
                   "status": {"type": "string"}, "message": {"type": "string"}}}
_BUCKET = {"type": "object", "additionalProperties": False,
           "required": ["key", "budget", "bucket", "lo", "n", "status"],
           "properties": {"key": {"type": "string", "description": "ttft_p95_by_prompt[<1024]: the budget and "
                                                                    "its bucket's label"},
                          "budget": {"type": "string"}, "bucket": {"type": "string"},
                          "lo": {"type": "integer", "minimum": 0, "description": "first prompt length in the bucket"},
                          "hi": {"type": ["integer", "null"], "minimum": 1,
                                 "description": "first prompt length past it (half-open); null: the open top"},
                          "budget_ms": {"type": "number"}, "n": {"type": "integer", "minimum": 0},
                          "censored": {"type": "integer", "minimum": 0,
                                       "description": "failed requests counted as misses"},
                          "status": {"enum": ["pass", "fail", "inconclusive", "not_judged", "too_few", "no_bucket"]},
                          **{k: {"type": ["number", "null"]} for k in (
                              "estimate_ms", "lower_ms", "upper_ms", "confidence")},
                          "method": {"type": "string"}, "would_decide": {"type": "integer", "minimum": 1},
                          "requests": {"type": "string", "description": "no_bucket: the requests' 1-based "
                                                                         "numbers in the request table"},
                          "longest": {"type": "integer", "minimum": 0}}}
_WORKER = {"type": "object", "additionalProperties": False,
           "required": ["worker", "index", "requests"],
           "properties": {"worker": {"type": "string", "description": "pid@host"},
                          "index": {"type": "integer", "minimum": 0, "description": "k: it sent scheduled requests "
                                                                                   "k, k+N, ..."},
                          "requests": {"type": "integer", "minimum": 0},
                          "send_lag_ms_p99": {"type": ["number", "null"]},
                          "client_lag_ms_p99": {"type": ["number", "null"]},
                          "node": {"type": "string", "description": "ray: the node it ran on, ip/node-id prefix"},
                          "clock_offset_ms": {"type": ["number", "null"], "description": "ray: that node's wall "
                                              "clock minus the driver's (round-trip estimate)"},
                          "clock_rtt_ms": {"type": ["number", "null"], "description": "ray: the round trip the "
                                           "offset was estimated from (its error is at most half of it)"}}}
_CLASS_BUDGET = {"type": "object", "additionalProperties": False, "required": ["key", "status"],
                 "properties": {"key": {"type": "string"}, "limit": {"type": "number"}, "unit": {"type": "string"},
                                "observed": {"type": ["number", "null"], "description": "the class's statistic "
                                             "the budget names (null: a budget judged on other figures)"},
                                "status": {"enum": ["pass", "fail", "error"]}}}
_MIX_CLASS = {"type": "object", "additionalProperties": False, "required": ["name", "weight", "status"],
              "properties": {"name": {"type": "string"}, "weight": {"type": "number"},
                             "requests": {"type": "integer", "minimum": 0}, "completed": {"type": "integer"},
                             "failed": {"type": "integer"},
                             "prompt_tokens": {"type": ["integer", "string"], "description": "a number, or the "
                                               "distribution's description"},
                             "output_tokens": {"type": ["integer", "string"]},
                             "status": {"enum": ["pass", "fail", "error"]},
                             "stats": {"type": "object", "additionalProperties": {"type": ["number", "null"]},
                                       "description": "ttft_p95_ms, tpot_p50_ms, ...: failures counted as misses"},
                             "budgets": {"type": "array", "items": _CLASS_BUDGET},
                             "violations": {"type": "array", "items": {"type": "string"}},
                             "errors": {"type": "array", "items": {"type": "string"}},
                             "stall": {"type": "object", "description": "the class's stall figures "
                                       "(the stall part's keys)"}}}
_SPLIT = {"type": "object", "additionalProperties": False, "required": ["part", "ms", "source"],
          "properties": {"part": {"enum": ["queue", "prefill", "kv_transfer", "first_decode_step", "remainder"]},
                         "ms": {"type": "number"}, "source": {"type": "string"}}}
_STREAM = {"type": "object", "additionalProperties": False, "required": ["request", "stall_ms", "stall_gaps"],
           "properties": {"request": {"type": "integer", "minimum": 1}, "stall_ms": {"type": "number"},
                          "stall_gaps": {"type": "integer", "minimum": 1}}}
_CAUSE = {"type": "object", "additionalProperties": False, "required": ["cause", "gaps", "share", "prefills"],
          "properties": {"cause": {"type": "string"}, "gaps": {"type": "integer", "minimum": 1},
                         "share": {"type": "number"}, "prefills": {"type": "integer", "minimum": 0},
                         "prompt_tokens_p50": {"type": ["number", "null"]},
                         "window_ms_p50": {"type": ["number", "null"]}}}
_ARM = {"type": "object", "additionalProperties": False, "required": ["name", "requests", "failed", "verdict"],
        "properties": {"name": {"type": "string"},
                       "flags": {"type": "string", "description": "flags sweep: the flags appended to the managed "
                                                                  "command ('' : none)"},
                       "url": {"type": "string", "description": "urls sweep: the server's URL (credentials masked)"},
                       "requests": {"type": "integer", "minimum": 0}, "failed": {"type": "integer", "minimum": 0},
                       "verdict": {"enum": ["pass", "fail", "error"]},
                       **{k: {"type": ["number", "null"]} for k in ("ttft_p95_ms", "itl_p99_ms", "tpot_p95_ms")},
                       "headroom": {"type": ["number", "null"], "description": "the tightest budget's budget ÷ "
                                    "observed (a floor: observed ÷ budget); 1 is at the budget, null: no limit"},
                       "tightest": {"type": "string", "description": "that budget and its figure in words"},
                       "why": {"type": "string", "description": "the arm's first violation or error"},
                       "stall": {"type": "object", "additionalProperties": {"type": "number"},
                                 "description": "the arm's stall figures (its result's stall part), when measured"},
                       "classes": {"type": "array", "items": {"type": "object"},
                                   "description": "a mixed workload: per class {name, verdict, stats, why}"}}}
_FLOOR_KEYS = ("prompt_tokens", "kv_bytes", "floor_ms")
_FLOOR_AT = {"type": "object", "additionalProperties": False, "required": list(_FLOOR_KEYS),
             "properties": {k: {"type": "number", "minimum": 0} for k in _FLOOR_KEYS}}
_SPECIAL = {"arms.arms": {"type": "array", "items": _ARM},
            "by_prompt.buckets": {"type": "array", "items": _BUCKET},
            "mix.classes": {"type": "array", "items": _MIX_CLASS},
            "disagg.ttft_split": {"type": "array", "items": _SPLIT},
            "disagg.kv_transfer_buckets": {"type": "object", "additionalProperties": {"type": "string"}},
            "disagg.floor_by_stat": {"type": "object", "additionalProperties": _FLOOR_AT},
            "stall.worst_per_stream": {"type": "array", "items": _STREAM},
            "stall.causes": {"type": "array", "items": _CAUSE},
            "load.worker_lag": {"type": "array", "items": _WORKER},
            "agent.turns": {"type": "array", "items": _TURN},
            "baseline.comparisons": {"type": "array", "items": _COMPARISON},
            "baseline.cdf": {"type": "object", "additionalProperties": {"$ref": "#/$defs/cdf"}},
            "server.metrics": {"type": "object", "additionalProperties": {"type": "number"}},
            "server.metrics_timeline": {"type": "object", "additionalProperties": {
                "type": "array", "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                           "items": {"type": "number"}}}}}


#: a part field's JSON type by its annotation's base type (float: null is +inf, a miss)
_TYPES: dict[typing.Any, dict] = {
    bool: {"type": "boolean"}, int: {"type": "integer"}, float: {"type": ["number", "null"]}, str: {"type": "string"},
    dict: {"type": "object"}, list: {"type": "array", "items": {"type": "string"}}}


def _type(hint) -> dict:
    import types

    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    args = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    base = typing.get_origin(args[0]) or args[0]
    if base is typing.Literal:  # a typed status (core.statuses)
        return {"type": "string", "enum": list(typing.get_args(args[0]))}
    return _TYPES.get(base, {})


def part_schema(part: type[Part]) -> dict:
    hints = typing.get_type_hints(part)
    props = {}
    for f in fields(part):  # type: ignore[arg-type]
        if f.name not in part.TRANSIENT:
            key = f"{part.NAME}.{f.name}"
            prop = {"enum": ENUMS[key]} if key in ENUMS else dict(_SPECIAL.get(key) or _type(hints[f.name]))
            props[f.name] = {**prop, "description": DESCRIPTIONS[key]} if key in DESCRIPTIONS else prop
    doc = " ".join((part.__doc__ or "").split())
    return {"type": "object", "additionalProperties": False, "description": doc, "properties": props}


def part_schemas() -> dict[str, dict]:
    """``{"part_<name>": schema}`` for every part."""
    return {f"part_{p.NAME}": part_schema(p) for p in PARTS}


def main() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    schema["$defs"].update(part_schemas())
    SCHEMA_PATH.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
