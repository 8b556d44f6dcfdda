"""Speculative decoding in the pure model: step bytes and FLOPs with drafts, the engine's drafts and
accepted counts, the knobs' parsing and validation (no sockets, no sleeps).

Expected figures are written out from the catalog numbers, not computed by ``physics.py``."""
from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.targets.reference import physics as ph
from pytest_llm_latency.targets.reference.config import ReferenceConfig
from pytest_llm_latency.targets.reference.engine import Engine, EngineRequest
from pytest_llm_latency.targets.reference.launch import parse_reference_url
from pytest_llm_latency.targets.reference.speculation import Drafting, Speculation, parse_acceptance

H100 = catalog.hardware("h100-sxm")
BW, PEAK = 3350e9, 989e12
WB8, KV8, P8, L8 = 8.03e9 * 2, 2 * 32 * 8 * 128 * 2, 8.03e9, 32          # Llama-3.1-8B fp16
WB70, KV70, P70, L70 = 70.55e9 * 2, 2 * 80 * 8 * 128 * 2, 70.55e9, 80    # Llama-3.1-70B bf16
H8 = round(math.sqrt(P8 / (12 * L8)))


def phys(model="llama-3.1-8b", drafter=None, dec=1.0) -> ph.Physics:
    return ph.Physics.from_specs(H100, catalog.model(model), decode_efficiency=dec, prefill_efficiency=0.5,
                                 drafter=drafter)


def spec(k, p=1.0, seed=0):
    return Speculation(k, parse_acceptance(str(p), k), seed)


def run(engine, limit=100_000):
    steps = []
    while engine.has_work() and len(steps) < limit:
        steps.append(engine.step())
    return steps


# -- physics --------------------------------------------------------------------------------
def test_no_drafts_is_exactly_the_single_token_step():
    p = phys(drafter=ph.Drafter(weight_bytes=1e9, kv_bytes_per_token=1000, params=5e8))
    for ctx, chunks in (([100], []), ([100, 5000, 7], [(300, 0)]), ([], [(1000, 16)])):
        plain = p.step(ctx, chunks)
        assert p.step(ctx, chunks, [0] * len(ctx)) == plain          # bit-identical, not approx
        assert phys().step(ctx, chunks) == plain                      # a drafter that drafts nothing reads nothing


def test_a_step_verifying_k_drafts_reads_the_target_once_plus_k_drafter_reads():
    c, k = 500, 3
    head = 1.3e9                                                      # an EAGLE head's layers + LM head
    s = phys(drafter=ph.Drafter(weight_bytes=head, params=head / 2), dec=0.8).step([c], [], [k])
    assert s.tokens == 1 + k                                          # verified positions
    assert s.bytes == pytest.approx(WB8 + KV8 * c + k * head, rel=1e-12)
    pairs = (k + 1) * (c + 1) + k * (k + 1) / 2                       # each position attends to its prefix
    assert s.flops == pytest.approx(2 * P8 * (1 + k) + 4 * L8 * H8 * pairs + 2 * (head / 2) * k, rel=1e-3)
    assert s.memory_s == pytest.approx((WB8 + KV8 * c + k * head) / (BW * 0.8), rel=1e-12)
    assert s.bound == "memory"
    ngram = phys(dec=0.8).step([c], [], [k])                          # n-gram lookup: nothing read
    assert ngram.bytes == pytest.approx(WB8 + KV8 * c, rel=1e-12)
    assert ngram.seconds == pytest.approx(phys(dec=0.8).decode_step_seconds([c]), rel=1e-12)


def test_a_draft_model_reads_its_weights_and_its_kv_at_the_context():
    d8 = catalog.model("llama-3.1-8b")
    drafter = ph.Drafter(weight_bytes=d8.weight_bytes, kv_bytes_per_token=d8.kv_bytes_per_token, params=d8.params)
    p = phys("llama-3.1-70b", drafter)
    c, k = 2000, 4
    assert p.step([c], [], [k]).bytes == pytest.approx(WB70 + KV70 * c + k * (WB8 + KV8 * c), rel=1e-12)
    # a batch shares each drafting pass's weight read (as many passes as the longest draft),
    # but each sequence reads its own draft KV per drafted token
    two = p.step([1000, 3000], [], [3, 1])
    assert two.bytes == pytest.approx(WB70 + KV70 * 4000 + 3 * WB8 + KV8 * (3 * 1000 + 1 * 3000), rel=1e-12)
    assert two.tokens == 4 + 2


def test_moe_target_reads_the_experts_of_all_verified_positions():
    mix = catalog.model("mixtral-8x7b")
    p = phys("mixtral-8x7b")
    one, spec3 = p.step([100]), p.step([100], [], [3])
    mb = mix.model_bytes()
    assert spec3.bytes - one.bytes == pytest.approx(mb.weight_bytes_at_batch(4) - mb.weight_bytes_at_batch(1))
    assert mb.weight_bytes_at_batch(1) < mb.weight_bytes_at_batch(4) <= mix.total_params * 2


