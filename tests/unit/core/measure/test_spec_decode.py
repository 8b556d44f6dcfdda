"""``core.measure.spec_decode``: the one definition of tokens per engine step and the draft acceptance,
on real recorded counters (vLLM 0.32 with a draft model and with n-gram lookup), SGLang's
windowed gauges and llama.cpp's per-response timings; the edge cases never divide by zero
or turn into a silent 1.0."""
from __future__ import annotations

import json
import os

import httpx
import pytest

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient, llamacpp_timings
from pytest_llm_latency.client.server.prometheus import parse_metrics
from pytest_llm_latency.core.measure import spec_decode as sd
from tests.helpers.records import record
from tests.helpers import paths

RECORDINGS = str(paths.RECORDINGS)  # copies of ../shared/recordings


def _text(name: str) -> str:
    with open(os.path.join(RECORDINGS, name), encoding="utf-8") as f:
        return f.read()


def replay_stream(name: str):
    """The recorded SSE lines through ``OpenAIClient.stream`` (a MockTransport), stamped at
    their recorded times by the injected clock."""
    lines = [json.loads(x) for x in _text(name).splitlines() if x.strip()]
    reads = [(int(x["t_ms"] * 1e6), (x["line"] + "\n").encode()) for x in lines]
    stamps = iter([0] + [t for t, _ in reads] + [reads[-1][0]] * 8)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=iter([b for _, b in reads]))

    client = OpenAIClient(make_http_client(transport=httpx.MockTransport(handler)), "http://rec", "m", "completions",
                          clock=lambda: next(stamps))
    return client.stream("", "recorded", 48)


def counters(prefix: str):
    before = parse_metrics(_text(f"{prefix}-metrics-before.txt")).counters
    after = parse_metrics(_text(f"{prefix}-metrics-after.txt")).counters
    return before, after


def test_vllm_draft_model_recording_gives_the_definition_not_vllms_per_draft_mean():
    rec = replay_stream("vllm-specdec-draft-model-completions-stream-continuous-usage.jsonl")
    # one step's tokens per event (an event whose text is empty, a partial UTF-8 byte, folds into the next)
    assert rec.output_tokens == 48 == sum(c.tokens for c in rec.chunks) and max(c.tokens for c in rec.chunks) >= 2
    before, after = counters("vllm-specdec-draft-model")
    acc = sd.acceptance([rec], before, after)
    assert acc is not None and acc.source == sd.SOURCE_VLLM and acc.scope == "run"
    assert (acc.decode_tokens, acc.accepted_tokens, acc.draft_tokens, acc.drafts) == (47, 20, 84, 28)
    assert acc.decode_steps == pytest.approx(27)
    assert acc.tokens_per_step == pytest.approx(47 / 27)          # 1.74, not vLLM's 1 + 20/28 = 1.71
    assert acc.acceptance_rate == pytest.approx(20 / 84)
    assert acc.notes == ()
    part = sd.as_part(acc, sd.decode_time_ms([rec]))
    assert part["step_ms"] == pytest.approx(part["decode_ms"] / 27)


def test_vllm_ngram_recording_nothing_accepted_is_one_token_per_step_and_rate_zero():
    rec = replay_stream("vllm-specdec-ngram-completions-stream-continuous-usage.jsonl")
    acc = sd.acceptance([rec], *counters("vllm-specdec-ngram"))
    assert acc is not None and acc.accepted_tokens == 0 and acc.draft_tokens == 39
    assert acc.tokens_per_step == 1.0 and acc.acceptance_rate == 0.0 and acc.notes == ()


def test_zero_drafts_is_a_note_and_no_acceptance_rate():
    acc = sd.from_counters({n: 5.0 for n in sd.VLLM_COUNTERS.values()}, {n: 5.0 for n in sd.VLLM_COUNTERS.values()},
                           100)
    assert acc is not None and acc.acceptance_rate is None and acc.tokens_per_step == 1.0
    assert len(acc.notes) == 1 and "drafted nothing" in acc.notes[0] and "acceptance rate is undefined" in acc.notes[0]


def test_counter_reset_leaves_it_undefined_with_a_note():
    names = sd.VLLM_COUNTERS
    before = {names["accepted_tokens"]: 500.0, names["draft_tokens"]: 900.0, names["drafts"]: 300.0}
    after = {names["accepted_tokens"]: 40.0, names["draft_tokens"]: 90.0, names["drafts"]: 30.0}
    acc = sd.from_counters(before, after, 100)
    assert acc is not None and acc.tokens_per_step is None and acc.acceptance_rate is None
    assert any("went down" in n and names["accepted_tokens"] in n for n in acc.notes)


