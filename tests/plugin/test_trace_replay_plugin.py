"""Trace replay end to end on a prefix-caching reference target (issue 27): every row sent once, on
its timestamp, with its exact prompt and output length as the server counted them; the blocks the
trace declares shared are served from the cache and the run is judged, not refused as cache-faked;
``trace_speed``, ``trace_rows`` and multi-turn sessions."""
import json

import pytest

from pytest_llm_latency.targets.reference.launch import start_reference

BLOCK = 64
SEND_LAG_MS = 15  # the plugin's own send lag on a quiet machine (issue 27)


def sixteen_rows() -> list[dict]:
    """16 rows 120 ms apart; rows i and i+4 share their first block (4 groups), rows of group 0 their
    first two; lengths vary from 70 to 250 tokens, outputs 3 to 8."""
    rows = []
    for i in range(16):
        g = i % 4
        n = 70 + (i * 37) % 181
        blocks = -(-n // BLOCK)
        lead = [f"g{g}"] + ([f"g{g}b"] if g == 0 and blocks > 2 else [])
        ids = (lead + [1000 + 10 * i + k for k in range(blocks)])[:blocks]
        rows.append({"timestamp": 120 * i, "input_length": n, "output_length": 3 + i % 6, "hash_ids": ids})
    return rows


def two_sessions() -> list[dict]:
    return [
        {"session_id": "a", "timestamp": 0, "input_length": 90, "output_length": 5, "hash_ids": [1, 2]},
        {"session_id": "b", "timestamp": 50, "input_length": 70, "output_length": 4, "hash_ids": [7, 8]},
        {"session_id": "a", "delay": 200, "input_length": 40, "output_length": 6, "hash_ids": [3]},
        {"session_id": "b", "delay": 100, "input_length": 30, "output_length": 3, "hash_ids": [9]},
        {"session_id": "a", "delay": 150, "input_length": 20, "output_length": 2, "hash_ids": [4]},
    ]


@pytest.fixture(scope="module")
def cached_server():
    with start_reference("reference://h100-sxm/llama-3.1-8b?prefix_caching=1&time_scale=0.2",
                         mode="subprocess") as handle:
        yield handle.url


def run(pytester, url, rows, extra="", *args):
    (pytester.path / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pytester.makefile(".slo.yaml", replay=f"""
workloads:
  replay:
    trace: trace.jsonl
    trace_block_tokens: {BLOCK}
    warmup: 1
    slo: {{ttft_max: 10s}}
{extra}""")
    r = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", f"--llm-latency-url={url}",
                           "--llm-latency-json=r.json", *args)
    results = json.loads((pytester.path / "r.json").read_text())["results"]
    return r, results[0] if results else None  # none: a configuration error, before any measurement


def on_time(res, rows, speed=1.0):
    """Each row's send offset against its timestamp ÷ speed, unless the plugin says its client was starved."""
    client = res["client"]
    if client.get("client_fell_behind"):
        assert res["verdict"] == "error"  # never a pass on a client that fell behind
        return
    assert client["client_send_lag_ms_p99"] <= SEND_LAG_MS, client
    sends = {q["trace_row"]: q["send_ms"] for q in res["requests"]}
    first = min(rows[i]["timestamp"] for i in sends)
    for i, send in sends.items():
        # send_ms counts from the first send; the scheduled offsets from the first row's timestamp
        assert abs(send - (rows[i]["timestamp"] - first) / speed) <= SEND_LAG_MS + 5, (i, send)


@pytest.mark.parametrize("api", ["openai-completions", "openai-chat"])
def test_sixteen_rows_each_once_exact_on_time_and_declared_blocks_hit_the_cache(pytester, cached_server, api):
    rows = sixteen_rows()
    # chat: the template's tokens around the text come off the rows' last blocks, so shared blocks stay whole
    r, res = run(pytester, cached_server, rows, "", f"--llm-latency-api={api}")
    assert res["verdict"] == "pass", r.stdout.str()
    got = res["requests"]
    assert sorted(q["trace_row"] for q in got) == list(range(16))  # every row once
    for q in got:
        row = rows[q["trace_row"]]
        assert q["trace_line"] == q["trace_row"] + 1
        assert (q["prompt_tokens"], q["output_tokens"]) == (row["input_length"], row["output_length"]), q
    assert res["measurement"]["prompt_exact_requests"] == 16
    on_time(res, rows)
    # rows 4.. follow a row of their group that completed 480 ms earlier: their shared blocks hit
    declared = {q["trace_row"]: q["declared_cached_tokens"] for q in got}
    assert all(declared[i] == 0 for i in range(4)) and all(declared[i] >= BLOCK for i in range(4, 16))
    assert declared[8] == 2 * BLOCK  # group 0 shares two blocks where both rows have three
    assert all(q["cached_tokens"] >= q["declared_cached_tokens"] for q in got), got
    # the judge's bound counts the rows in flight too (a block is cached once prefilled): at least the declared hits
    assert res["prefix_cache"]["expected_cached_tokens"] >= sum(declared.values())
    assert res["prefix_cache"]["cached_tokens"] <= res["prefix_cache"]["expected_cached_tokens"] + 32 * 16
    assert any("the trace's shared hash_ids declare" in n for n in res["notes"]), res["notes"]
    assert res["load"]["load_mode"] == "trace" and res["load"]["trace_rows"] == 16


def test_speed_two_halves_the_offsets_and_trace_rows_sends_the_first_four(pytester, cached_server):
    rows = sixteen_rows()
    r, res = run(pytester, cached_server, rows, "    trace_speed: 2\n")
    assert res["verdict"] == "pass", r.stdout.str()
    on_time(res, rows, speed=2.0)
    span = max(q["send_ms"] for q in res["requests"])
    assert span < 15 * 120 * 0.75  # at speed 1 the last row goes out at 1800 ms
    r, res = run(pytester, cached_server, rows, "    trace_rows: 4\n")
    assert res["verdict"] == "pass", r.stdout.str()
    assert sorted(q["trace_row"] for q in res["requests"]) == [0, 1, 2, 3]


def test_two_sessions_replay_their_turns_in_order_after_their_delays(pytester, cached_server):
    rows = two_sessions()
    r, res = run(pytester, cached_server, rows)
    assert res["verdict"] == "pass", r.stdout.str()
    got = {q["trace_row"]: q for q in res["requests"]}
    assert sorted(got) == [0, 1, 2, 3, 4]
    for sid, turns in (("a", [0, 2, 4]), ("b", [1, 3])):
        for prev, cur in zip(turns, turns[1:]):
            p, q = got[prev], got[cur]
            assert q["session"] == sid
            # each turn's prompt is the history (the previous prompt and its answer) plus the new tokens
            assert q["history_tokens"] == p["prompt_tokens"] + p["output_tokens"]
            assert q["prompt_tokens"] == q["history_tokens"] + rows[cur]["input_length"], q
            # sent after the previous turn ended plus its delay, and on time (unless the client was starved)
            assert q["send_ms"] >= p["end_ms"] + rows[cur]["delay"] - 1, (p, q)
            if not res["client"].get("client_fell_behind"):
                assert q["send_ms"] <= p["end_ms"] + rows[cur]["delay"] + SEND_LAG_MS + 5, (p, q)
            assert q["cached_tokens"] >= q["declared_cached_tokens"] > 0


@pytest.fixture(scope="module")
def short_context_server():
    with start_reference("reference://h100-sxm/llama-3.1-8b?max_model_len=200&time_scale=0.2",
                         mode="subprocess") as handle:
        yield handle.url


def served_requests(url) -> float:
    """Completions the server has counted (vLLM's request counter on the reference target's /metrics)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) if f.name == "vllm:request_success"
               for s in f.samples if s.name.endswith("_total"))


def test_a_malformed_row_is_a_configuration_error_naming_file_line_and_field_before_any_request(
        pytester, short_context_server):
    rows = sixteen_rows()[:3]
    rows[1] = {**rows[1], "timestamp": -5}
    before = served_requests(short_context_server)
    r, res = run(pytester, short_context_server, rows)
    r.assert_outcomes(errors=1)
    path = pytester.path / "trace.jsonl"
    assert (f"configuration error: {path}:2: timestamp: expected a number >= 0, got -5 -- give the arrival time "
            f"in ms from the start of the trace (a number >= 0)") in r.stdout.str()
    assert res is None
    assert served_requests(short_context_server) == before  # nothing was sent, not even a probe


def test_a_row_beyond_the_servers_context_is_an_error_naming_it_or_skipped_or_clipped(pytester, short_context_server):
    rows = [{"timestamp": 10 * i, "input_length": 60, "output_length": 4, "hash_ids": [i]} for i in range(3)]
    rows[1] = {**rows[1], "input_length": 199, "hash_ids": [1, 2, 3, 4]}  # 199 + 4 = 203 > max_model_len 200
    before = served_requests(short_context_server)
    r, res = run(pytester, short_context_server, rows)
    r.assert_outcomes(errors=1)
    assert f"{pytester.path / 'trace.jsonl'}:2: input_length:" in r.stdout.str() and "200" in r.stdout.str()
    assert "trace_overlong" in r.stdout.str()
    assert served_requests(short_context_server) == before
    r, res = run(pytester, short_context_server, rows, "    trace_overlong: skip\n")
    assert res["verdict"] == "pass", r.stdout.str()
    assert sorted(q["trace_row"] for q in res["requests"]) == [0, 2]
    r, res = run(pytester, short_context_server, rows, "    trace_overlong: clip\n")
    assert res["verdict"] == "pass", r.stdout.str()
    got = {q["trace_row"]: q for q in res["requests"]}
    assert sorted(got) == [0, 1, 2] and got[1]["prompt_tokens"] + got[1]["output_tokens"] <= 200
    assert got[1]["prompt_tokens"] < 199


def test_the_roofline_judges_a_trace_on_per_request_ceilings_at_the_batch_the_server_ran(pytester):
    rows = sixteen_rows()
    with start_reference("reference://h100-sxm/llama-3.1-8b?prefix_caching=1", mode="subprocess") as handle:
        r, res = run(pytester, handle.url, rows,
                     "    roofline: {hardware: h100-sxm, model: llama-3.1-8b, min_decode_efficiency: 0.3}\n")
    assert res["verdict"] == "pass", r.stdout.str()
    roof = res["roofline"]
    assert roof["combination"].startswith("per-request ceilings over 16 requests"), roof
    assert "vllm:num_requests_running" in roof["batch_source"] or "client" in roof["batch_source"], roof


MARKED = '''
import pytest

@pytest.mark.llm_slo(trace="traces/t.jsonl", trace_block_tokens=64, trace_speed=4, warmup=0, ttft_max="10s")
def test_marked(llm_latency):
    pass

def test_measured(llm_latency):
    res = llm_latency.measure(trace="traces/t.jsonl", trace_block_tokens=64, trace_rows=3, warmup=0)
    assert len(res.records) == 3
    assert sorted(r.trace.row for r in res.records) == [0, 1, 2]
'''


def test_a_marker_and_the_fixture_replay_a_trace_relative_to_the_test_file(pytester, cached_server):
    (pytester.path / "traces").mkdir()
    (pytester.path / "traces" / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sixteen_rows()[:6]))
    pytester.makepyfile(test_marked=MARKED)
    r = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", f"--llm-latency-url={cached_server}",
                           "--llm-latency-json=r.json")
    r.assert_outcomes(passed=2)
    res = json.loads((pytester.path / "r.json").read_text())["results"]
    marked = next(x for x in res if x["nodeid"].endswith("test_marked"))
    assert sorted(q["trace_row"] for q in marked["requests"]) == list(range(6))


def test_two_workers_replay_whole_sessions_and_the_declared_hits_come_from_the_merged_stamps(pytester, cached_server):
    """``workers: 2``: session i on worker i mod 2, every row once; the declared hits, decided after
    the run from the records' send and end stamps, are those the one-process replay declares."""
    rows = sixteen_rows()
    r, res = run(pytester, cached_server, rows, "    workers: 2\n")
    assert res["verdict"] == "pass", r.stdout.str()
    got = res["requests"]
    assert sorted(q["trace_row"] for q in got) == list(range(16))  # every row once
    by_worker = {q["worker"] for q in got}
    assert len(by_worker) == 2 and len({w.split("@")[0] for w in by_worker}) == 2
    for parity in (0, 1):  # sessionless rows: one session each, session i on worker i mod 2
        assert len({q["worker"] for q in got if q["trace_row"] % 2 == parity}) == 1
    declared = {q["trace_row"]: q["declared_cached_tokens"] for q in got}
    assert all(declared[i] == 0 for i in range(4)) and all(declared[i] >= BLOCK for i in range(4, 16))
    assert declared[8] == 2 * BLOCK
    assert all(q["cached_tokens"] >= q["declared_cached_tokens"] for q in got), got
    assert res["prefix_cache"]["expected_cached_tokens"] >= sum(declared.values())
    assert res["load"]["load_mode"] == "trace" and res["load"]["workers"] == 2
    assert [w["index"] for w in res["load"]["worker_lag"]] == [0, 1]

    rows = two_sessions()
    r, res = run(pytester, cached_server, rows, "    workers: 2\n")
    assert res["verdict"] == "pass", r.stdout.str()
    got = {q["trace_row"]: q for q in res["requests"]}
    assert sorted(got) == [0, 1, 2, 3, 4]
    for turns in ([0, 2, 4], [1, 3]):  # a session stays whole on one worker
        assert len({got[i]["worker"] for i in turns}) == 1
        for prev, cur in zip(turns, turns[1:]):
            p, q = got[prev], got[cur]
            assert q["history_tokens"] == p["prompt_tokens"] + p["output_tokens"]
            assert q["send_ms"] >= p["end_ms"] + rows[cur]["delay"] - 1, (p, q)
            assert q["cached_tokens"] >= q["declared_cached_tokens"] > 0
    assert got[0]["worker"] != got[1]["worker"]


def test_rows_tagged_by_class_are_judged_per_class(pytester, cached_server):
    """Issue 37: a trace's rows with a ``class`` field, the slo per class: one test item, each class on its own
    budgets (here the long rows' TTFT budget is too tight: that class alone fails)."""
    rows = [{**r, "class": "long" if r["input_length"] >= 160 else "short"} for r in sixteen_rows()]
    (pytester.path / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pytester.makefile(".slo.yaml", replay=f"""
workloads:
  replay:
    trace: trace.jsonl
    trace_block_tokens: {BLOCK}
    warmup: 1
    slo: {{short: {{ttft_max: 10s}}, long: {{ttft_max: 0.001ms}}}}
""")
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={cached_server}", "--llm-latency-json=r.json")
    r.assert_outcomes(failed=1)
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]
    classes = {c["name"]: c for c in res["mix"]["classes"]}
    n_long = sum(1 for row in rows if row["class"] == "long")
    assert (classes["long"]["requests"], classes["short"]["requests"]) == (n_long, 16 - n_long)
    assert (classes["short"]["status"], classes["long"]["status"]) == ("pass", "fail")
    assert [v.split(":")[0] for v in res["violations"]] == ["long"]
