"""A/B arms judged on every block (``core.result.blocks.combine_blocks``, ``client.drivers.ab_interleaved``):
a problem the measurement found in a later block of either arm -- a client that fell behind, a
prefix cache that served the salted prompts, streams without per-token counts, cold starts, short
outputs -- reaches the judged result, naming the block where it can; an all-good run passes with the
figures of every block's records.  No server: each block is measured here with the recording code the
pipeline runs (``client.drivers.load_report.client_summary``, ``pipeline.record_prefix_cache``,
``record_cold_starts``), then judged by the real ``core.checks.judge``."""
from __future__ import annotations

from dataclasses import fields

import pytest

from pytest_llm_latency.client.drivers.ab_alternating import ABAlternating
from pytest_llm_latency.client.drivers.ab_interleaved import ABInterleaved
from pytest_llm_latency.client.drivers.base import ABArms, Run
from pytest_llm_latency.client.drivers.pipeline import record_cold_starts, record_prefix_cache
from pytest_llm_latency.client.drivers.load_report import client_summary
from pytest_llm_latency.core.measure import coldstart, metrics as m
from pytest_llm_latency.core.result.blocks import combine_blocks, combine_client, combine_facts
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.result.facts import (AgentRun, ColdStarts, Comparison, Facts, GateOutcome, PerChunkItl,
    RateSweepRun, ServerSweepRun)
from pytest_llm_latency.core.measure.prefix_cache import CacheEvidence
from pytest_llm_latency.core.measure.bunching import StallTimeline
from pytest_llm_latency.core.measure.prefill_overlap import PrefillWindow
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.result.result_parts import ClientHealth
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record

BT = "http://127.0.0.1:9"
SPEC = {"class": "custom", "prompt_tokens": 1000, "output_tokens": 4, "samples": 15, "warmup": 0,
        "slo": {"ttft_p50": 200, "itl_p50": 100}, "baseline_target": BT}
ALTERNATING = {**SPEC, "baseline_target": {"url": BT, "mode": "alternating", "block": 5}}
MS = 1_000_000
GOOD_LAG_NS = [1 * MS] * 100
STARVED_LAG_NS = [90 * MS] * 100   # p99 90 ms against a 10 ms ITL: the one-process rule says behind


def measure_block(w, problem: str | None, k: int = 0):
    """Block ``k``: ``w.samples`` requests (TTFT 50 + k ms, 3 gaps of 10 ms, 1000 prompt tokens), recorded as
    ``pipeline.measure_samples`` records it, with ``problem`` found in it."""
    timings = {"cache_n": 990 if problem == "prefix_cache" else 0}  # llama.cpp: cached prompt tokens per response
    recs = [record(50 + k, gap_ms=10, tokens=4, prompt_tokens=1000, server_timings=dict(timings))
            for _ in range(w.samples)]
    if problem == "per_chunk":  # 3 streams whose counts could not be recovered
        for r in recs[:3]:
            r.token_count_rule = "per chunk"
    if problem == "short":      # stopped before the forced length
        recs[1] = record(50, gap_ms=10, tokens=3, expected=4, prompt_tokens=1000, server_timings=dict(timings))
    if problem == "cold":       # the server loaded the model inside sample 2's TTFT
        recs[1].server_timings["load_ms"] = 2000.0
    numbers, cold = coldstart.split(recs)
    kept = [r for r in recs if not any(r is c for c in cold)] if w.cold_starts == "exclude" else recs
    res = measured(w, kept, [])
    res.measurement.set(samples_mode="fixed", stop_reason=f"fixed samples ({len(recs)})",
                        itl_token_counts=m.itl_token_counts(recs))
    record_cold_starts(res, numbers, cold, len(recs), None)
    client_summary(res, STARVED_LAG_NS if problem == "behind" else GOOD_LAG_NS, engine=True)
    record_prefix_cache(res, None)
    if problem == "per_chunk":
        res.facts.per_chunk_itl = PerChunkItl(3, len(recs), "")
        res.notes.append(f"ITL is per chunk, not per token, on 3 of {len(recs)} streams")
    res.notes.append("model m")  # a note every block gives
    return res


