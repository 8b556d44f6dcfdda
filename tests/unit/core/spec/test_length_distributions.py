"""Length distributions and shared-prefix groups (issue 27): parsing, the seeded draw, prompts of
each request's own exact length, and the expected cache hits of declared groups."""
import math
import statistics

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.lengths import LengthDist, draw_lengths, mean_lengths, parse_length
from pytest_llm_latency.core.measure.prefix_cache import CacheEvidence, expected_shared, decide
from pytest_llm_latency.core.prompts.synthesis import build_prompts
from pytest_llm_latency.core.measure.record import RequestRecord
from pytest_llm_latency.core.spec.workload import make_workload

N = 2000


def words(text: str) -> int:
    return len(text.split()) + 1  # a BOS-counting whitespace tokenizer


def dist(**kw) -> LengthDist:
    d = parse_length(kw, "w.prompt_tokens")
    assert isinstance(d, LengthDist)
    return d


def test_the_same_seed_draws_the_same_lengths_and_another_seed_others():
    d = dist(distribution="lognormal", mean=500, stdev=250)
    a = draw_lengths(d, 50, seed=7, key="prompt_tokens")
    assert a == draw_lengths(d, 50, seed=7, key="prompt_tokens")
    assert a != draw_lengths(d, 50, seed=8, key="prompt_tokens")
    assert a != draw_lengths(d, 50, seed=7, key="output_tokens")  # prompt and output lengths independent
    assert draw_lengths(300, 4, seed=7, key="prompt_tokens") == [300] * 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lognormal_lengths_have_the_requested_mean_and_stdev_of_the_lengths(seed):
    got = draw_lengths(dist(distribution="lognormal", mean=500, stdev=250), N, seed=seed, key="prompt_tokens")
    se = 250 / math.sqrt(N)  # ~5.6: the sample mean's standard error
    assert abs(statistics.fmean(got) - 500) < 4 * se
    assert abs(statistics.stdev(got) - 250) < 0.12 * 250  # the heavy tail makes the stdev noisier
    assert min(got) >= 1 and all(isinstance(x, int) for x in got)
    # the median of a lognormal is exp(mu) = mean / sqrt(1 + cv^2) = 447 here (not the mean: it is skewed)
    assert abs(statistics.median(got) - 500 / math.sqrt(1.25)) < 20


def test_normal_lengths_match_and_are_clipped_to_min_and_max():
    got = draw_lengths(dist(distribution="normal", mean=400, stdev=50), N, seed=3, key="output_tokens")
    assert abs(statistics.fmean(got) - 400) < 4 * 50 / math.sqrt(N)
    assert abs(statistics.stdev(got) - 50) < 0.08 * 50
    clipped = draw_lengths(dist(distribution="normal", mean=400, stdev=200, min=300, max=450), N, seed=3,
                           key="output_tokens")
    assert min(clipped) == 300 and max(clipped) == 450
    assert clipped.count(300) > N * 0.25  # P(x < 300) = 31%: piled on the bound, not redrawn


def test_uniform_lengths_cover_the_range_evenly():
    got = draw_lengths(dist(distribution="uniform", min=100, max=199), N, seed=5, key="prompt_tokens")
    assert min(got) == 100 and max(got) == 199
    assert abs(statistics.fmean(got) - 149.5) < 4 * (100 / math.sqrt(12)) / math.sqrt(N)
    assert abs(sum(1 for x in got if x < 150) / N - 0.5) < 0.05


def test_fixed_and_the_context_and_floor_clips():
    assert draw_lengths(dist(distribution="fixed", value=64), 3, seed=0, key="prompt_tokens") == [64] * 3
    d = dist(distribution="uniform", min=10, max=5000)
    got = draw_lengths(d, 500, seed=0, key="prompt_tokens", floor=40, clip_to=1000)
    assert min(got) == 40 and max(got) == 1000


