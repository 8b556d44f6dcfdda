"""Terminal output: the live progress marker and the summary table."""
from pytest_llm_latency.plugin.report.terminal import Progress, summary_lines


class FakeTR:
    def __init__(self, tty=True):
        self.isatty, self.verbosity, self.out = tty, 0, ""

    def write(self, text, flush=False):
        self.out += text


def screen(raw: str) -> str:
    """What a terminal shows: a backspace moves the cursor left, later characters overwrite."""
    line, pos = [], 0
    for ch in raw:
        if ch == "\b":
            pos = max(pos - 1, 0)
            continue
        if pos < len(line):
            line[pos] = ch
        else:
            line.append(ch)
        pos += 1
    return "".join(line).rstrip()


def test_progress_rewrites_in_place_and_clears():
    tr = FakeTR()
    tr.write("chat.slo.yaml ")
    p = Progress(tr, "chat")
    for i in (1, 12, 20):
        p(i, 20)
        assert screen(tr.out) == f"chat.slo.yaml  [chat {i}/20]"
    p.clear()
    assert screen(tr.out) == "chat.slo.yaml"


def test_progress_is_silent_off_a_terminal():
    tr = FakeTR(tty=False)
    Progress(tr, "chat")(3, 20)
    assert tr.out == ""


def test_summary_table_rows_and_reasons():
    res = {"nodeid": "chat.slo.yaml::chat", "n": 20, "verdict": "fail", "ttft_ms": {"p50": 410.0, "p95": 612.3},
           "tpot_ms": {"p50": 20.0, "p95": 25.0}, "violations": ["TTFT p95 612.3 ms > budget 500 ms"]}
    lines = summary_lines([res])
    row = next(ln for ln in lines if ln.startswith("chat.slo.yaml::chat"))
    assert row.split() == ["chat.slo.yaml::chat", "20", "410.0", "612.3", "20.00", "25.00", "50.0", "-", "FAIL"]
    assert lines[-1].strip() == "chat.slo.yaml::chat: TTFT p95 612.3 ms > budget 500 ms"


def test_columns_name_what_they_show_decode_and_output_rates():
    """Old code: one "tok/s" column holding 1000/TPOT p50, while the README defines output tok/s as N/E2E."""
    res = {"nodeid": "t::x", "n": 20, "verdict": "pass", "ttft_ms": {"p50": 200.0, "p95": 250.0},
           "tpot_ms": {"p50": 20.0, "p95": 25.0}, "output_tps": {"p50": 31.5}}
    lines = summary_lines([res])
    head = lines[0].split("   (")[0]
    assert "decode tok/s" in head and "out tok/s" in head and " tok/s " not in head.replace("decode tok/s", "") \
        .replace("out tok/s", "")
    row = next(ln for ln in lines if ln.startswith("t::x")).split()
    assert row[6:] == ["50.0", "31.5", "PASS"]


def test_misses_show_as_inf_and_notes_are_marked_and_listed_below():
    res = {"nodeid": "t::x", "n": 16, "verdict": "fail", "ttft_ms": {"p50": 100.0, "p95": None, "censored": 4},
           "tpot_ms": {"p50": None, "p95": None, "censored": 4}, "notes": ["4 of 20 requests failed"]}
    lines = summary_lines([res])
    row = next(ln for ln in lines if ln.startswith("t::x")).split()
    assert row[2:] == ["100.0", "inf", "inf", "inf", "0.0", "-", "FAIL", "*"]
    assert lines[-2:] == ["notes (*):", "  t::x: 4 of 20 requests failed"]


def test_the_rule_that_recovered_itl_token_counts_is_named():
    """ITL per token from counts the stream did not give: the summary names the rule (the exact
    ones, the server's counts or one token a chunk, are the ordinary case and stay quiet)."""
    base = {"verdict": "pass", "n": 3, "ttft_ms": {"p50": 1.0, "p95": 1.0}, "tpot_ms": {"p50": 1.0, "p95": 1.0}}
    results = [{**base, "nodeid": "a", "measurement": {"itl_token_counts": "tokenize"}},
               {**base, "nodeid": "b", "measurement": {"itl_token_counts": "server"}},
               {**base, "nodeid": "c", "measurement": {"itl_token_counts": "tokenize 3, apportioned 1"}}]
    lines = summary_lines(results)
    assert "  a: ITL token counts per chunk: tokenize" in lines
    assert "  c: ITL token counts per chunk: tokenize 3, apportioned 1" in lines
    assert not any(line.startswith("  b: ITL") for line in lines)