# -- speculation ----------------------------------------------------------------------------
def test_acceptance_parsing_one_number_or_one_per_position():
    assert parse_acceptance("0.8", 3) == (0.8, 0.8, 0.8)
    assert parse_acceptance("0.9, 0.5,0", 3) == (0.9, 0.5, 0.0)
    assert Speculation(3, (1.0, 1.0, 1.0)).expected_tokens_per_step() == 4.0
    assert Speculation(2, (0.2, 0.0)).expected_tokens_per_step() == pytest.approx(1.2)
    assert Speculation(3, (0.5,) * 3).expected_tokens_per_step() == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    for raw, needle in (("x", "a number in [0, 1]"), ("1.2", "probabilities in [0, 1]"),
                        ("nan", "probabilities"), ("0.5,0.5", "exactly 3")):
        with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
            parse_acceptance(raw, 3)


def test_drafts_stop_at_the_output_length_and_the_token_budget():
    d = Drafting(spec(3))
    assert [d.plan(r) for r in (10, 4, 3, 2, 1)] == [3, 3, 2, 1, 0]
    assert d.plan(10, budget=3) == 2 and d.plan(10, budget=1) == 0


def test_geometric_acceptance_draws_match_their_expectation():
    p, k, n = 0.7, 3, 20_000
    d = Drafting(spec(k, p, seed=4))
    counts = [d.verify(k) for _ in range(n)]
    mean = sum(counts) / n
    assert mean == pytest.approx(p + p ** 2 + p ** 3, abs=0.03)      # 1.533; sd of the mean ~0.008
    assert counts.count(0) / n == pytest.approx(1 - p, abs=0.015)
    per_pos = Drafting(Speculation(2, (0.2, 0.0), 1))
    draws = [per_pos.verify(2) for _ in range(n)]
    assert max(draws) == 1 and sum(draws) / n == pytest.approx(0.2, abs=0.015)
    assert {Drafting(spec(3, 1.0)).verify(k) for _ in range(50)} == {3}
    assert {Drafting(spec(3, 0.0)).verify(k) for _ in range(50)} == {0}


# -- engine ---------------------------------------------------------------------------------
def test_engine_emits_one_plus_accepted_per_step_and_truncates_the_last_draft():
    e = Engine(phys(), kv_pool_tokens=100_000, speculation=spec(2))
    e.add(EngineRequest(rid=1, prompt_len=100, max_tokens=12, target_tokens=12))
    steps = run(e)
    assert [s.tokens(1) for s in steps] == [1, 3, 3, 3, 2]            # prefill, then 1 + accepted
    assert [s.drafts.get(1) for s in steps] == [None, (2, 2), (2, 2), (2, 2), (1, 1)]
    assert [s.cost.tokens for s in steps[1:]] == [3, 3, 3, 2]          # verified positions
    for s, c in zip(steps[1:], (100, 103, 106, 109)):                  # the context before the step
        assert s.seconds == pytest.approx((WB8 + KV8 * c) / BW, rel=1e-12)
    assert steps[-1].finished == [1] and e.reserved_blocks == 0
    decode_tokens, accepted = 12 - 1, sum(a for s in steps for _, a in s.drafts.values())
    assert decode_tokens - accepted == len(steps) - 1                  # decode steps, exactly


def test_rejected_drafts_still_cost_their_verification():
    e = Engine(phys(), kv_pool_tokens=100_000, speculation=spec(3, 0.0))
    e.add(EngineRequest(rid=1, prompt_len=50, max_tokens=6, target_tokens=6))
    steps = run(e)
    assert [s.tokens(1) for s in steps] == [1] * 6
    # the drafts shrink with the tokens left; the last step has none to draft (not a draft)
    assert [s.drafts.get(1) for s in steps[1:]] == [(3, 0), (3, 0), (2, 0), (1, 0), None]
    assert [s.cost.tokens for s in steps[1:]] == [4, 4, 3, 2, 1]


def test_accepted_counts_are_deterministic_under_the_seed():
    def pattern(seed):
        e = Engine(phys(), kv_pool_tokens=100_000, speculation=spec(3, 0.6, seed))
        for rid in (1, 2):
            e.add(EngineRequest(rid=rid, prompt_len=40, max_tokens=200, target_tokens=200))
        return [sorted(s.drafts.items()) for s in run(e)]

    assert pattern(7) == pattern(7)
    assert pattern(7) != pattern(8)


def test_spec_off_engine_runs_the_same_steps_as_before():
    def costs(**kw):
        e = Engine(phys(), kv_pool_tokens=100_000, chunked_prefill=True, max_num_batched_tokens=64, **kw)
        for rid in range(3):
            e.add(EngineRequest(rid=rid, prompt_len=100 + rid, max_tokens=20, target_tokens=20))
        return [(s.cost, s.emitted, s.drafts) for s in run(e)]

    assert costs() == costs(speculation=None)
    assert all(drafts == {} for _, _, drafts in costs())


