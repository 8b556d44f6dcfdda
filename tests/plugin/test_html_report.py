"""``--llm-latency-html`` (also env and ini) through the plugin: the page and the JSON carry
each request and the CDF samples, also from xdist workers and for tests that measure twice."""
import json
import re

import pytest

FAST = "reference://h100-sxm/llama-3.1-8b?time_scale=0"
# a handful of samples to exercise the report: the point estimate (no sample size up to 4 can
# decide a p50 at the default 95%: 0.5^4 > 5%, a collection error)
FILE = ("workloads: {%s: {class: custom, prompt_tokens: 16, output_tokens: 8, samples: %d, warmup: 0, "
        "confidence: null, slo: {ttft_p50: 1s}}}\n")


def series_counts(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<svg [^>]*data-series="(\d+)"', html)]


@pytest.mark.parametrize("how", ["cli", "env", "ini"])
def test_html_from_cli_env_or_ini(pytester, monkeypatch, how):
    pytester.makefile(".slo.yaml", w=FILE % ("w", 5))
    args = ["-p", "no:cacheprovider", f"--llm-latency-url={FAST}", "--llm-latency-json=r.json"]
    if how == "cli":
        args.append("--llm-latency-html=out/report.html")
    elif how == "env":
        monkeypatch.setenv("LLM_LATENCY_HTML", "out/report.html")
    else:
        pytester.makeini("[pytest]\nllm_latency_html = out/report.html\n")
    (pytester.path / "out").mkdir()
    r = pytester.runpytest_subprocess(*args, timeout=120)
    r.assert_outcomes(passed=1)
    html = (pytester.path / "out" / "report.html").read_text()
    # TTFT, TPOT, ITL, timeline (requests + the reference target's queue, running, KV gauges); no roofline asked
    assert series_counts(html) == [1, 1, 1, 4, 0]
    result = json.loads((pytester.path / "r.json").read_text())["results"][0]
    assert [q["status"] for q in result["requests"]] == ["ok"] * 5
    assert result["cdf"]["ttft_ms"]["n"] == 5 and len(result["cdf"]["ttft_ms"]["points"]) == 5
    # the page's TTFT dots are the JSON's (and the terminal's) percentiles
    shown = float(re.search(r'class="values"[^>]*>p50 ([\d.]+)', html).group(1))   # the first chart: TTFT
    assert shown == pytest.approx(result["ttft_ms"]["p50"], rel=0.01)


def test_detail_reaches_the_controller_under_xdist_and_per_measurement(pytester):
    pytest.importorskip("xdist")
    pytester.makefile(".slo.yaml", a=FILE % ("a", 3), b=FILE % ("b", 4))
    pytester.makepyfile(test_two="""
def test_two(llm_latency):
    llm_latency.measure("custom", prompt_tokens=16, output_tokens=8, samples=2, warmup=0)
    llm_latency.measure("custom", prompt_tokens=16, output_tokens=8, samples=6, warmup=0)
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", f"--llm-latency-url={FAST}",
                                      "--llm-latency-json=r.json", "--llm-latency-html=r.html", "--junitxml=j.xml",
                                      timeout=120)
    r.assert_outcomes(passed=3)
    results = {res["nodeid"]: res for res in json.loads((pytester.path / "r.json").read_text())["results"]}
    assert {k: len(v["requests"]) for k, v in results.items()} == {
        "a.slo.yaml::a": 3, "b.slo.yaml::b": 4, "test_two.py::test_two": 2, "test_two.py::test_two#2": 6}
    html = (pytester.path / "r.html").read_text()
    assert html.count('<section class="card test"') == 4
    assert "send_ms" not in (pytester.path / "j.xml").read_text()  # per-request data stays out of JUnit


def test_a_report_that_cannot_be_written_or_rendered_is_named_and_the_json_survives(pytester):
    """An unwritable path (OSError) and a bug while rendering both give a named message and an
    internal-error exit status, never an INTERNALERROR traceback; the JSON is still written."""
    pytester.makefile(".slo.yaml", w=FILE % ("w", 3))
    pytester.makeconftest(
        "import pytest_llm_latency.plugin.report.html as h\n"
        "def boom(doc):\n    raise ValueError('chart exploded')\n"
        "h.render = boom\n")
    args = ["-p", "no:cacheprovider", f"--llm-latency-url={FAST}", "--llm-latency-json=r.json"]
    r = pytester.runpytest_subprocess(*args, "--llm-latency-html=report.html", timeout=120)
    r.stdout.fnmatch_lines(["*could not write report.html: ValueError: chart exploded (a bug*"])
    assert "INTERNALERROR" not in r.stdout.str()
    assert r.ret == pytest.ExitCode.INTERNAL_ERROR
    assert json.loads((pytester.path / "r.json").read_text())["results"][0]["n"] == 3
    r = pytester.runpytest_subprocess(*args, "--llm-latency-html=no/such/dir/report.html", timeout=120)
    r.stdout.fnmatch_lines(["*could not write no/such/dir/report.html: *"])
    assert r.ret == pytest.ExitCode.INTERNAL_ERROR