class Blocks:
    """The inner driver: block ``k`` of arm ``client`` has ``problems[(client, k)]``."""

    def __init__(self, problems=None):
        self.problems, self.calls = dict(problems or {}), []

    def __call__(self, w):
        return self

    def measure(self, client, w, run):
        k = sum(1 for c, _ in self.calls if c == client)
        self.calls.append((client, k))
        return measure_block(w, self.problems.get((client, k)), k)


def ab(problems=None, spec=SPEC, driver=ABInterleaved, **over):
    w = make_workload("w", {**spec, **over})
    inner = Blocks(problems)
    arms = ABArms("b", 5) if driver is ABInterleaved else ABArms(lambda: "b", 5, lambda: "a", lambda arm: None)
    a, b = driver(inner).measure_arms("a", w, Run(salt_context="t", ab=arms))
    assert [k for c, k in inner.calls if c == "a"] == [0, 1, 2]          # three blocks of 5 in each arm
    return judge(a), b


# ---------------------------------------------------------------------- all good: as before
def test_an_all_good_multi_block_run_passes_with_the_figures_of_every_blocks_records():
    a, b = ab()
    assert a.verdict == "pass", a.failure_message()
    w, w5 = make_workload("w", SPEC), make_workload("w", {**SPEC, "samples": 5})
    blocks = [measure_block(w5, None, k) for k in range(3)]
    before = measured(w, [r for x in blocks for r in x.records], [])  # what the arm was judged on before
    for metric in ("ttft", "tpot", "itl", "e2e", "output_tps"):
        assert a.summaries[metric] == before.summaries[metric]         # the same statistics as before
    assert a.ttft.p50 == 51.0 and a.ttft.min == 50.0 and a.ttft.max == 52.0  # every block's records
    assert a.n == b.n == 15 and a.load.ab_blocks == 3 and not a.errors and not a.failed_checks
    assert a.notes == ["model m"]                                          # a note every block gave: once, as is
    one = blocks[0]
    assert a.client.client_lag_ms_p99 == one.client.client_lag_ms_p99 and a.client.client_fell_behind == 0
    assert a.client.events_per_read == one.client.events_per_read
    assert a.client.burst_chunks == 3 * one.client.burst_chunks
    assert a.prefix_cache.cached_tokens == 0 and a.facts.prefix_cache is not None
    assert a.facts.cold is not None and a.facts.cold.total == 15 and not a.facts.cold.cold
    assert a.measurement.stop_reason == "fixed samples (15)"              # not the first block's 5
    assert a.measurement.itl_token_counts == one.measurement.itl_token_counts
    assert a.facts.baseline_target_arm is b and not [f for f in a.findings if f.text.startswith("baseline target:")]


# ---------------------------------------------------------------------- a later block's problem, either arm
@pytest.mark.parametrize("driver,spec", [(ABInterleaved, SPEC), (ABAlternating, ALTERNATING)])
@pytest.mark.parametrize("block", [1, 2])
def test_a_client_behind_in_a_later_candidate_block_makes_the_run_an_error(driver, spec, block):
    a, _ = ab({("a", block): "behind"}, spec, driver)
    assert a.verdict == "error"
    assert any(e.startswith("the client fell behind (CPU-starved: lag p99 90 ms)") for e in a.errors), a.errors
    assert a.client.client_fell_behind == 1 and a.client.client_lag_ms_p99 == 90.0  # the worst block's lag


@pytest.mark.parametrize("block", [1, 2])
def test_a_client_behind_in_a_later_baseline_block_makes_the_run_an_error_naming_the_baseline(block):
    a, b = ab({("b", block): "behind"})
    assert b.facts.client_fell_behind and not a.facts.client_fell_behind
    assert a.verdict == "error"
    assert any(e.startswith("baseline target: the client fell behind (CPU-starved: lag p99 90 ms)")
               for e in a.errors), a.errors


