"""Baseline entries matched across a rootdir change (``files.baseline_match``): exact keys first,
a unique file path suffix otherwise, an ambiguous suffix never; and ``compare`` using it."""
from __future__ import annotations

import math
import random

from pytest_llm_latency.cli.main import main
from pytest_llm_latency.files import baseline as bfile
from pytest_llm_latency.files.baseline_match import (AMBIGUOUS, EXACT, NONE, SUFFIX, describe, fits,
                                                     match_all, match_entry, split_key)

SAVED = "suite/chat.slo.yaml::chat::chat"
MOVED = "a/suite/chat.slo.yaml::chat::chat"


def test_split_key_drops_leading_dotdot_and_keeps_the_in_file_part():
    assert split_key("../a/suite/t.py::test_g[x::y]::chat") == (("a", "suite", "t.py"), "test_g[x::y]::chat")
    assert split_key("./t.py::test_g::chat") == (("t.py",), "test_g::chat")


def test_fits_only_when_the_paths_differ_by_leading_folders_and_the_rest_is_the_same():
    assert fits(SAVED, MOVED) and fits(MOVED, SAVED)
    assert fits("suite/t.py::test_g::chat", "../x/suite/t.py::test_g::chat")
    assert not fits(SAVED, "a/other/chat.slo.yaml::chat::chat")          # another folder
    assert not fits(SAVED, "a/suite/chat.slo.yaml::chat::agent")         # another workload
    assert not fits(SAVED, "a/suite/chat.slo.yaml::other::chat")         # another test in the file
    assert not fits("suite/t.py::test_g::chat", "xsuite/t.py::test_g::chat")  # components, not characters
    assert not fits("t::chat", "u::chat")


def test_exact_key_wins_over_a_suffix_fit():
    m = match_entry([SAVED, MOVED], MOVED)
    assert (m.key, m.how) == (MOVED, EXACT) and describe(m, MOVED) is None


def test_a_unique_suffix_fit_matches_and_the_note_names_both_node_ids():
    m = match_entry([SAVED, "suite/other.slo.yaml::chat::chat"], MOVED, current=[MOVED])
    assert (m.key, m.how) == (SAVED, SUFFIX)
    note = describe(m, MOVED)
    assert "saved as 'suite/chat.slo.yaml::chat'" in note and "node id is 'a/suite/chat.slo.yaml::chat'" in note
    assert "rootdir" in note


def test_two_saved_entries_fitting_one_test_match_neither_and_say_so():
    saved = ["x/suite/chat.slo.yaml::chat::chat", "y/suite/chat.slo.yaml::chat::chat"]
    m = match_entry(saved, "suite/chat.slo.yaml::chat::chat")
    assert (m.key, m.how) == (None, AMBIGUOUS) and m.candidates == tuple(saved)
    note = describe(m, "suite/chat.slo.yaml::chat::chat")
    assert "2 baseline entries fit" in note and "'x/suite/chat.slo.yaml::chat'" in note and "unique" in note


def test_one_saved_entry_fitting_two_tests_of_the_run_matches_neither():
    current = ["x/suite/chat.slo.yaml::chat::chat", "y/suite/chat.slo.yaml::chat::chat"]
    m = match_entry([SAVED], current[0], current=current)
    assert (m.key, m.how) == (None, AMBIGUOUS) and m.rivals == (current[1],)
    assert "'y/suite/chat.slo.yaml::chat'" in describe(m, current[0])


def test_no_fit_is_none_without_a_note():
    m = match_entry([SAVED], "suite/other.slo.yaml::chat::chat")
    assert (m.key, m.how) == (None, NONE) and describe(m, "x") is None


def test_match_all_pairs_exact_first_then_unique_suffixes():
    saved = ["t.py::test_a::chat", "suite/t.py::test_b::chat", "a/c.py::test_c::chat", "b/c.py::test_c::chat"]
    current = ["t.py::test_a::chat", "x/suite/t.py::test_b::chat", "c.py::test_c::chat", "new.py::t::chat"]
    got = {k: (m.key, m.how) for k, m in match_all(saved, current).items()}
    assert got == {"t.py::test_a::chat": ("t.py::test_a::chat", EXACT),
                   "x/suite/t.py::test_b::chat": ("suite/t.py::test_b::chat", SUFFIX),
                   "c.py::test_c::chat": (None, AMBIGUOUS),
                   "new.py::t::chat": (None, NONE)}


def _samples(seed: int) -> dict:
    rng = random.Random(seed)
    ttft = [40 * math.exp(rng.gauss(0, 0.05)) for _ in range(60)]
    tpot = [7 * math.exp(rng.gauss(0, 0.03)) for _ in range(60)]
    return bfile.encode_samples({"ttft": ttft, "tpot": tpot, "e2e": [a + 15 * b for a, b in zip(ttft, tpot)]})


def _write(path, tests: dict) -> str:
    bfile.save(path, bfile.make_document({k: {"samples": v} for k, v in tests.items()}, {"model": "m"}))
    return str(path)


def test_compare_matches_across_a_rootdir_change_and_still_refuses_no_test_in_common(tmp_path, capsys):
    a = _write(tmp_path / "a.json", {SAVED: _samples(1)})
    b = _write(tmp_path / "b.json", {MOVED: _samples(2)})
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert "0 regression(s) in 4 comparison(s) of 1 test(s)" in out
    assert f"note: {MOVED}: compared with the baseline entry saved as 'suite/chat.slo.yaml::chat'" in out
    assert "new: not in the baseline" not in out and "missing:" not in out
    amb = _write(tmp_path / "amb.json", {"x/" + SAVED: _samples(1), "y/" + SAVED: _samples(3)})
    assert main(["compare", amb, _write(tmp_path / "c.json", {SAVED: _samples(2)})]) == 2
    err = capsys.readouterr().err
    assert "no test in common" in err and "not matched across a rootdir change: 2 baseline entries fit" in err
