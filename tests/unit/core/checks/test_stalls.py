"""The stall budgets ``itl_stall_<stat>`` / ``stall_max`` judged by ``core.checks.stalls`` on a simulated
server (explicit ns stamps): pass, fail with the numbers and the cause, the errors (no long prefill, none
overlapping a stream, too few stall gaps), a class of a mix seeing every class's prefills, the ``stall``
part through JSON, and the diagnosis it feeds."""
from __future__ import annotations

import json

import pytest

from pytest_llm_latency.core.checks import evaluate, judge
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.measure.prefill_overlap import prefill_windows
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.result.result import Failure, measured
from pytest_llm_latency.core.result.sample_size import check_min_samples
from pytest_llm_latency.core.result.traffic_parts import StallInfo
from pytest_llm_latency.core.spec.workload import make_workload

MS = 1_000_000
STEP_MS = 10.0


def server(streams: int = 10, arrivals=(1005, 3005, 5005, 7005, 9005), prefill_ms: float = 600.0,
           end_ms: float = 11_000, long_tokens: int = 16000, fail_first_long: bool = False):
    """A server without chunked prefill: every step emits one token for each running stream and lasts
    ``STEP_MS``, except a step that admits a long prompt arrived during the previous one: ``prefill_ms``
    (its first token at its end).  ``streams`` chat streams decode throughout; returns (records, failures)."""
    ends, t, admitted = [], 0.0, []
    for a in sorted(arrivals):
        while t < a:
            t += STEP_MS
            ends.append(t)
        t += prefill_ms
        ends.append(t)
        admitted.append((a, t))
    while t < end_ms:
        t += STEP_MS
        ends.append(t)
    records = [RequestRecord(t_send_ns=round((40 + k) * MS), chunks=[TokenChunk(round(e * MS) + k * 1000, 1)
                                                                     for e in ends if e > 50 + k],
                             t_end_ns=round((ends[-1] + 1) * MS), prompt_tokens=100, completion_tokens=1,
                             mix_class="chat") for k in range(streams)]
    for r in records:
        r.completion_tokens = len(r.chunks)
    failures = []
    for i, (a, first) in enumerate(admitted):
        if fail_first_long and i == 0:
            failures.append(Failure("reset", "connection reset", ttft_ms=first - a, t_send_ns=round(a * MS),
                                    prompt_tokens=long_tokens, mix_class="long_summarization"))
            continue
        records.append(RequestRecord(t_send_ns=round(a * MS), chunks=[TokenChunk(round(first * MS), 1),
                                                                      TokenChunk(round((first + STEP_MS) * MS), 1)],
                                     t_end_ns=round((first + STEP_MS + 1) * MS), prompt_tokens=long_tokens,
                                     completion_tokens=2, mix_class="long_summarization"))
    return records, failures


def workload(slo: dict, **spec):
    return make_workload("w", {"class": "custom", "prompt_tokens": 100, "output_tokens": 2, "samples": 20,
                               "confidence": None, "max_error_rate": 0.5, "slo": slo, **spec})


def test_a_long_prefill_stalling_the_streams_fails_itl_stall_p99_naming_the_numbers_and_the_cause():
    res = evaluate(workload({"itl_stall_p99": "60ms"}), *server())
    assert res.verdict == "fail" and not res.errors
    (v,) = res.violations
    assert v.budget.key == "itl_stall_p99" and v.observed == 600.0
    assert v.message == ("ITL stall p99 600.0 ms > budget 60 ms: 50 of the 100 gaps overlapping a >= 1024-token "
                         "prefill were over it, 50 during long_summarization's prefills (16000 tokens, median window "
                         "605 ms); clean gaps p99 10.0 ms (n=7895)")
    st = res.stall
    assert (st.stall_gaps, st.stall_ms_p99, st.clean_ms_p99, st.long_prefills, st.stall_prompt_tokens) == \
        (100, 600.0, 10.0, 5, 1024)
    assert st.causes[0]["cause"] == "long_summarization" and st.causes[0]["share"] == 1.0
    assert len(st.worst_per_stream) == 10 and st.windows == "this result's requests"
    assert any(c.startswith("cause: long prefills stall decode — gaps overlapping another request's prefill of "
                            ">= 1024 prompt tokens: p99 600.0 ms (100 gaps) vs 10.0 ms otherwise") and
               "--max-num-batched-tokens (around 2048 favours ITL" in c and "SGLang --chunked-prefill-size" in c and
               "llama.cpp -b / -ub" in c and "100% of the stall gaps during long_summarization's prefills" in c
               for c in res.causes), res.causes


