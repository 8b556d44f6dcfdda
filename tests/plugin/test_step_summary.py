"""``$GITHUB_STEP_SUMMARY``: a Markdown table of every latency test, appended (the file's
earlier content kept, a second run adds a second section), with the baseline status and
the regression message of a failed gate."""

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.5&jitter=0.05"
TEST = """
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=16, samples=30, warmup=1,
                     ttft_p95="5s", tpot_p95=None, url={url!r}, confidence=None)  # 30 can't show a p95 at 95%
def test_gate():
    pass

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=4, samples=5, warmup=0,
                     ttft_p50="0.001ms", ttft_p95=None, tpot_p95=None, url={url!r})
def test_too_strict():
    pass
"""


def test_step_summary_is_appended_with_verdicts_and_regressions(pytester, monkeypatch):
    summary = pytester.path / "summary.md"
    summary.write_text("## Build\nearlier step's text")          # no trailing newline
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(test_gate=TEST.format(url=REF + "&jitter_seed=1"))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-save-baseline=b.json", timeout=300)
    r.assert_outcomes(passed=1, failed=1)
    first = summary.read_text()
    assert first.startswith("## Build\nearlier step's text\n### LLM latency: 1 of 2 passed\n\n| test | workload |")
    assert "| test_gate.py::test_gate | chat | ✅ pass | 30 |" in first
    assert "| test_gate.py::test_too_strict | chat | ❌ fail | 5 |" in first and "> budget 0.001 ms" in first
    # a candidate with a 15% slower decode: the regression message lands in the table
    pytester.makepyfile(test_gate=TEST.format(url=REF + "&jitter_seed=2&decode_efficiency=0.6087"))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-baseline=b.json",
                                      "test_gate.py::test_gate", timeout=300)
    r.assert_outcomes(failed=1)
    text = summary.read_text()
    assert text.startswith(first)                                # appended, never overwritten
    second = text[len(first):]
    assert second.startswith("### LLM latency: 0 of 1 passed")
    row = next(line for line in second.splitlines() if line.startswith("| test_gate.py::test_gate |"))
    assert "❌ fail" in row and "| regression |" in row and "TPOT p50 +" in row and "> tolerance 5%" in row
    assert not list(pytester.path.glob(".summary.md.*.tmp"))     # the atomic write left no temp file


def test_no_variable_no_file(pytester, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makepyfile(test_gate=TEST.format(url=REF).split("@pytest.mark.llm_slo(workload=\"chat\", "
                                                             "prompt_tokens=64, output_tokens=4")[0])
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    r.assert_outcomes(passed=1)
    assert not list(pytester.path.glob("*.md"))
