"""Reasoning budgets, structured output and constrained decoding on the reference target: answer.py
(pure), constrained_slowdown in the engine, the scheduler's timeline and the served metrics, and the
config / fault validation (no sleeps, no wall-clock thresholds: the timings are the scheduler's deadlines)."""
from __future__ import annotations

import asyncio
import json

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.targets.reference import physics as ph
from pytest_llm_latency.targets.reference.answer import (Answer, instance, reasoning_budget, spread,
                                                         structured_text)
from pytest_llm_latency.targets.reference.config import ReferenceConfig
from pytest_llm_latency.targets.reference.engine import Engine, EngineRequest
from pytest_llm_latency.targets.reference.faults import parse_fault
from pytest_llm_latency.targets.reference.scheduler import Scheduler
from tests.reference.refclient import words

P = ph.Physics.from_specs(catalog.hardware("h100-sxm"), catalog.model("llama-3.1-8b"))
SCHEMAS = [
    {"type": "object", "required": ["name", "age"],
     "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 18},
                    "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 2},
                    "ok": {"type": "boolean"}, "none": {"type": "null"}, "kind": {"const": "k"}}},
    {"type": "object"},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "string", "maxLength": 3},
    {"$defs": {"P": {"type": "object", "required": ["x"], "properties": {"x": {"type": "string", "format": "date"}}}},
     "type": "object", "required": ["p", "q"],
     "properties": {"p": {"$ref": "#/$defs/P"}, "q": {"anyOf": [{"type": "null"}, {"type": "string"}]},
                    "r": {"allOf": [{"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}]}}},
]


# -- answer.py -------------------------------------------------------------------------------
def test_reasoning_budget_by_effort():
    efforts = ("none", "minimal", "low", "medium", None, "high")
    assert [reasoning_budget(10, e) for e in efforts] == [0, 2, 5, 10, 10, 20]
    with pytest.raises(ValueError, match="effort"):
        reasoning_budget(10, "extreme")


def test_spread_cuts_equal_runs_that_join_to_the_text():
    text = "abcdefghij"
    assert [spread(text, 4, k, k) for k in range(1, 5)] == ["ab", "cde", "fgh", "ij"]   # round(10 k / 4), half to even
    assert spread(text, 4, 2, 3) == "cdefgh" and spread(text, 4, 1, 4) == text


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("tokens", [1, 7, 50])
def test_structured_text_is_valid_and_fills_the_tokens(schema, tokens):
    text = structured_text(schema, tokens)
    jsonschema.validate(json.loads(text), schema)
    jsonschema.validate(instance(schema), schema)
    if schema.get("maxLength") is None:
        assert len(text) >= 4 * tokens                         # CHARS_PER_TOKEN characters per answer token
    bad = structured_text(schema, tokens, violate=True)
    with pytest.raises((jsonschema.ValidationError, ValueError)):
        jsonschema.validate(json.loads(bad), schema)


def test_answer_splits_reasoning_then_the_document():
    a = Answer(12, reasoning=4, schema=SCHEMAS[0])
    assert (a.reasoning, a.answer_tokens, a.kind) == (4, 8, "json")
    chunks = [a.split(" a b c", 0, 3), a.split(" d e f", 3, 6), a.split(" g h i j k l", 6, 12)]
    assert [r for r, _ in chunks] == [" a b c", " d", ""]
    assert chunks[0][1] == "" and "".join(x for _, x in chunks) == a.document
    assert a.reasoning_count(3) == 3 and a.reasoning_count(12) == 4
    tool = Answer(5, reasoning=2, tool="f")                  # answer token 1: the name; 2..3: the arguments
    assert tool.split(" a b c", 0, 3) == (" a b", "")
    assert tool.split(" d e", 3, 5)[1] == tool.document and json.loads(tool.document)
    assert Answer(3, reasoning=9).split(" a b c", 0, 3) == (" a b c", "")   # cut inside the reasoning
    text = Answer(4, reasoning=1)
    assert text.split(" a b", 0, 2) == (" a", " b") and text.split(" c d", 2, 4) == ("", " c d")


# -- constrained_slowdown: engine, scheduler timeline, served metrics --------------------------------
def _decode_steps(slowdowns):
    e = Engine(P, kv_pool_tokens=100_000)
    for rid, s in enumerate(slowdowns, start=1):
        e.add(EngineRequest(rid=rid, prompt_len=100, max_tokens=6, target_tokens=6, slowdown=s))
    steps = []
    while e.has_work():
        steps.append(e.step())
    return steps


def test_a_constrained_decode_step_takes_slowdown_times_its_roofline():
    plain, slow = _decode_steps([1.0]), _decode_steps([3.0])
    assert slow[0].seconds == pytest.approx(plain[0].seconds)   # the prefill step: no grammar mask
    for a, b in zip(plain[1:], slow[1:]):
        assert b.cost == a.cost and b.seconds == pytest.approx(3.0 * a.seconds)
    mixed = _decode_steps([1.0, 2.5])                           # the batch shares the slowed step
    assert mixed[1].slowdown == 2.5 and mixed[1].seconds == pytest.approx(2.5 * mixed[1].cost.seconds)


def _served_decode_s(slowdown: float) -> tuple[float, float]:
    """(prefill_s, decode_s) of one request through the real Scheduler: its own deadlines."""
    async def run():
        sched = Scheduler(Engine(P, kv_pool_tokens=100_000), time_scale=1e-3)
        sched.start()
        try:
            st = sched.submit(prompt_len=200, max_tokens=20, target_tokens=20, finish_reason="length",
                              slowdown=slowdown)
            while not (await asyncio.wait_for(st.next(), 10)).finished:
                pass
            return st.prefill_s, st.decode_s
        finally:
            await sched.stop()

    return asyncio.run(run())


def test_constrained_slowdown_shows_in_the_scheduler_timeline():
    # deadlines are absolute monotonic seconds (~1e3-1e6): differences of them carry ~1e-12 s of rounding on
    # spans of ~1e-4 s, so "exactly" is a relative 1e-6
    (p1, d1), (p2, d2) = _served_decode_s(1.0), _served_decode_s(2.0)
    assert p2 == pytest.approx(p1, rel=1e-6)
    assert d2 / d1 == pytest.approx(2.0, rel=1e-6)
    assert d1 == pytest.approx(sum(P.decode_step_seconds([200 + k]) for k in range(19)) * 1e-3, rel=1e-6)


def _decode_sum(http, url) -> tuple[float, float]:
    fams = text_string_to_metric_families(http.get(url + "/metrics").text)
    hist = {s.name: s.value for f in fams if f.name == "vllm:request_decode_time_seconds" for s in f.samples}
    return hist["vllm:request_decode_time_seconds_sum"], hist["vllm:request_decode_time_seconds_count"]


def test_constrained_requests_decode_slower_on_the_served_timeline(serve, http):
    h = serve("time_scale=0.01&constrained_slowdown=2.5&thinking_tokens=4", mode="thread")
    fmt = {"type": "json_schema", "name": "p", "schema": SCHEMAS[0]}
    spans = []
    for i, extra in enumerate(({}, {"text": {"format": fmt}}, {"reasoning": {"effort": "low"}})):
        before = _decode_sum(http, h.url)[0]
        r = http.post(h.url + "/v1/responses", json={"input": words(50, f"cs{i}"), "max_output_tokens": 24,
                                                     "ignore_eos": True, **extra})
        assert r.json()["usage"]["output_tokens"] == 24
        spans.append(_decode_sum(http, h.url)[0] - before)
    assert spans[1] / spans[0] == pytest.approx(2.5, rel=1e-6)   # same contexts: the ratio is exact
    assert spans[2] == pytest.approx(spans[0], rel=1e-6)        # only a schema constrains


# -- validation -------------------------------------------------------------------------------
def test_config_and_fault_validation():
    cfg = ReferenceConfig.from_strings({"constrained_slowdown": "1.5", "thinking_tokens": "4"}).validate()
    assert cfg.constrained_slowdown == 1.5 and "--constrained-slowdown" in cfg.to_cli_args()
    assert ReferenceConfig().constrained_slowdown == 1.0
    for bad in ("0.5", "0", "nan", "inf", "-2"):
        with pytest.raises(ConfigError, match="constrained_slowdown must be a finite number >= 1.0"):
            ReferenceConfig.from_strings({"constrained_slowdown": bad}).validate()
    with pytest.raises(ConfigError, match="bad value"):
        ReferenceConfig.from_strings({"constrained_slowdown": "fast"})
    assert parse_fault("schema_violation").mode == "schema_violation" == parse_fault("schema").mode
    with pytest.raises(ConfigError, match="has no parameter"):
        parse_fault("schema_violation;after=2")
