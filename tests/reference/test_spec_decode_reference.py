"""Speculative decoding on the running reference server: one chunk per engine step, vLLM's
spec-decode counters consistent with the stream, and the two acceptance scenarios measured
through the plugin's own client and ``core.measure.spec_decode`` (the one definition of the figures).

Wire-shape and counter tests run in thread mode with ``time_scale=0``.  The timing tests run
the server in subprocess mode with long modelled steps (``time_scale`` 2.5: 15 ms per step),
and judge run totals (sum of decode time / sum of decode tokens, as ``core.measure.spec_decode``
does): a 10-20 ms late read of a request's last token moves a ~1 s decode window by 1-2 %,
inside the 0.05 / 0.8 (6 %) tolerance the issue states, on a loaded 2-core machine too.
"""
from __future__ import annotations

import statistics

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llm_latency.client.server.prometheus import fetch_text, parse_metrics
from pytest_llm_latency.core.measure import spec_decode
from tests.reference import pluginclient
from tests.reference.refclient import stream_ollama, stream_openai, words

BW = 3350e9                                  # H100-SXM datasheet (catalog)
WB, KV = 8.03e9 * 2, 131072                  # Llama-3.1-8B fp16 (catalog)
SPEC = "vllm:spec_decode_num_"


def usage_stream(http, url, n, *, prompt="tell me", path="/v1/completions", ignore_eos=True):
    body = {"prompt": prompt, "max_tokens": n, "ignore_eos": ignore_eos,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if path.endswith("chat/completions"):
        body = {**{k: v for k, v in body.items() if k != "prompt"}, "messages": [{"role": "user", "content": prompt}]}
    return stream_openai(http, url, body, path=path)


def spec_metrics(http, url) -> dict:
    """{sample name or (name, position): value} of the spec-decode counters."""
    out: dict = {}
    for fam in text_string_to_metric_families(http.get(url + "/metrics").text):
        for s in fam.samples:
            if s.name.startswith(SPEC) and s.name.endswith("_total"):
                key = (s.name, s.labels["position"]) if "position" in s.labels else s.name
                out[key] = s.value
            elif s.name == "vllm:generation_tokens_total":
                out[s.name] = s.value
    return out


# -- the wire ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_each_engine_step_arrives_as_one_chunk(serve, http, path):
    h = serve("time_scale=0&spec_tokens=2&spec_acceptance=1.0", mode="thread")
    s = usage_stream(http, h.url, 12, path=path)
    token_events = [o for _, o in s.events if isinstance(o, dict) and o.get("choices")
                    and o["usage"]["completion_tokens"] > 0]
    assert [n for _, n in s.chunks] == [1, 3, 3, 3, 2]          # prefill, 3 full steps, a truncated last
    assert [o["usage"]["completion_tokens"] for o in token_events] == [1, 4, 7, 10, 12]
    texts = [o["choices"][0].get("text") or o["choices"][0]["delta"]["content"] for o in token_events]
    assert [len(t.split()) for t in texts] == [1, 3, 3, 3, 2]   # the chunk's text holds the step's tokens
    assert s.usage["completion_tokens"] == 12 and s.finish_reason == "length" and s.done


def test_ollama_streams_one_piece_per_step(serve, http):
    h = serve("time_scale=0&spec_tokens=3&spec_acceptance=1.0", mode="thread")
    s = stream_ollama(http, h.url, {"model": "llama-3.1-8b", "prompt": "hello there", "options": {"num_predict": 60}})
    n = s.final["eval_count"]
    full, last = divmod(n - 1, 4)
    assert n > 5 and [n for _, n in s.chunks] == [1] + [4] * full + ([last] if last else [])


def test_counters_agree_with_what_was_streamed(serve, http):
    k = 3
    h = serve(f"time_scale=0&spec_tokens={k}&spec_acceptance=0.6&max_model_len=4096", mode="thread")
    before = spec_metrics(http, h.url)
    assert before[SPEC + "drafts_total"] == 0 and {before[(SPEC + "accepted_tokens_per_pos_total", str(i))]
                                                   for i in range(k)} == {0}
    expect = {"drafts": 0, "draft": 0, "accepted": 0, "tokens": 0, "per_pos": [0] * k}
    streams = [usage_stream(http, h.url, 200, prompt=words(20, f"p{i}"), ignore_eos=False) for i in range(12)]
    streams.append(usage_stream(http, h.url, 1))                 # one token: prefill only, no draft
    for s in streams:
        sizes, done = [n for _, n in s.chunks], 0
        assert sizes[0] == 1 and all(1 <= n <= 1 + k for n in sizes)
        done = 1
        for n in sizes[1:]:                                      # each decode step, as streamed
            drafted = min(k, s.tokens - done - 1)                # never past the output length
            assert n - 1 <= drafted
            expect["drafts"] += drafted > 0
            expect["draft"] += drafted
            expect["accepted"] += n - 1
            for i in range(n - 1):
                expect["per_pos"][i] += 1
            done += n
        expect["tokens"] += s.tokens
    after = spec_metrics(http, h.url)
    assert after[SPEC + "drafts_total"] == expect["drafts"]
    assert after[SPEC + "draft_tokens_total"] == expect["draft"]
    assert after[SPEC + "accepted_tokens_total"] == expect["accepted"] > 0
    assert [after[(SPEC + "accepted_tokens_per_pos_total", str(i))] for i in range(k)] == expect["per_pos"]
    assert after["vllm:generation_tokens_total"] == expect["tokens"]
    assert expect["per_pos"][0] > expect["per_pos"][1] > expect["per_pos"][2] > 0   # geometric


def test_no_spec_counters_when_speculation_is_off(fast_server, http):
    text = http.get(fast_server.url + "/metrics").text
    assert "spec_decode" not in text and "vllm:generation_tokens_total" in text


def test_accepted_counts_are_reproducible_under_spec_seed(serve, http):
    def chunks(seed):
        h = serve(f"time_scale=0&spec_tokens=2&spec_acceptance=0.5&spec_seed={seed}", mode="thread")
        return [[n for _, n in usage_stream(http, h.url, 40, prompt=f"q{i}").chunks] for i in range(3)]

    first = chunks(11)
    assert first == chunks(11)
    assert first != chunks(12)
    assert {n for c in first for n in c} == {1, 2, 3}


# -- the timings, through the plugin's client and core.measure.spec_decode --------------------------------
def measure(serve, http, query: str, n_tokens: int, requests: int = 3, ts: float = 2.5):
    h = serve(f"decode_efficiency=0.8&time_scale={ts}&{query}")
    pluginclient.stream_openai(http, h.url, {"prompt": "warm up", "max_tokens": 4, "ignore_eos": True})
    before = parse_metrics(fetch_text(http, h.url))
    recs = [pluginclient.stream_openai(http, h.url, {"prompt": words(100, f"s{i}"), "max_tokens": n_tokens,
                                                     "ignore_eos": True}).rec for i in range(requests)]
    after = parse_metrics(fetch_text(http, h.url))
    acc = spec_decode.acceptance(recs, before.counters, after.counters)
    assert acc is not None and acc.source == spec_decode.SOURCE_VLLM and acc.scope == "run", acc
    decode_ms = spec_decode.decode_time_ms(recs)
    tok_s = acc.decode_tokens / (decode_ms / 1e3 / ts)           # modelled decode tokens per second
    return recs, acc, tok_s, spec_decode.step_ms(acc, decode_ms) / ts / 1e3


def step_bytes(n_tokens: int, drafted: float = 0.0) -> float:
    """Target weights + KV at the mean context (prompt 100 + half the output) + drafter bytes."""
    return WB + KV * (100 + n_tokens / 2) + drafted


@pytest.mark.parametrize("query, n, tps, drafter", [
    ("spec_tokens=2&spec_acceptance=1.0", 200, 3.0, 0.0),                  # (a) 3 tokens per step
    ("spec_tokens=2&spec_acceptance=0.2,0", 120, 1.2, 0.0),                # (b) the same steps, 1.2
    ("spec_tokens=2&spec_acceptance=1.0&draft_bytes=2e9", 150, 3.0, 2 * 2e9),  # EAGLE-like head bytes
])
def test_steps_at_0_8_of_the_ceiling_with_the_constructed_tokens_per_step(serve, http, query, n, tps, drafter):
    recs, acc, tok_s, step_s = measure(serve, http, query, n)
    modelled_step = step_bytes(n, drafter) / (BW * 0.8)
    step_eff = tok_s / acc.tokens_per_step * step_bytes(n, drafter) / BW   # the per-step efficiency
    tpot = statistics.fmean(pluginclient.Timed(r).tpot_s() for r in recs) / 2.5
    print(f"{query}: tokens/step {acc.tokens_per_step:.3f}, acceptance {acc.acceptance_rate}, step efficiency "
          f"{step_eff:.3f}, step {step_s * 1e3:.3f} ms (model {modelled_step * 1e3:.3f}), TPOT {tpot * 1e3:.3f} ms")
    assert abs(acc.tokens_per_step - tps) <= 0.1
    assert abs(step_eff - 0.8) <= 0.05
    assert step_s == pytest.approx(modelled_step, rel=0.05)
    assert tpot == pytest.approx(modelled_step / acc.tokens_per_step, rel=0.05)
    decoded = len(recs) * (n - 1)
    assert acc.decode_tokens == decoded and acc.accepted_tokens < decoded
    if tps == 3.0:                                              # every draft accepted: exact by construction
        full, last = divmod(n - 1, 3)
        assert acc.tokens_per_step == decoded / (len(recs) * (full + (last > 0)))
        assert acc.acceptance_rate == 1.0 and acc.drafts == len(recs) * (full + (last > 1))
    if drafter:                                                  # the head's bytes are in the step
        assert tok_s / acc.tokens_per_step * step_bytes(n) / BW < 0.8 * 0.85