@pytest.mark.parametrize("arm,prefix", [("a", ""), ("b", "baseline target: ")])
def test_a_prefix_cache_hit_in_a_later_block_is_not_judged_naming_the_block(arm, prefix):
    a, _ = ab({(arm, 1): "prefix_cache"})
    name = "candidate" if arm == "a" else "baseline target"
    assert a.verdict == "error"
    err = next(e for e in a.errors if e.startswith(prefix + "not judged: 4950 of 5000 prompt tokens"))
    assert f"A/B block 2 ({name}), the worst of 3 blocks" in err


def test_one_replayed_block_among_many_is_not_diluted_by_the_others_allowance():
    """20 blocks of 5: summed, one block's 4950 cached tokens are under the arm's allowance (20 x
    (5 x 32 + 5% of 5000) = 8200), so a sum would pass; the worst block is judged on its own."""
    w = make_workload("w", {**SPEC, "samples": 100})
    blocks = [measure_block(make_workload("w", {**SPEC, "samples": 5}), "prefix_cache" if k == 13 else None)
              for k in range(20)]
    res = judge(combine_blocks(w, blocks, lambda k: f"A/B block {k + 1} (candidate)"))
    assert res.prefix_cache.cached_tokens == 4950 and res.prefix_cache.cached_tokens < 8200
    assert res.verdict == "error" and any("A/B block 14 (candidate), the worst of 20 blocks" in e for e in res.errors)


@pytest.mark.parametrize("arm,prefix", [("a", ""), ("b", "baseline target: ")])
def test_per_chunk_itl_in_a_later_block_makes_the_itl_budget_unjudgeable(arm, prefix):
    a, _ = ab({(arm, 2): "per_chunk"})
    assert a.verdict == "error"
    assert any(e.startswith(prefix + "itl_p50 cannot be judged: 3 of 15 streams gave no per-chunk token counts")
               for e in a.errors), a.errors


@pytest.mark.parametrize("arm,prefix", [("a", ""), ("b", "baseline target: ")])
def test_a_cold_start_in_a_later_block_is_named_by_its_number_in_the_arm(arm, prefix):
    a, _ = ab({(arm, 1): "cold"}, cold_starts="fail")
    assert a.verdict == "fail"
    text = next(t for t in a.failed_checks if t.startswith(prefix + "1 of 15 samples were cold starts"))
    assert "(load_duration: #7 2000 ms)" in text                           # block 2's sample 2: the arm's 7th
    a, _ = ab({(arm, 2): "cold"})                                         # cold_starts: exclude (default)
    assert a.verdict == "pass" and any(n.startswith(prefix + "1 of 15 samples were cold starts") and "#12 " in n
                                       for n in a.shown_notes), a.shown_notes
    if arm == "a":
        assert a.n == 14 and a.cold_start.cold_starts == 1 and a.cold_start.cold_start_samples == "12"


def test_a_short_output_in_a_later_block_counts_against_max_error_rate():
    a, _ = ab({("a", 2): "short"})
    assert a.verdict == "error" and any("1 of 15 requests stopped before" in e for e in a.errors), a.errors


def test_a_later_blocks_note_is_kept_naming_its_block():
    a, _ = ab({("a", 2): "per_chunk"}, slo={"ttft_p50": 200})   # no ITL budget: a note, not an error
    assert a.verdict == "pass"
    assert "A/B block 3 (candidate): ITL is per chunk, not per token, on 3 of 5 streams" in a.shown_notes
    assert a.measurement.itl_token_counts == "one each 12, per chunk 3"   # every block's streams


