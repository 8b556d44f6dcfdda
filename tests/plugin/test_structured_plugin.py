"""Structured output end to end (issue 36; pytester): a ``structured:`` workload against the scripted
fake server on virtual time (answers JSON when the request carries ``response_format``, slower per
token then), the overhead budget judged from the interleaved twins, config errors before any request;
and the same against the embedded reference target on chat, Responses and Messages (``constrained_slowdown``,
fault ``schema_violation``)."""
import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
ANSWER = ['{"name"', ': "Ada"', ', "age"', ": 36", "}"]  # 5 tokens of the forced 16

SLO = """
workloads:
  person:
    class: custom
    prompt_tokens: 32
    output_tokens: 16
    samples: 6
    warmup: 1
    structured: {json_schema: schemas/person.json}
    %s
"""


def answer(bad: bool = False):
    """The pieces of an answer: JSON for a request carrying the schema (with ``bad``: every second one has a
    number for a name), free text otherwise."""
    constrained = [0]

    def pieces(body: dict) -> list[str]:
        if "response_format" not in body:
            return [" tok"] * int(body.get("max_tokens", 16))
        constrained[0] += 1
        return ['{"name": 3,', ' "age": 36}'] + [" "] * 3 if bad and constrained[0] % 2 == 0 else ANSWER
    return pieces


def run(pytester, script, slo="", schema=PERSON, *args):
    pytester.makefile(".slo.yaml", p=SLO % slo)
    if schema is not None:
        (pytester.path / "schemas").mkdir(exist_ok=True)
        text = schema if isinstance(schema, str) else json.dumps(schema)
        (pytester.path / "schemas" / "person.json").write_text(text)
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-api=openai-chat", "--llm-latency-json=r.json",
                              "--llm-latency-url=http://fake:1", "--junitxml=out.xml", *args,
                              plugins=[FakeServerPlugin(script)])


def result(pytester):
    return json.loads((pytester.path / "r.json").read_text())["results"][0]


def test_valid_answers_pass_and_their_lengths_are_reported_not_short(pytester):
    script = Script(ttft_ms=50, tpot_ms=10, answer=answer())
    r = run(pytester, script)
    r.assert_outcomes(passed=1)
    res = result(pytester)
    assert res["short_outputs"] == 0 and res["failed_requests"] == 0 and res["n"] == 6
    assert res["structured"]["schema_violations"] == 0 and res["structured"]["output_tokens_p50"] == 5
    assert res["structured"]["schema"].endswith("schemas/person.json")  # resolved against the SLO file's folder
    assert "tpot_overhead" not in res["structured"]  # not asked: no twins sent
    probe, *sent = script.requests  # the model probe (1 token), then the warm-up and the samples
    assert "response_format" not in probe and len(sent) == 7 and all("response_format" in b for b in sent)
    assert sent[0]["response_format"]["json_schema"] == {"name": "person", "schema": PERSON}
    assert any("constrained decoding stops at the schema's end" in n for n in res["notes"])
    r.stdout.fnmatch_lines(["structured output*", "*p.slo.yaml::person: 0 schema violations; answers 5..5 tokens*"])


@pytest.mark.parametrize("budget, outcome", [(0.3, "passed"), (0.1, "failed")])
def test_the_overhead_budget_from_interleaved_twins(pytester, budget, outcome):
    script = Script(ttft_ms=50, tpot_ms=10, constrained_tpot_ms=12, answer=answer())
    r = run(pytester, script, f"slo: {{structured_tpot_overhead_max: {budget}}}")
    r.assert_outcomes(**{outcome: 1})
    res = result(pytester)
    s = res["structured"]
    assert s["tpot_overhead"] == pytest.approx(0.2) and s["tpot_overhead_max"] == budget
    assert s["tpot_ms_p50"] == 12.0 and s["comparison_tpot_ms_p50"] == 10.0 and s["comparison_requests"] == 6
    assert res["n"] == 6  # the twins are not the workload's samples
    sent = [("response_format" in b) for b in script.requests[2:]]  # after probe and warm-up: pairs, alternating
    assert sent == [True, False, False, True, True, False, False, True, True, False, False, True]
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "out.xml").iter("property")}
    assert float(props["llm.structured.tpot_overhead"]) == pytest.approx(0.2)
    if outcome == "failed":
        r.stdout.fnmatch_lines(["*structured TPOT overhead 20.0% > structured_tpot_overhead_max 10.0% (constrained "
                                "TPOT p50 12.00 ms vs unconstrained 10.00 ms, 6 and 6 requests)*"])


