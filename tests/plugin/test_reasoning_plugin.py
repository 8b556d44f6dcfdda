"""A reasoning model end to end (pytester, the scripted fake server on virtual time): the
reasoning / answer split in the JSON (rows and the measurement part), JUnit and the table."""
import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script

THINK = """
target: {url: http://fake:8000}
workloads:
  think:
    class: custom
    prompt_tokens: 64
    output_tokens: 16
    samples: 10
    warmup: 1
    slo: {ttft_p50: 500ms, tpot_p50: 50ms}
"""


def run(pytester, script, *args):
    pytester.makefile(".slo.yaml", think=THINK)
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-confidence=null",
                              "--llm-latency-api=openai-chat", "--llm-latency-json=out.json", "--junitxml=out.xml",
                              *args, plugins=[FakeServerPlugin(script)])


@pytest.mark.parametrize("usage_reasoning, source", [(True, "server"), (False, "stream")])
def test_reasoning_tokens_in_json_junit_and_table(pytester, usage_reasoning, source):
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    r = run(pytester, Script(ttft_ms=100, tpot_ms=20, reasoning=12, usage_reasoning=usage_reasoning))
    r.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "out.json").read_text())
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    jsonschema.validate(doc, schema)
    (res,) = doc["results"]
    how = res["measurement"]
    assert (how["reasoning_tokens"], how["answer_tokens"], how["reasoning_requests"]) == (120, 40, 10)
    assert how["reasoning_share"] == 0.75 and how["reasoning_source"] == source
    assert {(q["reasoning_tokens"], q["answer_tokens"]) for q in res["requests"]} == {(12, 4)}
    # TPOT over every decoded token: 15 gaps of 20 ms (not the answer's 3)
    assert res["tpot_ms"]["p50"] == pytest.approx(20.0)
    assert res["ttfo_ms"]["p50"] == pytest.approx(100 + 12 * 20)
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "out.xml").getroot().iter("property")}
    assert props["llm.measurement.reasoning_tokens"] == "120" and props["llm.measurement.reasoning_source"] == source
    r.stdout.fnmatch_lines(["*TPOT p95*reasoning*verdict*", "*think.slo.yaml::think*75%*PASS*"])


def test_a_model_that_does_not_reason_has_no_reasoning_column(pytester):
    r = run(pytester, Script(ttft_ms=100, tpot_ms=20))
    r.assert_outcomes(passed=1)
    (res,) = json.loads((pytester.path / "out.json").read_text())["results"]
    assert not any(k.startswith("reasoning") for k in res["measurement"])
    header = next(ln for ln in r.stdout.lines if ln.startswith("test "))
    assert "TPOT p95" in header and "reasoning" not in header