# ---------------------------------------------------------------------- field by field: nothing left behind
W = make_workload("w", SPEC)
PART = measured(W, [record(50)], [])
#: a value each Facts field can have that its default has not, found in one block only
FOUND = {
    "server_failed": True, "server_died": "exit 1", "cold": ColdStarts([1], [record(50)], 5),
    "prefix_cache": CacheEvidence(4950, 5000, 5, "llama.cpp timings.cache_n of each response"),
    "cache_bound_tokens": 10, "trace_incomplete": "3 rows not sent", "per_chunk_itl": PerChunkItl(1, 5),
    "client_fell_behind": True, "workers_failed": ["worker 1 died"], "agent": AgentRun(None, ("s",), 0.5),
    "sweep_parts": [("prompt 10: ", PART)], "rate_sweep": RateSweepRun(None), "server_sweep": ServerSweepRun(None),
    "baseline_target_empty": "none",
    "gates": [GateOutcome("roofline", "report", "x")], "comparisons": [Comparison("baseline")],
    "baseline_target_arm": PART, "prefill_windows": [PrefillWindow(0, 5, 2048, "long", 1)],
    "client_stalls": StallTimeline(((10, 5),), 2, 0, 20),
    "unmeasured_windows": [PrefillWindow(0, 5, 2048, "long", 0)], "request_order": [PART],
}


def test_every_fact_is_decided_on():
    """A new ``Facts`` field must be given its combining rule in ``core.result.blocks.combine_facts`` (and a row
    here)."""
    assert set(FOUND) == {f.name for f in fields(Facts)}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_a_fact_found_in_block_three_only_reaches_the_arm(name):
    blocks = [measured(W, [record(50)] * 5, []) for _ in range(3)]
    setattr(blocks[2].facts, name, FOUND[name])
    if name == "cache_bound_tokens":  # a bound goes with its block's evidence
        blocks[2].facts.prefix_cache = FOUND["prefix_cache"]
    facts = combine_facts(blocks, W, lambda k: f"block {k + 1}")
    got, default = getattr(facts, name), getattr(Facts(), name)
    assert got != default and got is not None
    if isinstance(got, list) and name in ("workers_failed",):
        assert got == ["block 3: worker 1 died"]
    if name == "cold":
        assert got.numbers == [11] and got.total == 15                 # numbered in the arm's order


@pytest.mark.parametrize("name", [f.name for f in fields(ClientHealth)
                                  if f.name not in ("events_per_read", "connect_ms_p50")])
def test_a_client_figure_found_in_block_two_only_reaches_the_arm(name):
    blocks = [measured(W, [record(50)], []) for _ in range(3)]
    setattr(blocks[1].client, name, 90.0 if "ms" in name else 1)
    got = getattr(combine_client(blocks, []), name)
    assert got == (90.0 if "ms" in name else 1)


def test_the_client_figures_of_the_records_are_recomputed_over_every_block():
    recs = [record(50, gaps_ms=[10, 0.01, 10]), record(50, gap_ms=10)]
    blocks = [measured(W, [recs[0]], []), measured(W, [recs[1]], [])]
    for b in blocks:
        b.client.events_per_read = m.events_per_read(b.records)
    assert combine_client(blocks, recs).events_per_read == round(m.events_per_read(recs), 3)
    blocks[0].client.client_lag_ms_p99, blocks[1].client.client_lag_ms_p99 = 3.0, 40.0
    assert combine_client(blocks, recs).client_lag_ms_p99 == 40.0         # the worst block's, not a mean


def test_the_baseline_arm_is_judged_against_the_budgets_the_run_is_judged_against():
    """``with_workload`` (other budgets): the ITL budget makes the baseline arm's per-chunk
    streams an error, and with it dropped they are none."""
    from pytest_llm_latency.core.checks import with_workload

    a, _ = ab({("b", 1): "per_chunk"})
    assert any(e.startswith("baseline target: itl_p50 cannot be judged") for e in a.errors)
    again = judge(with_workload(a, make_workload("w", {**SPEC, "slo": {"ttft_p50": 200}})))
    assert again.verdict == "pass" and not again.errors, again.errors
