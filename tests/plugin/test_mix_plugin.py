"""Mixed traffic end to end (issue 37; pytester, the embedded reference target): one test item per mix, each
class judged on its own budgets, its verdict line in the terminal, the JSON, JUnit and the HTML report; the marker
and the fixture take a mix too; bad mixes are errors before any request."""
import json
import xml.etree.ElementTree as ET

import pytest

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05&ignore_eos=1"
SLO = """
target: {url: '%s'}
workloads:
  shared:
    mix:
      chat: {weight: 0.8, prompt_tokens: 256, output_tokens: 8}
      summarize: {weight: 0.2, prompt_tokens: 16000, output_tokens: 8}
    rate: 20
    requests: 20
    warmup: 1
    slo:
      chat: {ttft_p50: 1s, tpot_p95: null, ttft_p95: null}
      summarize: {ttft_p50: %s}
"""


def run(pytester, summarize_budget="10s", *args):
    pytester.makefile(".slo.yaml", mix=SLO % (REF, summarize_budget))
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-json=r.json", "--junitxml=out.xml",
                              "--llm-latency-html=r.html", *args)


def result(pytester):
    return json.loads((pytester.path / "r.json").read_text())["results"][0]


def props(pytester):
    root = ET.parse(pytester.path / "out.xml").getroot()
    return {p.get("name"): p.get("value") for p in root.iter("property")}


def test_a_mix_passes_when_every_class_meets_its_own_budgets(pytester):
    r = run(pytester)
    r.assert_outcomes(passed=1)
    res = result(pytester)
    classes = {c["name"]: c for c in res["mix"]["classes"]}
    assert (classes["chat"]["requests"], classes["summarize"]["requests"]) == (16, 4)
    # summarize's TTFT is far above chat's: one budget for both would have judged them together
    assert classes["summarize"]["stats"]["ttft_p50_ms"] > 3 * classes["chat"]["stats"]["ttft_p50_ms"]
    text = r.stdout.str()
    assert "  [chat]" in text and "  [summarize]" in text


def test_a_class_over_its_budget_fails_the_item_named_by_its_class(pytester):
    r = run(pytester, "1ms")
    r.assert_outcomes(failed=1)
    text = r.stdout.str()
    assert "summarize: TTFT p50 " in text and "> budget 1 ms" in text
    assert "chat: TTFT" not in text  # chat met its own budget
    res = result(pytester)
    assert [(c["name"], c["status"]) for c in res["mix"]["classes"]] == [("chat", "pass"), ("summarize", "fail")]
    p = props(pytester)
    assert (p["llm.mix.chat.status"], p["llm.mix.summarize.status"]) == ("pass", "fail")
    assert p["llm.mix.summarize.budget.ttft_p50"] == "fail" and float(p["llm.mix.summarize.ttft_p50_ms"]) > 1
    html = (pytester.path / "r.html").read_text()
    assert "[summarize]" in html and "[chat]" in html


def test_the_marker_and_the_fixture_take_a_mix(pytester):
    pytester.makepyfile("""
import pytest

MIX = {"a": {"weight": 0.5, "prompt_tokens": 64, "output_tokens": 4},
        "b": {"weight": 0.5, "prompt_tokens": 2000, "output_tokens": 4}}
SLO = {"a": {"ttft_max": "10s"}, "b": {"ttft_max": "10s"}}

@pytest.mark.llm_slo(mix=MIX, slo=SLO, rate=20, requests=6, warmup=0)
def test_marked():
    pass

def test_fixture(llm_latency):
    r = llm_latency.measure(mix=MIX, slo=SLO, rate=20, requests=6, warmup=0)
    assert sorted(c["name"] for c in r.result.mix.classes) == ["a", "b"]
    assert {rec.mix_class for rec in r.result.records} == {"a", "b"}
""")
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={REF}")
    r.assert_outcomes(passed=2)


@pytest.mark.parametrize("mix, slo, match", [
    ("{a: {weight: 0.5, prompt_tokens: 8, output_tokens: 2}, b: {weight: 0.4, prompt_tokens: 8, output_tokens: 2}}",
     "{a: {ttft_p50: 1s}, b: {ttft_p50: 1s}}", "the class weights must sum to 1, got 0.5 + 0.4 = 0.9"),
    ("{a: {weight: 1.5, prompt_tokens: 8, output_tokens: 2}, b: {weight: -0.5, prompt_tokens: 8, output_tokens: 2}}",
     "{a: {ttft_p50: 1s}, b: {ttft_p50: 1s}}", "mix.b.weight: expected the class's share of the requests"),
    ("{a: {weight: 0.5, prompt_tokens: 8, output_tokens: 2}, b: {weight: 0.5, prompt_tokens: 8, output_tokens: 2}}",
     "{a: {ttft_p50: 1s}}", "class 'b' of the mix has no budgets"),
])
def test_bad_mixes_are_errors_before_any_request(pytester, mix, slo, match):
    pytester.makefile(".slo.yaml", bad=f"target: {{url: 'http://127.0.0.1:9'}}\nworkloads:\n  w:\n    mix: {mix}\n"
                                       f"    requests: 10\n    rate: 5\n    slo: {slo}\n")
    r = pytester.runpytest("-p", "no:cacheprovider")
    assert r.ret != 0
    text = r.stdout.str() + r.stderr.str()
    assert match in text and "bad.slo.yaml" in text
    assert "connect" not in text.lower()  # refused while collecting: nothing was sent to the (closed) port
