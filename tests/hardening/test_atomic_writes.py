"""``write_atomic`` under SIGKILL: a reader sees one complete version, never a torn one.

A child Python process rewrites a results file, alternating between two complete,
large-ish JSON versions (A and B, of different sizes).  It reports each write it is
about to start on a pipe; the parent waits for that report, sleeps a seeded random
fraction of one write's duration, and SIGKILLs it -- so many kills land between the
temp file's creation and the rename.  After every kill the results file must be
byte-for-byte A or B.

What a kill may leave: at most one temp file, named ``.<name>.<random>.tmp`` next to
the results file.  It is hidden (leading dot), does not end in ``.json``, and is never
renamed over the results file once its writer is dead, so readers never take it for
the results.  ``write_atomic`` does not sweep old ones (a live writer may own one).
"""
import json
import os
import random
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_llm_latency.files.atomic import write_atomic

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and fork semantics")

KILLS = 200
WAIT_S = 10.0          # bound on every single wait
BUDGET_S = 45.0        # bound on the whole kill loop
REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import os, sys
sys.path.insert(0, sys.argv[4])
from pytest_llm_latency.files.atomic import write_atomic
path, versions = sys.argv[1], [open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()]
i = int(sys.argv[5])
while True:
    os.write(1, b"W")                   # about to start a write
    write_atomic(path, versions[i % 2])
    i += 1
"""


def results_doc(tag: str, n: int, seed: int) -> dict:
    rng = random.Random(seed)
    return {"version": "0.1.0", "target": {"url": "http://fake:1", "api": "openai-completions", "model": tag},
            "results": [{"nodeid": f"{tag}.slo.yaml::w{i}", "verdict": rng.choice(["pass", "fail"]),
                         "ttft_ms": {s: round(rng.uniform(1, 900), 3) for s in ("mean", "p50", "p95", "p99")},
                         "violations": ["x" * rng.randrange(0, 40)]} for i in range(n)]}


def read_some(fd: int, deadline: float) -> bytes:
    left = deadline - time.monotonic()
    ready, _, _ = select.select([fd], [], [], max(left, 0))
    if not ready:
        raise AssertionError(f"writer process silent for {WAIT_S}s")
    data = os.read(fd, 1)
    if not data:
        raise AssertionError("writer process exited on its own")
    return data


def temp_files(d: Path) -> set[str]:
    return {p.name for p in d.iterdir() if p.name.startswith(".results.json.") and p.name.endswith(".tmp")}


def test_sigkill_mid_write_leaves_one_complete_version(tmp_path):
    rng = random.Random(20240611)
    docs = {"A": results_doc("A", 3000, 1), "B": results_doc("B", 2000, 2)}
    raw = {k: (json.dumps(v, indent=2) + "\n").encode() for k, v in docs.items()}
    assert len(raw["A"]) > 500_000 and len(raw["B"]) != len(raw["A"])
    src = tmp_path / "src"
    src.mkdir()
    for k, v in raw.items():
        (src / f"{k}.json").write_bytes(v)
    out = tmp_path / "out"
    results = out / "results.json"
    t0 = time.perf_counter()
    for i in range(4):  # how long one write takes here: the kill delays span it
        write_atomic(tmp_path / "timing.json", raw["AB"[i % 2]])
    write_s = (time.perf_counter() - t0) / 4
    write_atomic(results, raw["B"])  # a previous run's file
    seen = {"A": 0, "B": 0}
    left_tmp = 0
    start = time.monotonic()
    for k in range(KILLS):
        assert time.monotonic() - start < BUDGET_S, f"only {k} kills in {BUDGET_S}s"
        before = temp_files(out)
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(results), str(src / "A.json"),
                                  str(src / "B.json"), str(REPO), str(k % 2)], stdout=subprocess.PIPE)
        try:
            fd = child.stdout.fileno()
            deadline = time.monotonic() + WAIT_S
            for _ in range(rng.randrange(1, 3)):  # let 0 or 1 writes complete first
                assert read_some(fd, deadline) == b"W"
            time.sleep(rng.uniform(0, 1.3 * write_s))  # anywhere in (and just after) the write
            child.send_signal(signal.SIGKILL)
            assert child.wait(timeout=WAIT_S) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=WAIT_S)
            child.stdout.close()
        data = results.read_bytes()
        version = next((name for name, v in raw.items() if data == v), None)
        assert version is not None, f"kill {k}: torn results file ({len(data)} bytes)"
        assert json.loads(data) == docs[version]
        seen[version] += 1
        new_tmp = temp_files(out) - before
        assert len(new_tmp) <= 1, f"kill {k} left {sorted(new_tmp)}"
        left_tmp += len(new_tmp)
        for name in new_tmp:  # hidden, not *.json, never the results file
            assert name.startswith(".") and not name.endswith(".json")
    assert seen["A"] and seen["B"], seen  # both versions were really written over each other
    assert left_tmp >= KILLS // 20, f"only {left_tmp} of {KILLS} kills landed mid-write; the test lost its bite"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["results.json"]
    assert len(temp_files(out)) == left_tmp  # nothing else accumulates


def test_a_failed_write_removes_its_temp_file_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "r.json"
    write_atomic(target, '{"old": true}\n')
    with pytest.raises(TypeError):
        write_atomic(target, 12345)  # not str/bytes: fails inside the temp file
    assert target.read_text() == '{"old": true}\n'
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(OSError):
        write_atomic(tmp_path / "dir.json", "x")  # rename onto a directory fails
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.json", "r.json"]


def test_results_file_gets_normal_permissions_not_the_temp_files_0600(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.json", "{}")
        assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644
        kept = tmp_path / "kept.json"
        kept.write_text("{}")
        kept.chmod(0o640)
        write_atomic(kept, '{"a": 1}')
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640  # an existing file keeps its mode
    finally:
        os.umask(old)
