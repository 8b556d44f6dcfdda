"""Reasoning as a budget, end to end (issue 36; pytester against the embedded reference target): the workload's
``reasoning`` key is sent as the API's field, and a reasoning regression (the model thinking 24 tokens instead
of 8) fails ``ttfo_p95`` and ``reasoning_tokens_p95``, each failure naming the measured value and the budget.

Parametrized by API: each entry is the API, the workload's reasoning key, what the request body gets and the
reference target's knob that makes it think N tokens (``{n}``): Ollama chat, chat completions, Responses and
Messages.
"""
import json

import pytest

REF = "reference://h100-sxm/llama-3.1-8b"

APIS = [
    # ignore_eos: every answer runs to output_tokens (the server's switch: Ollama and Messages cannot ask for it),
    # so no response stops while it thinks (it would have no TTFO)
    pytest.param("ollama-chat", "reasoning: {effort: high}", {"think": "high"}, "thinking_tokens={n}&ignore_eos=1",
                 id="ollama-chat"),
    # medium effort: the reference thinks thinking_tokens (low half, high twice)
    pytest.param("openai-chat", "reasoning: {effort: medium}", {"reasoning_effort": "medium"},
                 "thinking_tokens={n}&ignore_eos=1", id="openai-chat"),
    pytest.param("openai-responses", "reasoning: {effort: medium}", {"reasoning": {"effort": "medium"}},
                 "thinking_tokens={n}&ignore_eos=1", id="openai-responses"),
    pytest.param("anthropic-messages", "thinking: {budget_tokens: 28}",
                 {"thinking": {"type": "enabled", "budget_tokens": 28}}, "thinking_tokens={n}&ignore_eos=1",
                 id="anthropic-messages"),
]

SLO = """
workloads:
  think:
    class: custom
    prompt_tokens: 256
    output_tokens: 32     # 8 or 24 of them reasoning
    samples: 20           # a p95 needs >= 20 values
    warmup: 1
    confidence: null
    {key}
    slo: {{ttfo_p95: 120ms, reasoning_tokens_p95: 12}}
"""


def run(pytester, api, key, knob, n):
    pytester.makefile(".slo.yaml", think=SLO.format(key=key))
    url = f"{REF}?time_scale=1&tokenize_endpoint=0&{knob.format(n=n)}"
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={url}", f"--llm-latency-api={api}",
                           "--llm-latency-json=r.json")
    (res,) = json.loads((pytester.path / "r.json").read_text())["results"]
    return r, res


@pytest.mark.parametrize("api, key, sent, knob", APIS)
def test_a_reasoning_regression_fails_ttfo_and_reasoning_tokens(pytester, api, key, sent, knob):
    r, res = run(pytester, api, key, knob, 8)
    r.assert_outcomes(passed=1)
    assert res["measurement"]["request_fields"] == sent
    assert res["reasoning_tokens"]["p95"] == 8 and res["budgets"]["reasoning_tokens_p95"] == 12
    good_ttfo = res["ttfo_ms"]["p95"]
    assert good_ttfo < 120

    r, res = run(pytester, api, key, knob, 24)
    r.assert_outcomes(failed=1)
    assert res["reasoning_tokens"]["p95"] == 24 and res["ttfo_ms"]["p95"] > 120
    r.stdout.fnmatch_lines([f"*TTFO p95 {res['ttfo_ms']['p95']:.1f} ms > budget 120 ms*",
                            "*reasoning tokens p95 24.0 tokens > budget 12 tokens*"])
    print(f"{api}: TTFO p95 {good_ttfo:.1f} ms thinking 8, {res['ttfo_ms']['p95']:.1f} ms thinking 24")


def test_a_reasoning_key_the_api_cannot_take_is_an_error_before_any_request(pytester):
    pytester.makefile(".slo.yaml", think=SLO.format(key="thinking: {budget_tokens: 16}"))
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={REF}?time_scale=0",
                           "--llm-latency-api=ollama-chat", "--llm-latency-json=r.json")
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines(["*configuration error: *think.slo.yaml::think workload 'think' thinking: the ollama-chat "
                            "API has no thinking budget*use reasoning: {effort: low|medium|high} (sent as think)*"
                            "or drop the key*"])
    assert json.loads((pytester.path / "r.json").read_text())["results"] == []  # nothing was measured


def test_measure_takes_the_same_keys(pytester):
    pytester.makepyfile("""
        def test_think(llm_latency):
            # the reference model may stop at its natural EOS (max_error_rate): what it thought still counts
            res = llm_latency.measure(prompt_tokens=64, output_tokens=32, samples=10, warmup=0, confidence=None,
                                      max_error_rate=0.9, reasoning={"effort": "low"}, reasoning_tokens_max=4)
            assert res.reasoning_tokens.max == 8
    """)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={REF}?time_scale=0&thinking_tokens=8",
                           "--llm-latency-api=ollama-chat", "--llm-latency-json=r.json")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*reasoning tokens max 8.0 tokens > budget 4 tokens (n=10*"])
    (res,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert res["measurement"]["request_fields"] == {"think": "low"}