@pytest.mark.parametrize("spec, message", [
    ({"distribution": "lognormall", "mean": 5, "stdev": 1},
     "w.prompt_tokens.distribution: expected one of uniform, normal, lognormal, fixed, got 'lognormall'; "
     "did you mean 'lognormal'? -- e.g. {distribution: lognormal, mean: 512"),
    ({"mean": 5}, "w.prompt_tokens.distribution: expected one of uniform, normal, lognormal, fixed, got None"),
    ({"distribution": "normal", "mean": 500},
     "w.prompt_tokens: a normal distribution needs mean and stdev; stdev is missing"),
    ({"distribution": "uniform", "min": 5},
     "w.prompt_tokens: a uniform distribution needs min and max; max is missing"),
    ({"distribution": "normal", "mean": 500, "stdev": -1}, "w.prompt_tokens.stdev: expected a number >= 0, got -1"),
    ({"distribution": "lognormal", "mean": 0, "stdev": 1}, "w.prompt_tokens.mean: expected a number > 0, got 0"),
    ({"distribution": "uniform", "min": 900, "max": 100}, "w.prompt_tokens: min (900) must not exceed max (100)"),
    ({"distribution": "fixed", "value": 1.5}, "w.prompt_tokens.value: expected an integer > 0, got 1.5"),
    ({"distribution": "normal", "mean": 5, "stdev": 1, "stddev": 2},
     "w.prompt_tokens.stddev: unknown parameter of a normal distribution; did you mean 'stdev'? -- allowed: mean, "
     "stdev, min, max"),
    ({"distribution": "normal", "mean": 50, "stdev": 1, "min": 100},
     "w.prompt_tokens.mean: the mean (50) must lie within [min, max] ([100, ...])"),
])
def test_a_bad_distribution_is_a_config_error_naming_the_key(spec, message):
    with pytest.raises(ConfigError) as e:
        parse_length(spec, "w.prompt_tokens")
    assert str(e.value).startswith(message), str(e.value)


def test_workloads_keep_one_nominal_number_and_refuse_what_cannot_vary():
    w = make_workload("w", {"prompt_tokens": {"distribution": "uniform", "min": 100, "max": 300},
                            "output_tokens": {"distribution": "lognormal", "mean": 64, "stdev": 32}})
    assert (w.prompt_tokens, w.output_tokens) == (200, 64)
    assert w.prompt_dist == LengthDist("uniform", mean=200.0, min=100, max=300)
    assert make_workload("w", {"prompt_tokens": 10, "output_tokens": 2}).prompt_dist is None
    with pytest.raises(ConfigError, match=r"^output_tokens: a prompt_sweep sets each step's lengths itself"):
        make_workload("w", {"prompt_sweep": [64, 128], "output_tokens": {"distribution": "fixed", "value": 2}})
    with pytest.raises(ConfigError, match=r"^prompt_tokens: agent sessions send one fixed-length transcript"):
        make_workload("w", {"steps": 3, "prompt_tokens": {"distribution": "uniform", "min": 2000, "max": 3000}})
    with pytest.raises(ConfigError, match=r"give shared_prefix_groups or shared_prefix_tokens, not both"):
        make_workload("chat", {"shared_prefix_groups": {"groups": 2, "tokens": 64}, "shared_prefix_tokens": 32})
    with pytest.raises(ConfigError, match=r"^shared_prefix_groups: shared_prefix_groups.tokens \(512\) must be "
                                          r"smaller than prompt_tokens \(512\)"):
        make_workload("chat", {"shared_prefix_groups": {"groups": 2, "tokens": 512}})
    with pytest.raises(ConfigError, match=r"^shared_prefix_groups.groups: expected an integer >= 1, got 0"):
        make_workload("chat", {"shared_prefix_groups": {"groups": 0, "tokens": 64}})
    with pytest.raises(ConfigError, match=r"^shared_prefix_groups.token: unknown key; did you mean 'tokens'\?"):
        make_workload("chat", {"shared_prefix_groups": {"groups": 2, "token": 64}})


def test_each_prompt_has_its_own_exact_length_and_output_length():
    lengths = draw_lengths(dist(distribution="uniform", min=40, max=400), 30, seed=1, key="prompt_tokens")
    outputs = list(range(1, 31))
    prompts = build_prompts(words, n=30, prompt_tokens=0, seed=1, nonce="n", lengths=lengths,
                            output_lengths=outputs, system_prompt_tokens=24)
    assert [words(p.text) for p in prompts] == lengths == [p.expected_tokens for p in prompts]
    assert [p.output_tokens for p in prompts] == outputs
    assert len({p.system[:60] for p in prompts}) == 30  # each still salted on its own


def test_one_length_builds_the_prompts_it_built_before_lengths_existed():
    a = build_prompts(words, n=5, prompt_tokens=120, seed=4, nonce="x", system_prompt_tokens=30)
    b = build_prompts(words, n=5, prompt_tokens=0, seed=4, nonce="x", system_prompt_tokens=30, lengths=[120] * 5)
    assert a == b and all(p.output_tokens is None for p in a)


