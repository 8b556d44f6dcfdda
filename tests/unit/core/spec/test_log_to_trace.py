"""docs/examples/log_to_trace.py: the converter the trace-replay docs give for production logs.

A tiny log in, the Mooncake rows out: block counts are ceil(prompt / block), ids are chained
(equal only while the whole prefix is equal: the same block text after a different prefix gets
a new id), timestamps are ms from the first arrival, sorted; and the vLLM-log reader pairs a
request's prompt ids with its output count.
"""
from __future__ import annotations

import importlib.util
import json

import pytest
from tests.helpers.paths import ROOT

SCRIPT = ROOT / "docs" / "examples" / "log_to_trace.py"


def _mod():
    spec = importlib.util.spec_from_file_location("log_to_trace", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(tmp_path, lines, *flags):
    mod = _mod()
    log = tmp_path / "in.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "trace.jsonl"
    assert mod.main([*flags, str(log), str(out)]) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_blocks_chain_and_count(tmp_path):
    system = list(range(1000, 1600))            # a 600-token system prompt: one full block + 88 tokens
    a = system + list(range(5000, 5400))        # 1000 tokens -> 2 blocks
    b = system + list(range(7000, 7100))        # 700 tokens  -> 2 blocks, first shared with a
    c = list(range(1000, 1512))[::-1] + system[512:]  # another first block, then the system's last 88
    d = list(range(9000, 9000 + 1025))          # 1025 tokens -> 3 blocks, the last of 1 token
    lines = [
        json.dumps({"time": 100.5, "prompt_token_ids": a, "output_tokens": 20}),
        json.dumps({"time": "1970-01-01T00:01:40.000", "prompt_token_ids": d, "output_tokens": 5}),
        json.dumps({"time": 101.0, "prompt_token_ids": b, "output_tokens": 30}),
        json.dumps({"time": 102.25, "prompt_token_ids": c, "output_tokens": 7}),
        json.dumps({"time": 103.0, "prompt_tokens": 1100, "output_tokens": 9}),
    ]
    rows = _run(tmp_path, lines)
    assert [r["timestamp"] for r in rows] == [0, 500, 1000, 2250, 3000]   # sorted, ms from the first
    d_row, a_row, b_row, c_row, n_row = rows
    assert [len(r["hash_ids"]) for r in rows] == [3, 2, 2, 2, 3]          # ceil(input / 512)
    assert [r["input_length"] for r in rows] == [1025, 1000, 700, 600, 1100]
    assert a_row["hash_ids"][0] == b_row["hash_ids"][0]                    # shared first block
    assert a_row["hash_ids"][1] != b_row["hash_ids"][1]
    # chained: c's first block differs, so none of its ids is shared with a or b
    assert not set(c_row["hash_ids"]) & (set(a_row["hash_ids"]) | set(b_row["hash_ids"]))
    all_ids = [i for r in rows for i in r["hash_ids"]]
    assert sorted(set(all_ids)) == list(range(len(set(all_ids))))           # 0..n-1, first-use order
    assert d_row["hash_ids"] == [0, 1, 2]
    assert not set(n_row["hash_ids"]) & set(i for r in rows[:4] for i in r["hash_ids"])  # counts only: fresh
    assert [r["output_length"] for r in rows] == [5, 20, 30, 7, 9]


def test_same_block_text_after_another_prefix_gets_another_id():
    h = _mod().BlockHasher(4)
    x = h.hash_ids([1, 2, 3, 4, 9, 9, 9, 9])
    y = h.hash_ids([5, 6, 7, 8, 9, 9, 9, 9])
    z = h.hash_ids([1, 2, 3, 4, 9, 9, 9, 9, 1])
    assert x[1] != y[1]              # equal second-block tokens, different prefix
    assert z[:2] == x and len(z) == 3  # a longer prompt with the same prefix: same leading ids + 1 partial


def test_block_tokens_option(tmp_path):
    rows = _run(tmp_path, [json.dumps({"time": 0, "prompt_token_ids": list(range(40)), "output_tokens": 1})],
                "--block-tokens", "16")
    assert len(rows[0]["hash_ids"]) == 3


def test_vllm_log(tmp_path):
    ids_a = list(range(600))
    ids_b = list(range(512)) + [7, 7, 7]
    lines = [
        "INFO 2026-01-01 10:00:00.100 [logger.py:41] Received request chatcmpl-a: prompt: 'x', "
        f"params: SamplingParams(max_tokens=8), prompt_token_ids: {ids_a}, prompt_embeds shape: None, "
        "lora_request: None.",
        "DEBUG 2026-01-01 10:00:00.350 [logger.py:50] Request chatcmpl-b details: prompt: 'y', "
        f"prompt_token_ids: {ids_b}, prompt_embeds shape: None.",
        "INFO 2026-01-01 10:00:00.400 [logger.py:70] Generated response chatcmpl-a: output: 'hi', "
        "output_token_ids: [5, 6, 7, 8], finish_reason: length",
        "INFO 2026-01-01 10:00:00.500 [logger.py:70] Generated response chatcmpl-b (streaming delta): output: 'a', "
        "output_token_ids: [1, 2], finish_reason: None",
        "INFO 2026-01-01 10:00:00.600 [logger.py:70] Generated response chatcmpl-b (streaming delta): output: 'b', "
        "output_token_ids: [3], finish_reason: length",
        "INFO 2026-01-01 10:00:00.700 [logger.py:41] Received request chatcmpl-c: prompt: 'z', "
        "params: SamplingParams(max_tokens=8), prompt_token_ids: [1, 2, 3], lora_request: None.",
    ]
    rows = _run(tmp_path, lines, "--vllm")
    assert rows == [   # chatcmpl-c has no output line: left out
        {"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]},
        {"timestamp": 250, "input_length": 515, "output_length": 3, "hash_ids": [0, 2]},
    ]


def test_bad_line_names_file_and_line(tmp_path, capsys):
    mod = _mod()
    log = tmp_path / "in.log"
    log.write_text('{"time": 1, "prompt_tokens": 5, "output_tokens": 2}\n{"time": 2, "output_tokens": 2}\n')
    assert mod.main([str(log), str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{log}:2: needs prompt_token_ids (a list) or prompt_tokens (a count)" in err


@pytest.mark.parametrize("n", [0, -3])
def test_empty_prompt_is_refused(n, tmp_path):
    mod = _mod()
    with pytest.raises(mod.LogError, match="need >= 1 token"):
        mod.to_rows([{"time": 0.0, "prompt_tokens": n, "output_tokens": 1, "where": "x:1"}])
