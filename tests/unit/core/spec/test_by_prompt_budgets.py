"""TTFT budgets per prompt-length bucket (``ttft_<stat>_by_prompt``): parsing with exact messages,
half-open bucketing, and the judging (``core.checks.by_prompt``) on injected records."""
from __future__ import annotations

import math

import pytest

from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.prompt_buckets import BY_PROMPT_KEYS, PromptBucket, parse_prompt_budget, split
from pytest_llm_latency.core.measure.record import RequestRecord, TokenChunk
from pytest_llm_latency.core.result.result import Failure
from pytest_llm_latency.core.spec.workload import make_workload, with_budgets

KEY = "ttft_p95_by_prompt"
TWO = [{"below": 1024, "budget": "300ms"}, {"below": 8192, "budget": "1.2s"}]


def where(path: tuple) -> str:
    return "f.slo.yaml:7 workloads.w.slo." + ".".join(map(str, (KEY,) + path))


def parse(value, key=KEY):
    return parse_prompt_budget(key, value, where)


def rec(prompt: int | None, ttft_ms: float, k: int, *, planned: int | None = None) -> RequestRecord:
    t0 = k * 10_000_000_000
    first = t0 + round(ttft_ms * 1e6)
    return RequestRecord(t_send_ns=t0, t_first_byte_ns=first, chunks=[TokenChunk(first + i * 1_000_000, 1)
                                                                       for i in range(4)],
                         t_end_ns=first + 4_000_000, prompt_tokens=prompt, completion_tokens=4,
                         finish_reason="length", expected_prompt_tokens=planned)


def workload(slo: dict, **kw):
    return make_workload("w", {"prompt_tokens": 512, "output_tokens": 4, "samples": 20, "confidence": None,
                               "slo": slo, **kw})


# ----------------------------------------------------------------------------- parsing

def test_the_keys_follow_the_stats_of_the_other_budgets():
    assert BY_PROMPT_KEYS == tuple(f"ttft_{s}_by_prompt" for s in ("mean", "p50", "p90", "p95", "p99", "max"))


def test_buckets_are_half_open_and_contiguous():
    pb = parse(TWO + [{"at_least": 8192, "budget": "3s"}])
    assert [(b.lo, b.hi, b.limit) for b in pb.buckets] == [(0, 1024, 300.0), (1024, 8192, 1200.0), (8192, None, 3000.0)]
    assert [pb.bucket_key(b) for b in pb.buckets] == [
        "ttft_p95_by_prompt[<1024]", "ttft_p95_by_prompt[1024..<8192]", "ttft_p95_by_prompt[>=8192]"]
    assert pb.stat == "p95" and pb.top is None and pb.source == where(())