def test_missing_counter_names_it():
    names = sd.VLLM_COUNTERS
    acc = sd.from_counters({}, {names["drafts"]: 10.0, names["draft_tokens"]: 30.0}, 100)
    assert acc is not None and acc.tokens_per_step is None and acc.acceptance_rate is None
    assert any(names["accepted_tokens"] in n and "missing" in n for n in acc.notes)
    acc = sd.from_counters({}, {names["accepted_tokens"]: 50.0}, 100)  # no draft tokens: steps known, rate not
    assert acc is not None and acc.tokens_per_step == pytest.approx(2.0) and acc.acceptance_rate is None
    assert any(names["draft_tokens"] in n for n in acc.notes)


def test_more_accepted_than_decoded_is_other_traffic_not_a_negative_step_count():
    names = sd.VLLM_COUNTERS
    acc = sd.from_counters({}, {names["accepted_tokens"]: 150.0, names["draft_tokens"]: 200.0}, 100)
    assert acc is not None and acc.tokens_per_step is None and any("other clients" in n for n in acc.notes)


def test_no_decode_is_undefined():
    names = sd.VLLM_COUNTERS
    acc = sd.from_counters({}, {names["accepted_tokens"]: 0.0, names["draft_tokens"]: 0.0}, 0)
    assert acc is not None and acc.tokens_per_step is None and any("no tokens" in n for n in acc.notes)


def test_no_source_is_none():
    assert sd.acceptance([record(tokens=8)], {"vllm:generation_tokens_total": 1.0},
                         {"vllm:generation_tokens_total": 9.0}) is None
    assert sd.acceptance([record(tokens=8)]) is None


def test_sglang_windowed_gauges_skip_idle_windows_and_say_they_are_an_estimate():
    gauges = [{"sglang:spec_accept_length": 0.0, "sglang:spec_accept_rate": 0.0},   # idle window
              {"sglang:spec_accept_length": 2.8, "sglang:spec_accept_rate": 0.6},
              {"sglang:spec_accept_length": 3.2, "sglang:spec_accept_rate": 0.7}]
    acc = sd.acceptance([record(tokens=101)], {}, {}, gauges)
    assert acc is not None and acc.source == sd.SOURCE_SGLANG and acc.scope == "window"
    assert acc.tokens_per_step == pytest.approx(3.0) and acc.acceptance_rate == pytest.approx(0.65)
    assert "2 of 3 scrapes" in acc.notes[0] and "windowed estimate" in acc.notes[0]
    acc = sd.from_sglang([{"sglang:spec_accept_length": 0.0}], 100)
    assert acc is not None and acc.tokens_per_step is None and "never ≥ 1" in acc.notes[1]


def _llama(tokens: int, draft_n: int | None, accepted: int | None):
    t = {"prompt_ms": 5.0, "predicted_ms": 50.0, "predicted_n": tokens}
    if draft_n is not None:
        t.update(draft_n=draft_n, draft_n_accepted=accepted)
    return record(tokens=tokens, server_timings=llamacpp_timings(t))


def test_llamacpp_timings_per_request_and_a_response_that_drafted_nothing():
    recs = [_llama(33, 48, 24), _llama(33, 16, 0), _llama(33, None, None)]
    acc = sd.acceptance(recs, {}, {})
    assert acc is not None and acc.source == sd.SOURCE_LLAMACPP_TIMINGS and acc.scope == "per request"
    assert [r.tokens_per_step for r in acc.per_request] == [pytest.approx(32 / 8), 1.0, 1.0]
    assert [r.acceptance_rate for r in acc.per_request] == [0.5, 0.0, None]
    assert acc.tokens_per_step == pytest.approx(96 / (96 - 24)) and acc.acceptance_rate == pytest.approx(24 / 64)
    assert len(acc.notes) == 1 and "1 of 3 responses" in acc.notes[0]


def test_llamacpp_counters_are_the_last_source():
    names = sd.LLAMACPP_COUNTERS
    acc = sd.acceptance([record(tokens=41)], {names["accepted_tokens"]: 0.0, names["draft_tokens"]: 0.0},
                        {names["accepted_tokens"]: 20.0, names["draft_tokens"]: 40.0, names["drafts"]: 10.0})
    assert acc is not None and acc.source == sd.SOURCE_LLAMACPP_COUNTERS
    assert acc.tokens_per_step == pytest.approx(2.0) and acc.acceptance_rate == 0.5


def test_recorded_llamacpp_metrics_without_a_draft_model_are_no_source():
    """llama.cpp exports its spec_decode counters as zeros without a draft model: no source, and
    no "drafted nothing" note on every llama.cpp run."""
    before = parse_metrics(_text("metrics-llamacpp-before.txt")).counters
    after = parse_metrics(_text("metrics-llamacpp-after.txt")).counters
    assert any(n in after for n in sd.LLAMACPP_COUNTERS.values())
    assert sd.acceptance([record(tokens=64)], before, after) is None
