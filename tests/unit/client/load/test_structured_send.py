"""Issue 36: a structured request through the send path (``client.load.send_one.sender``): the schema's
fields on the constrained requests only, every constrained answer validated (valid; not JSON; a
schema violation with its path), the outcome keeping its role; and the twins set apart afterwards
(``client.drivers.structured_run``) with the overhead from injected records."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.drivers.structured_run import record_structured, sent_workload, split_twins
from pytest_llm_latency.client.load.schema_check import answer_text, schema_problem
from pytest_llm_latency.client.load.send_one import sender
from pytest_llm_latency.core.checks.judge import judge
from pytest_llm_latency.core.measure.record import RecordBuilder
from pytest_llm_latency.core.measure.structured import COMPARISON, CONSTRAINED, SCHEMA_VIOLATION, SchemaAsk
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.result.result import Failure, measured
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import MS

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"]}


class FakeClient:
    """Answers every request with ``pieces`` (one token each, 10 ms apart); remembers the extras sent."""
    api_name = "openai-chat"

    def __init__(self, pieces: list[str], tpot_ms: float = 10.0):
        self.pieces, self.tpot_ms, self.extras = pieces, tpot_ms, []

    def stream(self, system, user, max_tokens, *, expected_prompt_tokens=None, extra=None):
        self.extras.append(extra)
        t = [0]
        b = RecordBuilder(lambda: t[0], expected_output_tokens=max_tokens)
        for i, piece in enumerate(self.pieces):
            t[0] = int((50 + i * self.tpot_ms) * MS)
            b.token_chunk(t[0], text_len=len(piece), text=piece)
        b.usage(8, len(self.pieces))
        return b.finish(t[0])


def prompt(role: str | None) -> Prompt:
    return Prompt("", "salt body", 8, 8, structured=None if role is None else SchemaAsk("person", SCHEMA, role))


def test_a_valid_constrained_answer_is_a_record_with_its_role_and_not_short():
    client = FakeClient(['{"name": ', '"Ada", ', '"age": 36}'])
    rec = sender(client, 64, {"seed": 1})(prompt(CONSTRAINED))
    assert not isinstance(rec, Failure) and rec.structured == CONSTRAINED
    assert client.extras[0]["response_format"]["json_schema"] == {"name": "person", "schema": SCHEMA}
    assert client.extras[0]["seed"] == 1 and client.extras[0]["ignore_eos"] is False
    assert not rec.short_output  # 3 of the forced 64 tokens: the grammar ended, not a short output
    assert answer_text(rec) == '{"name": "Ada", "age": 36}'


def test_the_unconstrained_twin_carries_no_schema_and_is_not_validated():
    client = FakeClient(["free", " text"])
    rec = sender(client, 2, {"seed": 1})(prompt(COMPARISON))
    assert not isinstance(rec, Failure) and rec.structured == COMPARISON
    assert client.extras == [{"seed": 1}]


def test_a_plain_prompt_is_sent_as_before():
    client = FakeClient(["free"])
    rec = sender(client, 1, None)(prompt(None))
    assert not isinstance(rec, Failure) and rec.structured is None and client.extras == [None]


@pytest.mark.parametrize("pieces, words", [
    (['{"name": "Ada"'], ["schema_violation", "not JSON", "character 14"]),
    ([" "], ["not JSON (an empty answer)"]),
    (['{"name": "Ada", "age": -1}'], ["does not match the schema at $.age", "-1 is less than the minimum of 0"]),
    (['{"age": 3}'], ["at $:", "'name' is a required property"]),
])
def test_an_invalid_answer_is_a_schema_violation_failure_keeping_its_timing(pieces, words):
    out = sender(FakeClient(pieces), 64, None)(prompt(CONSTRAINED))
    assert isinstance(out, Failure) and out.kind == SCHEMA_VIOLATION and out.structured == CONSTRAINED
    text = f"{out.kind}: {out.message}"
    assert all(w in text for w in words), text
    assert out.ttft_ms == 50.0  # what was measured stays (the failure list, the timeline)


def test_schema_problem_quotes_a_nested_path_shortly():
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    problem = schema_problem('{"items": [1, "two"]}', schema)
    assert problem is not None and "$.items[1]" in problem and "'two' is not of type 'integer'" in problem
    assert len(schema_problem('"' + "x" * 5000 + '"', {"type": "object"}) or "") < 400
    assert schema_problem('{"items": [1, 2]}', schema) is None


def test_the_validator_follows_the_schemas_dialect():
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "maximum": 5,
              "exclusiveMaximum": True}  # draft 4's boolean form
    assert schema_problem("5", draft4) is not None and schema_problem("4", draft4) is None


def _rec(role: str, tpot_ms: float, tokens: int = 5):
    client = FakeClient(['{"name": "a", "age": 1}'] + [" "] * (tokens - 1), tpot_ms)
    r = client.stream("", "", 64 if role == CONSTRAINED else tokens)
    r.structured = role
    return r


def workload(overhead=0.2):
    slo = {"structured_tpot_overhead_max": overhead} if overhead is not None else {}
    return make_workload("w", {"prompt_tokens": 8, "output_tokens": 64, "samples": 4, "warmup": 0,
                               "structured": {"json_schema": "p.schema.json"}, "slo": slo})


def measured_with(w, constrained, twins, failures=()):
    outcomes, set_apart = split_twins([*constrained, *twins, *failures])
    records = [o for o in outcomes if not isinstance(o, Failure)]
    res = measured(w, records, [o for o in outcomes if isinstance(o, Failure)])
    record_structured(res, set_apart)
    return judge(res)


def test_twins_double_the_samples_sent_and_are_set_apart():
    assert sent_workload(workload()).samples == 8 and sent_workload(workload(None)).samples == 4
    res = measured_with(workload(), [_rec(CONSTRAINED, 11.0) for _ in range(4)], [_rec(COMPARISON, 10.0)] * 4)
    assert res.n == 4 and res.structured.comparison_requests == 4
    assert res.structured.tpot_ms_p50 == 11.0 and res.structured.comparison_tpot_ms_p50 == 10.0
    assert res.structured.tpot_overhead == pytest.approx(0.1)
    assert res.verdict == "pass", res.errors + res.failed_checks
    assert res.short_outputs == 0  # 5 of 64 tokens, constrained: reported, not short
    assert any("constrained decoding stops at the schema's end" in n and "5..5 tokens" in n for n in res.shown_notes)
    assert res.structured.to_json()["tpot_overhead_max"] == 0.2


def test_the_overhead_budget_fails_with_both_numbers():
    res = measured_with(workload(), [_rec(CONSTRAINED, 13.0) for _ in range(4)], [_rec(COMPARISON, 10.0)] * 4)
    assert res.verdict == "fail"
    text = " ".join(res.failed_checks)
    assert "structured TPOT overhead 30.0% > structured_tpot_overhead_max 20.0%" in text
    assert "constrained TPOT p50 13.00 ms vs unconstrained 10.00 ms, 4 and 4 requests" in text


def test_no_twin_tpot_is_an_error_never_a_pass():
    res = measured_with(workload(), [_rec(CONSTRAINED, 13.0) for _ in range(4)],
                        [Failure("http_500", "boom", structured=COMPARISON)])
    assert res.verdict == "error" and "structured_tpot_overhead_max: cannot be judged" in " ".join(res.errors)
    assert "1 unconstrained requests failed" in " ".join(res.errors)
    assert res.failed_requests == 0  # a twin's failure is not the workload's


def test_schema_violations_count_against_max_error_rate_with_the_hint():
    bad = Failure(SCHEMA_VIOLATION, "the answer is not JSON", ttft_ms=50.0, structured=CONSTRAINED)
    res = measured_with(workload(None), [_rec(CONSTRAINED, 10.0) for _ in range(3)], [], [bad])
    assert res.structured.schema_violations == 1 and res.failed_requests == 1
    assert res.verdict == "error"  # like a short output: the run did not do what was asked
    text = " ".join(res.errors)
    assert "1 of 4 requests failed (schema_violation x1)" in text and "llama.cpp's /v1/messages drops it" in text