def test_shared_prefix_groups_are_shared_within_a_run_and_never_across_runs():
    lengths = [200, 260, 300, 340, 220, 280]
    a = build_prompts(words, n=6, prompt_tokens=0, seed=2, nonce="run-a", lengths=lengths, prefix_groups=(2, 64))
    b = build_prompts(words, n=6, prompt_tokens=0, seed=2, nonce="run-b", lengths=lengths, prefix_groups=(2, 64))
    head = lambda p: " ".join(p.text.split()[:63])  # noqa: E731 -- 64 tokens with BOS
    assert [words(p.text) for p in a] == lengths
    assert head(a[0]) == head(a[2]) == head(a[4]) != head(a[1]) == head(a[3]) == head(a[5])  # group i mod 2
    assert {head(p) for p in a}.isdisjoint({head(p) for p in b})  # the nonce salts the groups
    assert all(p.shared_tokens == 64 for p in a)
    rest = lambda p: " ".join(p.text.split()[63:73])  # noqa: E731 -- each request's own salt follows it
    assert len({rest(p) for p in a}) == 6


def test_declared_groups_make_their_hits_expected_and_hits_beyond_them_unjudgeable():
    assert expected_shared(100, 10) == 10 * 96  # rounded down to whole 16-token blocks
    prompt = 20 * 500
    hit = CacheEvidence(20 * 96 + 300, prompt, 20, "vllm:prefix_cache_hits_total in /metrics")
    v = decide(hit, expected_tokens=expected_shared(100, 20))
    assert v.error is None and "expected: shared_prefix_groups declares up to 1920 cached tokens" in v.note
    assert decide(hit).error is not None  # the same hits without the declaration: refused as today
    faked = CacheEvidence(prompt - 20, prompt, 20, "llama.cpp timings.cache_n of each response")
    v = decide(faked, expected_tokens=expected_shared(100, 20))
    assert v.error.startswith("not judged: 9980 of 10000 prompt tokens")
    assert "plus the 1920 that shared_prefix_groups declares" in v.error


def test_one_number_after_the_run_is_the_requests_mean_length():
    w = make_workload("w", {"prompt_tokens": {"distribution": "uniform", "min": 100, "max": 300}, "output_tokens": 8})
    recs = [RequestRecord(t_send_ns=0, prompt_tokens=p, expected_prompt_tokens=p, completion_tokens=8,
                          expected_output_tokens=8) for p in (100, 150, 290)]
    assert mean_lengths(w, recs) == (180.0, 8.0)
    assert mean_lengths(w, []) == (200.0, 8.0)
    fixed = make_workload("w", {"prompt_tokens": 120, "output_tokens": 8})
    assert mean_lengths(fixed, recs) == (120.0, 8.0)  # fixed lengths: the workload's, as before


def test_fluidity_owes_each_request_its_own_drawn_output_length():
    from pytest_llm_latency.core.result.goodput import fluidity
    from pytest_llm_latency.core.measure.record import TokenChunk

    w = make_workload("w", {"prompt_tokens": 64, "output_tokens": {"distribution": "uniform", "min": 2, "max": 18},
                            "slo": {"ttft_p95": "100ms", "tpot_p95": "10ms"}})
    assert w.output_tokens == 10
    ms = 1_000_000
    # 3 tokens, every one on time, of the 3 this request was asked for (not the nominal 10)
    rec = RequestRecord(t_send_ns=0, chunks=[TokenChunk(50 * ms, 1), TokenChunk(55 * ms, 1), TokenChunk(60 * ms, 1)],
                        t_end_ns=61 * ms, completion_tokens=3, expected_output_tokens=3)
    assert fluidity([rec], [], w) == 1.0


def test_counter_calls_are_one_fit_per_distinct_length_plus_one_verify_per_other_prompt():
    calls = []

    def count(text):
        calls.append(1)
        return words(text)

    lengths = [100, 200, 100, 300, 200, 100, 300, 100]
    prompts = build_prompts(count, n=8, prompt_tokens=0, seed=0, nonce="c", lengths=lengths)
    assert [words(p.text) for p in prompts] == lengths
    fit = 2 * math.ceil(math.log2(2 * 300 + 16)) + 8  # one binary search over at most 2 x 300 + 16 words
    assert len(calls) <= 3 * fit + (8 - 3), len(calls)
