"""A trace's prompts prepared with a bounded number of counter calls (issue 27, ``client.prepare.trace_prompts``):
calibration's constant plus one verify call per opening prompt, a re-plan at most once per prompt, and
the embedded reference target's own counts (with and without a tokenize endpoint) matching the plan."""
from __future__ import annotations

import random

import pytest

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client
from pytest_llm_latency.client.prepare.trace_prompts import prepare_block_prompts
from pytest_llm_latency.core.prompts.block_text import CALIBRATION_CALLS, BlockSpec
from pytest_llm_latency.targets.reference import tokenizer as reference
from pytest_llm_latency.targets.reference.launch import start_reference
from tests.helpers.counting import counting


def specs(n: int, block: int = 16, seed: int = 0) -> list[BlockSpec]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(4, 6 * block)
        blocks = -(-length // block)
        ids = tuple(range(rng.randint(1, blocks)))  # leading ids shared by every row, the rest the row's own
        out.append(BlockSpec(ids, length, rng.randint(1, 8), opens_prompt=i % 4 != 3, key=f"row{i}" if i % 2 else None))
    return out


class Clock:
    def __init__(self):
        self.t = 0

    def __call__(self) -> int:
        self.t += 1_250_000_000
        return self.t


def test_calls_are_the_calibration_constant_plus_one_verify_per_opening_prompt():
    count, calls = counting(reference.count)
    rows = specs(60)
    prompts, stats = prepare_block_prompts(count, rows, nonce="n1", seed=3, block_tokens=16, clock=Clock())
    opening = sum(r.opens_prompt for r in rows)
    assert 0 < opening < len(rows)
    assert len(calls) == stats.tokenize_calls == CALIBRATION_CALLS + opening
    assert (stats.calibration_calls, stats.verify_calls, stats.replans, stats.deviations) == (CALIBRATION_CALLS,
                                                                                             opening, 0, 0)
    assert stats.seconds == 1.25  # the injected clock: one tick between start and end
    for i, (r, p) in enumerate(zip(rows, prompts)):
        assert p.expected_tokens == p.counted_tokens == r.input_length == reference.count(p.text)
        assert p.output_tokens == r.output_length and p.key == (i if r.key is None else r.key) and p.system == ""
    assert "12 verify call" not in stats.description and f"{opening} verify call(s)" in stats.description


def test_a_verify_that_disagrees_is_replanned_once_and_then_recorded():
    # additive on short texts (calibration), then one token more on long prompts of an odd word count:
    # the re-plan (one word fewer) is then even and exact for even lengths; odd lengths stay off by one
    def odd_long(text: str) -> int:
        n = reference.count(text)
        return n + (1 if len(text) > 1000 and n % 2 else 0)
    count, calls = counting(odd_long)
    rows = [BlockSpec((1, 2)[:1 + n // 256], n, 4) for n in (300, 301, 400, 401, 20)]
    prompts, stats = prepare_block_prompts(count, rows, nonce="n", seed=0, block_tokens=256)
    assert stats.replans == 2 and stats.verify_calls == 5 + 2 and len(calls) == CALIBRATION_CALLS + 7
    assert [p.counted_tokens for p in prompts] == [300, 302, 400, 402, 20]  # 301 and 401: closer not found
    assert stats.deviations == 2 and "row 1: counted 302 tokens for input_length 301" in stats.description


def test_a_counter_that_can_be_fixed_is_fixed_by_the_replan():
    count, calls = counting(lambda t: reference.count(t) + (1 if len(t) > 1000 else 0))  # a long-prompt token
    rows = [BlockSpec((1,), n, 4) for n in (300, 40, 450)]
    prompts, stats = prepare_block_prompts(count, rows, nonce="n", seed=0, block_tokens=512)
    assert [p.counted_tokens for p in prompts] == [300, 40, 450] and stats.replans == 2 and stats.deviations == 0
    assert [count(p.text) for p in prompts] == [300, 40, 450]


@pytest.fixture(scope="module")
def servers():
    with start_reference("reference://h100-sxm/llama-3.1-8b?time_scale=0", mode="thread") as with_endpoint, \
            start_reference("reference://h100-sxm/llama-3.1-8b?time_scale=0&tokenize_endpoint=0",
                            mode="thread") as without:
        yield with_endpoint.url, without.url


def client_for(url: str):
    http = make_http_client()
    seen: list[str] = []
    http.event_hooks["request"].append(lambda req: seen.append(req.url.path))
    return http, make_client(Target(url, "openai-chat"), http), seen


def test_the_reference_target_counts_every_prepared_prompt_as_planned(servers):
    http, client, seen = client_for(servers[0])
    with http:
        rows = specs(12, block=32, seed=5)
        prompts, stats = prepare_block_prompts(client, rows, nonce="ref", seed=1, block_tokens=32)
        setup = seen.count("/tokenize") - stats.tokenize_calls
        assert stats.tokenize_calls == CALIBRATION_CALLS + sum(r.opens_prompt for r in rows) and setup == 3
        assert seen.count("/v1/chat/completions") == 1  # make_counter's template-offset probe
        assert "/tokenize endpoint" in stats.description and stats.deviations == 0
        for r, p in list(zip(rows, prompts))[:4]:
            if r.opens_prompt:
                rec = client.stream(p.system, p.user, p.output_tokens)
                assert rec.prompt_tokens == r.input_length and rec.output_tokens == r.output_length


def test_without_a_tokenize_endpoint_the_palette_is_calibrated_on_probe_requests(servers):
    http, client, seen = client_for(servers[1])
    with http:
        rows = specs(8, block=32, seed=6)
        prompts, stats = prepare_block_prompts(client, rows, nonce="ref2", seed=1, block_tokens=32)
        assert (stats.tokenize_calls, stats.verify_calls, stats.calibration_calls) == (0, 0, CALIBRATION_CALLS)
        assert seen.count("/v1/chat/completions") == 2 + CALIBRATION_CALLS  # make_counter's two probes + ours
        assert "no tokenize endpoint" in stats.description and "not verified" in stats.description
        for r, p in zip(rows, prompts):
            if r.opens_prompt:
                rec = client.stream(p.system, p.user, p.output_tokens)
                assert rec.prompt_tokens == r.input_length == p.counted_tokens