def test_drafts_use_the_chunked_prefill_token_budget():
    e = Engine(phys(), kv_pool_tokens=100_000, speculation=spec(3), chunked_prefill=True,
               max_num_batched_tokens=10)
    e.add(EngineRequest(rid=1, prompt_len=5, max_tokens=50, target_tokens=50))
    e.step()                                                           # prefill
    e.add(EngineRequest(rid=2, prompt_len=20, max_tokens=5, target_tokens=5))
    s = e.step()
    assert s.drafts[1] == (3, 3) and s.prefill == [(2, 6, 0)]          # 1 + 3 positions, 6 prompt tokens
    assert s.cost.tokens == 10


# -- config ---------------------------------------------------------------------------------
def test_url_knobs_build_the_engine_and_the_drafter():
    cfg = parse_reference_url("reference://h100-sxm/llama-3.1-8b?decode_efficiency=0.8&spec_tokens=2"
                              "&spec_acceptance=0.2,0&spec_seed=5")
    assert cfg.speculation() == Speculation(2, (0.2, 0.0), 5) and cfg.drafter() is None
    head = parse_reference_url("reference://h100-sxm/llama-3.1-8b?spec_tokens=3&draft_bytes=1.3e9")
    assert head.drafter() == ph.Drafter(weight_bytes=1.3e9, params=0.65e9, name="1.3e+09-byte draft head")
    assert head.physics().step([0], [], [3]).bytes == pytest.approx(WB8 + 3 * 1.3e9)
    dm = parse_reference_url("reference://h100-sxm/llama-3.1-70b?spec_tokens=4&draft_model=llama-3.1-8b"
                             "&kv_pool_tokens=50000")
    assert dm.drafter().weight_bytes == pytest.approx(WB8) and dm.drafter().kv_bytes_per_token == KV8
    assert ReferenceConfig().speculation() is None and ReferenceConfig().drafter() is None
    rebuilt = ReferenceConfig(**{f.name: getattr(dm, f.name) for f in dataclasses.fields(dm)})
    assert "--draft-model" in rebuilt.to_cli_args() and "--spec-tokens" in rebuilt.to_cli_args()


def test_a_draft_model_takes_device_memory_from_the_kv_pool():
    plain = ReferenceConfig(hardware="h200", model="llama-3.1-8b").pool_tokens()
    with_draft = ReferenceConfig(hardware="h200", model="llama-3.1-8b", spec_tokens=2,
                                 draft_model="llama-3.1-8b").pool_tokens()
    free = 141e9 * 0.9 - WB8
    assert plain == int(free // KV8)
    assert with_draft == int((free - WB8) // (2 * KV8))


@pytest.mark.parametrize("query, needle", [
    ("spec_acceptance=0.5", "spec_acceptance needs spec_tokens > 0"),
    ("draft_bytes=1e9", "draft_bytes needs spec_tokens > 0"),
    ("spec_seed=3", "spec_seed needs spec_tokens > 0"),
    ("spec_tokens=-1", "spec_tokens must be in [0, 32]"),
    ("spec_tokens=2&spec_acceptance=0.5,0.2,0.1", "lists 3 per-position probabilities"),
    ("spec_tokens=2&draft_model=nope", "draft_model: unknown model 'nope'"),
    ("spec_tokens=2&draft_model=llama-3.1-8b&draft_bytes=1", "not both"),
    ("spec_tokens=2&draft_bytes=-1", "draft_bytes must be a finite number >= 0"),
    ("spec_tokens=1&draft_model=llama-3.1-70b", "draft model Llama-3.1-70B"),
])
def test_bad_speculation_knobs_are_clear_errors(query, needle):
    with pytest.raises(ConfigError) as err:
        parse_reference_url(f"reference://h100-sxm/llama-3.1-8b?{query}")
    assert needle in str(err.value) and "reference URL" in str(err.value)


def test_serve_reference_flags_carry_the_knobs_and_describe_them():
    import argparse

    from pytest_llm_latency.cli.serve_reference import add_arguments, config_from_args, describe

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = config_from_args(parser.parse_args(["--spec-tokens", "2", "--spec-acceptance", "0.5,0.1",
                                              "--draft-bytes", "1e9", "--spec-seed", "4"])).validate()
    assert cfg.speculation() == Speculation(2, (0.5, 0.1), 4) and cfg.drafter().weight_bytes == 1e9
    line = describe(cfg)
    assert "speculative decoding k=2 (acceptance 0.5,0.1, expected 1.55 tokens per full step" in line
    assert "1e+09-byte draft head" in line
    assert "speculative" not in describe(ReferenceConfig())
    again = config_from_args(parser.parse_args(cfg.to_cli_args()))
    assert again == cfg