def test_within_budget_passes_and_stall_max_is_the_worst_single_gap():
    res = evaluate(workload({"itl_stall_p99": "700ms", "stall_max": "0.7s"}), *server())
    assert res.verdict == "pass", res.failure_message()
    res = evaluate(workload({"stall_max": "599ms"}), *server())
    assert [v.message.split(":")[0] for v in res.violations] == ["ITL stall max 600.0 ms > budget 599 ms"]


def test_check_budgets_leaves_the_stall_budgets_to_their_own_check():
    res = evaluate(workload({"itl_stall_mean": "1s", "ttft_p50": "10s"}), *server())
    assert res.verdict == "pass" and not res.errors, res.failure_message()
    assert [f.data.part for f in res.findings if f.check == "stalls"] == ["stall"]  # its figures, nothing else


def test_no_long_prompt_is_an_error_naming_the_threshold_and_the_fix():
    res = evaluate(workload({"itl_stall_p99": "60ms"}, stall_prompt_tokens=20000), *server())
    assert res.verdict == "error"
    assert res.errors == ["itl_stall_p99: cannot be judged: no gap of any stream overlapped another request's "
                          "prefill of >= 20000 prompt tokens -- no request had a prompt that long (the longest: "
                          "16000 tokens): lower stall_prompt_tokens (now 20000) or send longer prompts "
                          "(prompt_tokens)"]
    assert res.stall.stall_gaps == 0 and res.stall.long_prefills == 0  # the figures say so too


def test_long_prompts_with_no_stream_beside_them_are_an_error_never_a_pass():
    records, _ = server(streams=0)  # only the long requests, one after the other
    res = evaluate(workload({"stall_max": "1s"}), records, [])
    assert res.verdict == "error" and "5 request(s) had one, but no other stream was decoding during it: run " \
        "streams beside the long prompts (concurrency > 1 or an open loop, rate:)" in res.errors[0]


def test_too_few_stall_gaps_for_the_statistic_is_an_error_and_the_max_needs_one():
    res = evaluate(workload({"itl_stall_p99": "1s", "stall_max": "1s"}), *server(streams=5, arrivals=(1005,)))
    assert res.verdict == "error"
    assert res.errors == ["itl_stall_p99: 10 stall gaps cannot support a p99 (needs >= 100): send more requests, or "
                          "more long prompts among them"]


def test_a_failed_long_requests_prefill_still_stalls_and_its_failure_counts():
    res = evaluate(workload({"itl_stall_p99": "60ms"}), *server(fail_first_long=True))
    assert res.failures and res.stall.long_prefills == 5 and res.stall.stall_gaps == 100
    assert any(v.budget.key == "itl_stall_p99" for v in res.violations)


def test_at_a_confidence_the_point_estimate_decides_and_is_listed_with_the_verdicts():
    w = workload({"itl_stall_p99": "60ms"}, confidence=0.95)
    res = evaluate(w, *server())
    (v,) = [v for v in res.verdicts if v.key == "itl_stall_p99"]
    assert (v.status, v.method, v.estimate, v.n) == ("fail", "point", 600.0, 100)
    check_min_samples(w, "w")  # 20 samples cannot bound a p99 at 95%, but stall gaps are not samples


def test_one_class_of_a_mix_sees_every_class_prefills_through_the_facts():
    records, failures = server()
    chat = [r for r in records if r.mix_class == "chat"]
    alone = evaluate(workload({"itl_stall_p99": "60ms"}), chat, [])
    assert alone.verdict == "error"  # its own requests have no long prompt
    sub = measured(workload({"itl_stall_p99": "60ms"}), chat, [])
    sub.facts.prefill_windows = prefill_windows(records, failures)  # the whole run's
    judge(sub)
    assert sub.verdict == "fail" and sub.stall.stall_gaps == 100 and sub.stall.windows == "the whole mixed run's"
    assert "50 during long_summarization's prefills" in sub.violations[0].message


@pytest.mark.parametrize("key", ["itl_stall_mean", "itl_stall_p50", "itl_stall_p90", "itl_stall_p95",
                                 "itl_stall_p99", "stall_max"])