def test_answers_violating_the_schema_are_failed_requests(pytester):
    r = run(pytester, Script(ttft_ms=50, tpot_ms=10, answer=answer(bad=True)))
    r.assert_outcomes(errors=1)  # like short outputs: over max_error_rate, the run did not do what was asked
    res = result(pytester)
    assert res["failures"] == {"schema_violation": 3} and res["structured"]["schema_violations"] == 3
    r.stdout.fnmatch_lines(["*3 of 6 requests failed (schema_violation x3): the answer does not match the schema at "
                            "$.name: 3 is not of type 'string'*llama.cpp's /v1/messages drops it*"])


@pytest.mark.parametrize("schema, words", [
    (None, ["workloads.person.structured.json_schema", "not found", "schemas/person.json",
            "names a JSON Schema file"]),
    ("{not json", ["workloads.person.structured.json_schema", "is not JSON", "names a JSON Schema file"]),
    ({"type": "objekt"}, ["is not a JSON Schema: at $.type:", "'objekt' is not valid", "names a JSON Schema file"]),
    ("[1, 2]", ["is not a JSON Schema: expected a JSON object, got list"]),
])
def test_a_bad_schema_file_is_a_config_error_before_any_request(pytester, schema, words):
    script = Script(answer=answer())
    r = run(pytester, script, "", schema)
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert "configuration error" in out and all(w in out for w in words), out
    assert script.requests == []


def test_a_marker_resolves_the_schema_against_the_test_files_folder(pytester):
    (pytester.path / "person.json").write_text(json.dumps(PERSON))
    pytester.makepyfile(test_m="""
        import pytest

        @pytest.mark.llm_slo("w", **{"class": "custom"}, prompt_tokens=32, output_tokens=16, samples=4, warmup=0,
                             structured={"json_schema": "person.json"}, structured_tpot_overhead_max=0.5)
        def test_w():
            pass
    """)
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-api=openai-chat", "--llm-latency-url=http://f:1",
                           "--llm-latency-json=r.json", plugins=[FakeServerPlugin(Script(answer=answer()))])
    r.assert_outcomes(passed=1)
    assert result(pytester)["structured"]["tpot_overhead"] == pytest.approx(0.0)


# -- the embedded reference target: constrained decoding as slow as configured, answers valid or violated ----------

APIS = ["openai-chat", "openai-responses", "anthropic-messages"]
REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.2&jitter=0&constrained_slowdown={slowdown}{fault}"


def run_reference(pytester, slowdown, fault="", budget=0.2, api="openai-chat"):
    pytester.makefile(".slo.yaml", p=SLO % f"slo: {{structured_tpot_overhead_max: {budget}}}")
    (pytester.path / "schemas").mkdir(exist_ok=True)
    (pytester.path / "schemas" / "person.json").write_text(json.dumps(PERSON))
    return pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-api={api}", "--llm-latency-json=r.json",
                              f"--llm-latency-url={REF.format(slowdown=slowdown, fault=fault)}")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("slowdown, outcome", [(1.0, "passed"), (2.0, "failed")])
def test_reference_constrained_slowdown_against_the_overhead_budget(pytester, slowdown, outcome, api):
    r = run_reference(pytester, slowdown, api=api)
    r.assert_outcomes(**{outcome: 1})
    s = result(pytester)["structured"]
    assert s["schema_violations"] == 0
    assert (s["tpot_overhead"] <= 0.2) == (outcome == "passed")


@pytest.mark.parametrize("api", APIS)
def test_reference_fault_schema_violation_fails_requests(pytester, api):
    r = run_reference(pytester, 1.0, "&fault=schema_violation", budget=10, api=api)
    r.assert_outcomes(errors=1)
    assert "schema_violation" in result(pytester)["failures"]
