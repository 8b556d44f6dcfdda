"""Trace replay on a real llama.cpp ``llama-server`` (issue 27): the block texts add up on its real
tokenizer (every row's prompt is exactly its ``input_length`` as the server counts it, BOS included),
the blocks the trace declares shared come back as ``timings.cache_n``, a session's later turn is its
history plus the new tokens, and a second run shares nothing with the first (a fresh nonce)."""
import json

import pytest

pytestmark = pytest.mark.integration

BLOCK = 64
# one slot: rows are spaced so each finishes before the next (llama.cpp reuses the slot's common
# prefix with the previous prompt, and its prompt cache, per token)
ROWS = [
    {"timestamp": 0, "input_length": 150, "output_length": 4, "hash_ids": ["sys", "a1", "a2"]},
    {"timestamp": 600, "input_length": 170, "output_length": 4, "hash_ids": ["sys", "b1", "b2"]},
    {"timestamp": 1200, "input_length": 100, "output_length": 3, "hash_ids": ["other", "c1"]},
    {"timestamp": 1800, "input_length": 140, "output_length": 4, "hash_ids": ["sys", "a1", "d2"], "session_id": "s"},
    {"delay": 300, "input_length": 30, "output_length": 4, "hash_ids": ["e1"], "session_id": "s"},
]
SLO = f"""
workloads:
  replay:
    trace: trace.jsonl
    trace_block_tokens: {BLOCK}
    warmup: 1
    slo: {{ttft_max: 30s}}
"""


def run(pytester, url, name):
    (pytester.path / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    pytester.makefile(".slo.yaml", replay=SLO)
    r = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", f"--llm-latency-url={url}",
                           f"--llm-latency-json={name}")
    return r, json.loads((pytester.path / name).read_text())["results"][0]


def test_a_trace_replays_exactly_on_llama_cpp_and_its_declared_blocks_hit_the_slot_cache(pytester, llama_tiny):
    r, res = run(pytester, llama_tiny.url, "r1.json")
    assert res["verdict"] == "pass", r.stdout.str()
    got = {q["trace_row"]: q for q in res["requests"]}
    assert sorted(got) == [0, 1, 2, 3, 4]
    for i in (0, 1, 2, 3):  # first turns: exactly the row's length on the real tokenizer
        assert got[i]["prompt_tokens"] == ROWS[i]["input_length"], got[i]
        assert got[i]["output_tokens"] == ROWS[i]["output_length"]
    turn = got[4]
    assert turn["history_tokens"] == got[3]["prompt_tokens"] + got[3]["output_tokens"]
    assert turn["prompt_tokens"] == turn["history_tokens"] + ROWS[4]["input_length"], turn
    assert got[1]["declared_cached_tokens"] == BLOCK and got[3]["declared_cached_tokens"] == 2 * BLOCK
    for q in got.values():  # what the trace declares is what the server found (cache_n)
        assert q["cached_tokens"] >= q["declared_cached_tokens"], q
    assert turn["cached_tokens"] >= turn["history_tokens"] - 16
    _, again = run(pytester, llama_tiny.url, "r2.json")  # a fresh nonce: nothing of the first run is reused
    assert again["verdict"] == "pass"
    first = {q["trace_row"]: q for q in again["requests"]}[0]
    assert first["cached_tokens"] <= 8  # BOS, the leading '▁' and chance letters
