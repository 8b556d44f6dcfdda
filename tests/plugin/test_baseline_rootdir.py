"""A baseline saved under one rootdir is still compared under another (issue 25, defect 3).

No ini file, tests outside the working folder: pytest's rootdir is the common ancestor of the
invocation folder and the arguments, and an option's path value that exists counts as an
argument -- so ``--llm-latency-baseline PATH`` (with a space) moves the rootdir, and the node id
``suite/test_gate.py::test_gate`` saved becomes ``a/suite/test_gate.py::test_gate``."""
import json

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.5&jitter=0.05"

TEST = """
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=8, samples=20, warmup=1,
                     ttft_p95=None, tpot_p95=None, url={url!r})
def test_gate():
    pass
"""


def _layout(pytester, monkeypatch):
    suite = pytester.path / "a" / "suite"
    suite.mkdir(parents=True)
    work = pytester.path / "a" / "b" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return suite, work


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_a_baseline_saved_under_another_rootdir_is_matched_by_file_path_and_said(pytester, monkeypatch):
    suite, work = _layout(pytester, monkeypatch)
    (suite / "test_gate.py").write_text(TEST.format(url=REF + "&jitter_seed=1"))
    base = pytester.path / "base.json"
    r = run(pytester, "../../suite/test_gate.py", f"--llm-latency-save-baseline={base}")
    r.assert_outcomes(passed=1)
    (saved,) = json.loads(base.read_text())["tests"]
    assert saved == "suite/test_gate.py::test_gate::chat"      # rootdir a/: the invocation folder's and the suite's
    (suite / "test_gate.py").write_text(TEST.format(url=REF + "&jitter_seed=2"))
    # the baseline path as a separate argument: it exists, so pytest counts it when it picks the rootdir
    r = run(pytester, "../../suite/test_gate.py", "--llm-latency-baseline", str(base),
            f"--llm-latency-json={work / 'r.json'}")
    r.assert_outcomes(passed=1)
    (res,) = json.loads((work / "r.json").read_text())["results"]
    assert res["nodeid"] == "a/suite/test_gate.py::test_gate"   # the rootdir did move
    assert res["baseline"]["status"] in ("ok", "improvement"), res["notes"]
    # compared (20 samples are too few for the p95's tail: that one is skipped, as in any run)
    assert {c["key"] for c in res["baseline"]["comparisons"]} == {"ttft_p50", "tpot_p50", "e2e_p50"}
    note = ("compared with the baseline entry saved as 'suite/test_gate.py::test_gate', this run's node id is "
            "'a/suite/test_gate.py::test_gate'")
    assert any(n.startswith(note) for n in res["notes"]), res["notes"]
    assert note in r.stdout.str()                                # a LatencyWarning on the test
    assert not any(n.startswith("new:") for n in res["notes"]), res["notes"]


def test_an_ambiguous_suffix_is_not_matched_and_says_which_entries_fitted(pytester, monkeypatch):
    suite, work = _layout(pytester, monkeypatch)
    (suite / "test_gate.py").write_text(TEST.format(url=REF + "&jitter_seed=3"))
    base = pytester.path / "base.json"
    r = run(pytester, "../../suite/test_gate.py", f"--llm-latency-save-baseline={base}")
    r.assert_outcomes(passed=1)
    doc = json.loads(base.read_text())
    (entry,) = doc["tests"].values()
    doc["tests"] = {"x/suite/test_gate.py::test_gate::chat": entry, "y/suite/test_gate.py::test_gate::chat": entry}
    base.write_text(json.dumps(doc))
    r = run(pytester, "../../suite/test_gate.py", f"--llm-latency-baseline={base}")
    r.assert_outcomes(passed=1)
    out = r.stdout.str()
    assert "not matched across a rootdir change: 2 baseline entries fit its file path suffix" in out
    assert "new: no baseline entry for this test, nothing to compare" in out
