"""Salts depend on a per-run nonce (the seed fixes only the bodies), and prompt
preparation costs a bounded number of token-counter calls."""
import math

import pytest

from pytest_llm_latency.core.prompts.synthesis import SALT_WORDS, build_prompts, salts


def words(text: str) -> int:
    return len(text.split()) + 1  # a BOS-counting whitespace tokenizer


class Counting:
    """A token counter that counts its calls (each is one /tokenize request on a server)."""

    def __init__(self, fn=words):
        self.fn, self.calls = fn, 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return self.fn(text)


def body(p) -> str:
    return p.text.split(": ", 1)[1]


def test_a_new_nonce_changes_every_salt_but_no_body():
    a = build_prompts(words, n=6, prompt_tokens=300, seed=3, nonce="run-one")
    b = build_prompts(words, n=6, prompt_tokens=300, seed=3, nonce="run-two")
    assert {p.text[:60] for p in a}.isdisjoint({p.text[:60] for p in b})  # no prefix shared across runs
    assert [body(p) for p in a] == [body(p) for p in b]  # --llm-latency-seed keeps the bodies
    assert all(words(p.text) == 300 for p in a + b)


def test_the_same_seed_and_nonce_replay_identical_prompts():
    a = build_prompts(words, n=5, prompt_tokens=200, seed=9, nonce="0123abcd", system_prompt_tokens=80)
    b = build_prompts(words, n=5, prompt_tokens=200, seed=9, nonce="0123abcd", system_prompt_tokens=80)
    assert a == b
    assert len({p.system[:60] for p in a}) == 5  # unique per request within the run


def test_salts_have_one_length_in_characters_and_words():
    s = salts(0, "abc", 50)
    assert len(set(s)) == 50
    assert len({len(x) for x in s}) == 1 and {len(x.split()) for x in s} == {SALT_WORDS}


@pytest.mark.parametrize("prompt_tokens", [64, 512, 3000])
@pytest.mark.parametrize("parts", [{}, {"system_prompt_tokens": 48}, {"shared_prefix_tokens": 32}])
def test_counter_calls_are_one_fit_plus_one_verify_per_prompt(prompt_tokens, parts):
    n = 22  # 2 warm-up + 20 samples: the old code made ~10 calls per prompt (220 here)
    count = Counting()
    prompts = build_prompts(count, n=n, prompt_tokens=prompt_tokens, seed=1, nonce="x", **parts)
    # stated bound: n - 1 verify calls + one fit per part, each a binary search over at most
    # 2 * tokens + 16 words (log2 + 2 calls), plus the tool-schema doubling
    fit = 2 * math.ceil(math.log2(2 * prompt_tokens + 16)) + 8
    assert count.calls <= n + fit, count.calls
    assert all(words(p.text) == prompt_tokens for p in prompts)


def test_a_salt_that_tokenizes_differently_is_refitted_alone():
    def odd(text: str) -> int:  # "have" costs two tokens: salts containing it are longer
        return words(text) + text.split(": ", 1)[0].split().count("have")

    count = Counting(odd)
    prompts = build_prompts(count, n=30, prompt_tokens=400, seed=2, nonce="n")
    assert all(odd(p.text) == 400 for p in prompts)  # still exact
    refits = sum(1 for s in salts(2, "n", 30)[1:] if "have" in s.rstrip(": ").split())
    assert 0 < refits < 30 and count.calls <= 30 + (refits + 1) * 30


def test_measure_sends_a_bounded_number_of_tokenize_requests():
    """The issue's case: 2 warm-up + 20 samples cost 245 /tokenize calls on vLLM before."""
    import httpx

    from tests.helpers.fakeserver import Script, VirtualTime, make_transport
    from pytest_llm_latency.client.transport.http import make_http_client
    from pytest_llm_latency.client.apis.openai import OpenAIClient
    from pytest_llm_latency.client.runner import measure
    from pytest_llm_latency.core.checks import judge
    from pytest_llm_latency.core.spec.workload import make_workload

    script, vt = Script(ttft_ms=50, tpot_ms=5), VirtualTime()
    inner, paths = make_transport(script, vt), []

    def handler(request):
        paths.append(request.url.path)
        return inner.handle_request(request)

    c = OpenAIClient(make_http_client(transport=httpx.MockTransport(handler)), "http://fake", "fake-model",
                     clock=vt, sleep=lambda s: None)
    w = make_workload("w", {"class": "custom", "prompt_tokens": 512, "output_tokens": 4, "samples": 20, "warmup": 2})
    res = judge(measure(c, w, nonce="n"))
    assert res.verdict == "pass" and all(r.prompt_tokens == 512 for r in res.records)
    # 2 endpoint-detection calls + 1 calibration + the fit (<= 2 log2(1040) + 8 = 30) + 21 verifies
    assert paths.count("/tokenize") <= 2 + 1 + 30 + 21, paths.count("/tokenize")