def test_a_mix_classs_stall_budget_row_carries_the_figure_it_was_judged_on(key):
    """Every stall statistic is in the stall part, so a class's budget row (JSON ``mix.classes[].budgets``,
    a sweep's headroom and its budgets in words) has it: an itl_stall_p95 once had no figure there."""
    from pytest_llm_latency.core.measure.verdict import estimate

    records, failures = server()
    w = make_workload("shared", {"mix": {"chat": {"weight": 0.9, "prompt_tokens": 100, "output_tokens": 2},
                                         "long_summarization": {"weight": 0.1, "prompt_tokens": 16000,
                                                                "output_tokens": 2}},
                                 "requests": 15, "confidence": None, "max_error_rate": 0.5,
                                 "slo": {"chat": {key: "2s", "ttft_p95": None, "tpot_p95": None},  # 10 chats
                                         "long_summarization": {"ttft_max": "10s", "ttft_p95": None,
                                                                "tpot_p95": None}}})
    res = evaluate(w, records, failures)
    chat = next(c for c in res.mix.classes if c["name"] == "chat")
    (row,) = chat["budgets"]
    stat = "max" if key == "stall_max" else key.rsplit("_", 1)[1]
    stall_ms = [600.0] * 50 + [10.0] * 50  # server(): each of the 5 long prefills stalls the 10 streams once
    assert row["key"] == key and row["status"] == "pass" and row["observed"] is not None
    assert row["observed"] == chat["stall"][f"stall_ms_{stat}"] == pytest.approx(estimate(stall_ms, stat), abs=1e-3)


def test_no_stall_budget_and_nothing_overlapping_writes_no_part():
    records, _ = server(arrivals=())
    res = evaluate(workload({"ttft_p50": "1s"}), records, [])
    assert not res.stall and "stall" not in json.dumps(res.stall.to_json())


def test_the_stall_part_round_trips_through_json():
    res = evaluate(workload({"itl_stall_p99": "60ms"}), *server())
    data = json.loads(json.dumps(res.stall.to_json()))
    assert StallInfo.from_json(data) == res.stall and data["worst_cause"] == "long_summarization"


@pytest.mark.parametrize("spec, said", [
    ({"stall_prompt_tokens": 0}, "workloads.w.stall_prompt_tokens: expected a whole number of prompt tokens >= 1"),
    ({"stall_prompt_tokens": "1k"}, "got '1k'"),
    ({"slo": {"itl_stall_p98": "60ms"}}, "unknown budget 'itl_stall_p98'; did you mean"),
    ({"slo": {"stall_max": "fast"}}, "cannot read duration 'fast'"),
])
def test_bad_stall_keys_are_config_errors_naming_the_key(spec, said):
    with pytest.raises(ConfigError, match=None) as exc:
        make_workload("w", {"class": "custom", "prompt_tokens": 100, "output_tokens": 2, **spec},
                      where=lambda p: ".".join(("workloads", "w") + tuple(map(str, p))))
    assert said in str(exc.value)


def test_the_keys_parse_into_the_workload():
    w = workload({"itl_stall_p95": "40ms", "stall_max": "1.5s"}, stall_prompt_tokens=4096)
    assert w.stall_prompt_tokens == 4096 and workload({}).stall_prompt_tokens == 1024
    got = {b.key: (b.metric, b.stat, b.limit, b.is_stall) for b in w.budgets}
    assert got == {"itl_stall_p95": ("itl_stall", "p95", 40.0, True), "stall_max": ("itl_stall", "max", 1500.0, True)}


@pytest.mark.parametrize("key", ["itl_stall_mean", "itl_stall_p50", "itl_stall_p90", "itl_stall_p95",
                                 "itl_stall_p99", "stall_max"])
def test_every_stall_budgets_figure_is_in_the_stall_part_as_judged(key):
    """What a sweep's ranking and a mix's class rows read (``core.result.observed``) is the figure judged."""
    from pytest_llm_latency.core.result.observed import observed

    res = evaluate(workload({key: "1ms"}), *server())
    (v,) = res.violations
    assert observed(res, v.budget) == pytest.approx(v.observed, abs=1e-3) and observed(res, v.budget) > 1


def test_a_mix_class_row_gives_its_stall_budgets_figure_for_every_stat():
    """``core.checks.mix``'s class rows read the figure through ``core.result.observed`` (p95 too, not only the
    stats the part once had)."""
    mix = {"chat": {"weight": 0.7, "prompt_tokens": 100, "output_tokens": 2},
           "long_summarization": {"weight": 0.3, "prompt_tokens": 16000, "output_tokens": 2}}
    w = make_workload("w", {"mix": mix, "requests": 15, "confidence": None, "max_error_rate": 0.5,
                            "slo": {"chat": {"itl_stall_p95": "1s", "stall_max": "1s"}}})
    res = evaluate(w, *server())
    chat = next(c for c in res.mix.classes if c["name"] == "chat")
    got = {b["key"]: b["observed"] for b in chat["budgets"]}
    assert got["itl_stall_p95"] == chat["stall"]["stall_ms_p95"] == 600.0 and got["stall_max"] == 600.0