@pytest.mark.parametrize("value, message", [
    ({"below": 1024, "budget": "300ms"},
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt: ttft_p95_by_prompt is a list of prompt-length buckets, each "
     "{below: N, budget: D} (bucket i covers [previous below, below)), e.g. [{below: 1024, budget: 300ms}, "
     "{below: 8192, budget: 1.2s}, {at_least: 8192, budget: 3s}]; got dict {'below': 1024, 'budget': '300ms'}"),
    ([], "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt: ttft_p95_by_prompt is a list of prompt-length buckets, "
         "each {below: N, budget: D} (bucket i covers [previous below, below)), e.g. [{below: 1024, budget: 300ms}, "
         "{below: 8192, budget: 1.2s}, {at_least: 8192, budget: 3s}]; got an empty list"),
    ([{"budget": "300ms"}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.0: missing below -- each bucket but an open top one "
     "({at_least: N, budget: D}) gives the prompt length it ends below, e.g. {below: 1024, budget: 300ms}"),
    ([{"below": 1024}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.0: missing budget -- each bucket gives its TTFT budget, "
     "e.g. {below: 1024, budget: 300ms}"),
    ([{"below": 1024, "budget": "300ms"}, {"below": 1024, "budget": "1s"}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.1.below: 1024 is not above the previous bucket's below "
     "(1024) -- list the buckets in increasing order of below (bucket i covers [previous below, below))"),
    ([{"below": 8192, "budget": "300ms"}, {"below": 1024, "budget": "1s"}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.1.below: 1024 is not above the previous bucket's below "
     "(8192) -- list the buckets in increasing order of below (bucket i covers [previous below, below))"),
    ([{"below": 1024, "budget": "300sm"}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.0.budget: cannot read duration '300sm'; did you mean 'ms' "
     "or 's'? -- write a number of ms or a number with a unit: ms, s, sec, us, ns, min (e.g. '500ms', '1.5s')"),
    ([{"below": 1024, "budget": "300ms", "limit": 2}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.0.limit: unknown bucket key 'limit' -- a bucket has below "
     "(or at_least, for the open top bucket) and budget"),
    ([{"bellow": 1024, "budget": "300ms"}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.0.bellow: unknown bucket key 'bellow'; did you mean 'below'? "
     "-- a bucket has below (or at_least, for the open top bucket) and budget"),
    ([{"below": 0, "budget": "300ms"}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.0.below: expected an integer number of prompt tokens >= 1, "
     "got 0"),
    ([{"below": 1024, "budget": "300ms"}, {"at_least": 2048, "budget": "1s"}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.1.at_least: expected the last below (1024), got 2048 -- the "
     "buckets are contiguous: the open top bucket covers [1024, inf)"),
    ([{"below": 1024, "budget": "300ms"}, {"at_least": 1024, "budget": "1s"}, {"below": 4096, "budget": "2s"}],
     "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.1.at_least: the open top bucket (at_least) must be the "
     "last one"),
    (["300ms"], "f.slo.yaml:7 workloads.w.slo.ttft_p95_by_prompt.0: expected a bucket like {below: 1024, budget: "
                "300ms}, got str '300ms'"),
])
def test_bad_buckets_name_the_place_and_the_fix(value, message):
    with pytest.raises(ConfigError) as e:
        parse(value)
    assert str(e.value) == message


def test_an_unknown_by_prompt_key_suggests_the_right_one():
    with pytest.raises(ConfigError, match=r"^slo\.ttft_p96_by_prompt: unknown budget 'ttft_p96_by_prompt'; did you "
                                          r"mean .*'ttft_p95_by_prompt'.* or ttft_<stat>_by_prompt \(a list of "):
        make_workload("w", {"prompt_tokens": 8, "output_tokens": 4, "slo": {"ttft_p96_by_prompt": TWO}})


def test_make_workload_keeps_them_apart_from_the_ordinary_budgets_and_marker_overrides_them():
    w = workload({"ttft_p95": "2s", KEY: TWO})
    assert [b.key for b in w.budgets] == ["ttft_p95"]
    assert [pb.key for pb in w.prompt_budgets] == [KEY]
    w2 = with_budgets(w, {KEY: [{"below": 64, "budget": 5}]}, "check()")
    assert [(b.lo, b.hi, b.limit) for b in w2.prompt_budgets[0].buckets] == [(0, 64, 5.0)]
    with pytest.raises(ConfigError, match=r"^check\(\) ttft_p95_by_prompt\.0\.below: expected an integer"):
        with_budgets(w, {KEY: [{"below": "64", "budget": 5}]}, "check()")


def test_make_workload_locates_an_item_by_its_index():
    paths = []

    def at(path):
        paths.append(path)
        return "f.slo.yaml:" + ".".join(map(str, path))

    with pytest.raises(ConfigError, match=r"^f\.slo\.yaml:slo\.ttft_p95_by_prompt\.1\.below: 2 is not above"):
        make_workload("w", {"prompt_tokens": 8, "output_tokens": 4,
                            "slo": {KEY: [{"below": 4, "budget": 1}, {"below": 2, "budget": 1}]}}, at)
    assert ("slo", KEY, 1, "below") in paths


# ----------------------------------------------------------------------------- bucketing

def test_a_request_of_exactly_below_tokens_goes_to_the_next_bucket():
    pb = parse(TWO)
    got = split(pb, [(1023, 1.0), (1024, 2.0), (0, 3.0), (8191, 4.0), (8192, 5.0), (None, math.inf)])
    low, mid = pb.buckets
    assert got.values == {low: [1.0, 3.0], mid: [2.0, 4.0]}
    assert got.overflow == [5] and got.longest == 8192 and got.unknown == 1
    assert PromptBucket(8192, None, 1.0).holds(10**9) and not PromptBucket(0, 1024, 1.0).holds(1024)


# ----------------------------------------------------------------------------- judging

def test_each_bucket_is_judged_on_its_own_requests_and_a_miss_names_the_bucket():
    w = workload({"ttft_p50_by_prompt": [{"below": 1024, "budget": "300ms"}, {"below": 8192, "budget": "1s"}]})
    records = [rec(100, 200, 1), rec(1023, 260, 2), rec(1024, 900, 3), rec(5000, 1500, 4), rec(6000, 1400, 5)]
    res = evaluate(w, records, [])
    assert res.verdict == "fail"
    assert [v.message for v in res.violations] == [
        "ttft_p50_by_prompt[1024..<8192] ([1024, 8192) prompt tokens): TTFT p50 1400.0 ms > budget 1000 ms "
        "(n=3, p50 1400.0 ms, max 1500.0 ms)"]
    rows = {r["bucket"]: r for r in res.by_prompt.buckets}
    assert rows["<1024"]["status"] == "pass" and rows["<1024"]["n"] == 2 and rows["<1024"]["estimate_ms"] == 230.0
    assert rows["1024..<8192"]["status"] == "fail" and rows["1024..<8192"]["n"] == 3
    assert res.by_prompt.length_source == "server count"


def test_all_buckets_within_budget_pass():
    w = workload({"ttft_max_by_prompt": [{"below": 1024, "budget": "300ms"}, {"at_least": 1024, "budget": "2s"}]})
    res = evaluate(w, [rec(100, 299, 1), rec(1024, 1999, 2), rec(90000, 1000, 3)], [])
    assert res.verdict == "pass", res.failure_message()
    assert [(r["key"], r["n"], r["status"]) for r in res.by_prompt.buckets] == [
        ("ttft_max_by_prompt[<1024]", 1, "pass"), ("ttft_max_by_prompt[>=1024]", 2, "pass")]


def test_the_planned_length_buckets_a_request_the_server_did_not_count():
    w = workload({"ttft_max_by_prompt": [{"below": 1024, "budget": "300ms"}, {"below": 4096, "budget": "1s"}]})
    res = evaluate(w, [rec(None, 200, 1, planned=100), rec(None, 900, 2, planned=2000),
                       rec(3000, 900, 3, planned=900)], [])
    assert res.verdict == "pass", res.failure_message()
    assert [r["n"] for r in res.by_prompt.buckets] == [1, 2]
    assert res.by_prompt.length_source == "server count (2 of 3 planned: no server count)"


def test_an_empty_bucket_is_not_judged_never_a_pass():
    w = workload({KEY: TWO})
    res = evaluate(w, [rec(100, 10, k) for k in range(20)], [])
    assert res.verdict == "error"
    assert res.errors == ["ttft_p95_by_prompt[1024..<8192] ([1024, 8192) prompt tokens): not judged -- no request "
                          "had a prompt in this bucket; widen the prompt_tokens distribution or drop the bucket"]
    assert [r["status"] for r in res.by_prompt.buckets] == ["pass", "not_judged"]


def test_too_few_samples_for_the_percentile_behave_like_the_ordinary_budgets():
    w = workload({KEY: TWO})
    res = evaluate(w, [rec(100, 10, k) for k in range(20)] + [rec(2000, 10, 30)], [])
    assert res.errors == ["ttft_p95_by_prompt[1024..<8192] ([1024, 8192) prompt tokens): 1 samples cannot support "
                          "a p95 (needs >= 20); raise samples"]


def test_requests_above_every_bucket_are_counted_and_named():
    w = workload({"ttft_max_by_prompt": TWO})
    res = evaluate(w, [rec(100, 10, 1), rec(9000, 10, 2), rec(2000, 10, 3), rec(8192, 10, 4)], [])
    assert res.verdict == "pass"
    assert res.shown_notes == ["ttft_max_by_prompt: 2 requests had a prompt of >= 8192 tokens (longest 9000), "
                               "above every bucket: not judged by it (requests 2, 4 of the request table) -- "
                               "add an open top bucket {at_least: 8192, budget: ...} to judge them"]
    top = res.by_prompt.buckets[-1]
    assert top == {"key": "ttft_max_by_prompt[>=8192]", "budget": "ttft_max_by_prompt", "bucket": ">=8192",
                   "lo": 8192, "n": 2, "status": "no_bucket", "requests": "2, 4", "longest": 9000}


def test_a_failed_request_counts_as_a_miss_in_its_bucket():
    w = workload({"ttft_max_by_prompt": TWO})
    res = evaluate(w, [rec(100, 10, 1), rec(2000, 10, 2)],
                   [Failure("reset", "connection reset", t_send_ns=5, prompt_tokens=3000)])
    assert res.verdict == "fail"
    assert res.violations[0].message.startswith("ttft_max_by_prompt[1024..<8192] ([1024, 8192) prompt tokens): "
                                                "TTFT max inf ms > budget 1200 ms (n=2")
    assert res.by_prompt.buckets[1]["censored"] == 1


def test_at_a_confidence_the_bucket_gets_bounds_and_too_few_samples_are_inconclusive():
    w = workload({KEY: [{"below": 1024, "budget": "300ms"}]}, confidence=0.95)
    res = evaluate(w, [rec(100, 10, k) for k in range(20)], [])
    row = res.by_prompt.buckets[0]
    assert (row["status"], row["method"], row["confidence"], row["n"]) == ("inconclusive", "order-statistic", 0.95, 20)
    assert res.verdict == "fail"  # inconclusive: fail, as the ordinary budgets
    assert res.violations[0].message.startswith("ttft_p95_by_prompt[<1024] ([0, 1024) prompt tokens): TTFT p95 10.0 "
                                                "ms (95% bounds 10.0..inf ms) -- inconclusive at 20 samples")
    passed = evaluate(w, [rec(100, 10, k) for k in range(60)], [])
    assert passed.verdict == "pass" and passed.by_prompt.buckets[0]["status"] == "pass"
    assert passed.by_prompt.buckets[0]["upper_ms"] == 10.0
