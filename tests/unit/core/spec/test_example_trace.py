"""The shipped example trace is reproducible and valid by the trace format's rules.

``example_slos/traces/example.jsonl`` is written by ``example_slos/make_trace.py`` (seeded,
stdlib only); a fresh run must give the committed bytes, so the file in the repository is the
script's output and nobody edits it by hand. Each row is then checked by the format's rules
(docs/trace-replay.md): known fields only, ``timestamp`` xor ``delay`` (``delay`` only on a
session's later turns), non-decreasing timestamps, positive lengths, and at most
ceil(input_length / 512) hash ids.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from tests.helpers.paths import ROOT

SCRIPT = ROOT / "example_slos" / "make_trace.py"
COMMITTED = ROOT / "example_slos" / "traces" / "example.jsonl"
FIELDS = {"timestamp", "delay", "input_length", "output_length", "hash_ids", "session_id"}
BLOCK = 512


def test_committed_trace_is_what_the_script_writes(tmp_path):
    out = tmp_path / "example.jsonl"
    subprocess.run([sys.executable, str(SCRIPT), str(out)], check=True, capture_output=True)
    assert out.read_bytes() == COMMITTED.read_bytes(), (
        "example_slos/traces/example.jsonl differs from a fresh run: python example_slos/make_trace.py")


def _rows() -> list[tuple[int, dict]]:
    lines = COMMITTED.read_text(encoding="utf-8").splitlines()
    return [(n, json.loads(line)) for n, line in enumerate(lines, 1)]


def test_every_row_is_valid():
    rows = _rows()
    assert 16 <= len(rows) <= 30
    last_ts = -1
    seen_sessions: set[str] = set()
    for n, row in rows:
        where = f"example.jsonl:{n}"
        assert set(row) <= FIELDS, f"{where}: unknown fields {set(row) - FIELDS}"
        assert ("timestamp" in row) != ("delay" in row), f"{where}: exactly one of timestamp, delay"
        session = row.get("session_id")
        if "delay" in row:
            assert session in seen_sessions, f"{where}: a delay row must follow its session's first row"
            assert isinstance(row["delay"], int) and row["delay"] >= 0, where
        else:
            assert isinstance(row["timestamp"], int) and row["timestamp"] >= last_ts, f"{where}: timestamp order"
            last_ts = row["timestamp"]
            if session is not None:
                assert session not in seen_sessions, f"{where}: a session's later turn needs delay"
                seen_sessions.add(session)
        for key in ("input_length", "output_length"):
            assert isinstance(row[key], int) and row[key] >= 1, f"{where}: {key}"
        ids = row["hash_ids"]
        assert isinstance(ids, list) and ids, where
        assert all(isinstance(i, (int, str)) and not isinstance(i, bool) for i in ids), where
        assert len(ids) <= math.ceil(row["input_length"] / BLOCK), f"{where}: more hash_ids than blocks"


def test_the_example_exercises_sharing_sessions_and_the_reference_budget():
    """What the example is for: shared leading blocks, two-turn sessions, short runs."""
    rows = [row for _, row in _rows()]
    firsts = [tuple(r["hash_ids"][:1]) for r in rows if len(r["hash_ids"]) > 1]
    assert max(firsts.count(f) for f in set(firsts)) >= 5, "a group of rows sharing a leading block"
    sessions = [r["session_id"] for r in rows if "session_id" in r]
    assert len(set(sessions)) == 2 and len(sessions) == 4
    assert max(r["timestamp"] for r in rows if "timestamp" in r) <= 10_000
    assert all(16 <= r["output_length"] <= 64 for r in rows)
    assert all(r["input_length"] <= 2048 for r in rows)
