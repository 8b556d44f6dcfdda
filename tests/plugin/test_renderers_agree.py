"""One run, five renderings of its one result document: the JSON file, JUnit properties, the
terminal table, the HTML page and the GitHub step summary agree on every figure and verdict
they show.  Expected cells are formatted here from the JSON's numbers, not by the renderers'
own helpers, so a renderer that read another figure (or a stale one) would differ."""
from __future__ import annotations

import html as html_lib
import json
import re
import xml.etree.ElementTree as ET
from importlib import resources

import pytest

jsonschema = pytest.importorskip("jsonschema")

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05"
TESTS = f"""
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=8, samples=5, warmup=0,
                     ttft_p50="10s", ttft_p95=None, tpot_p95=None, url={REF!r})
def test_meets():
    pass

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=8, samples=5, warmup=0,
                     ttft_p50="0.001ms", ttft_p95=None, tpot_p95=None, url={REF!r})
def test_misses():
    pass

def test_two_workloads(llm_latency):
    llm_latency.measure("chat", prompt_tokens=32, output_tokens=8, samples=4, warmup=0, ttft_p50="10s",
                        ttft_p95=None, tpot_p95=None, url={REF!r})
    llm_latency.measure("chat", prompt_tokens=128, output_tokens=8, samples=4, warmup=0, ttft_p50="10s",
                        ttft_p95=None, tpot_p95=None, url={REF!r})
"""


def _f(v, digits=1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _junit(path) -> dict[str, dict[str, str]]:
    """testcase name -> its properties; plus ``<name>:outcome`` from the XML."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        props["outcome"] = "fail" if case.find("failure") is not None else \
            "error" if case.find("error") is not None else "pass"
        out[case.get("name")] = props
    return out


def test_json_junit_terminal_html_and_step_summary_agree(pytester, monkeypatch):
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(test_agree=TESTS)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--llm-latency-confidence=null",
                                      "--llm-latency-json=r.json", "--llm-latency-html=r.html",
                                      "--junitxml=j.xml", timeout=300)
    r.assert_outcomes(passed=2, failed=1)
    doc = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(doc, json.loads(resources.files("pytest_llm_latency").joinpath(
        "data/results.schema.json").read_text()))
    results = {x["nodeid"]: x for x in doc["results"]}
    assert set(results) == {"test_agree.py::test_meets", "test_agree.py::test_misses",
                            "test_agree.py::test_two_workloads", "test_agree.py::test_two_workloads#2"}
    assert results["test_agree.py::test_misses"]["verdict"] == "fail"
    assert {x["verdict"] for k, x in results.items() if "misses" not in k} == {"pass"}

    junit = _junit(pytester.path / "j.xml")
    terminal = r.stdout.lines
    page = html_lib.unescape((pytester.path / "r.html").read_text())
    step = summary.read_text()
    for nodeid, x in results.items():
        name, _, k = nodeid.split("::")[1].partition("#")
        pre = "llm." if not k else f"llm.{k}."
        props = junit[name]
        # JUnit: the verdict, every statistic and every part's scalar figure
        assert props[pre + "verdict"] == x["verdict"] and props[pre + "nodeid"] == nodeid
        assert int(props[pre + "n"]) == x["n"]
        if not k:
            assert props["outcome"] == ("fail" if x["verdict"] == "fail" else "pass")
        for metric in ("ttft_ms", "ttfo_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tps"):
            for stat, v in (x.get(metric) or {}).items():
                got = float(props[f"{pre}{metric}.{stat}"])
                assert got == (float("inf") if v is None else pytest.approx(v)), (nodeid, metric, stat)
        for part in ("measurement", "load", "client", "server", "prefix_cache", "cold_start", "roofline"):
            for key, v in (x.get(part) or {}).items():
                if isinstance(v, (int, float, str)) and not isinstance(v, bool):
                    assert props[f"{pre}{part}.{key}"] == str(v), (nodeid, part, key)
        for i, text in enumerate(x["violations"], 1):
            assert props[f"{pre}violation.{i}"] == text
        # terminal: the table's row, cell by cell
        cells = [nodeid, str(x["n"]), _f(x["ttft_ms"]["p50"]), _f(x["ttft_ms"]["p95"]), _f(x["tpot_ms"]["p50"], 2),
                 _f(x["tpot_ms"]["p95"], 2), _f(1000.0 / x["tpot_ms"]["p50"] if x["tpot_ms"]["p50"] else None),
                 _f(x["output_tps"]["p50"]),
                 x["verdict"].upper() + (" *" if x["notes"] else "")]
        (line,) = [ln for ln in terminal if ln.startswith(nodeid + " ")]
        assert re.split(r"\s{2,}", line.strip()) == cells
        # HTML: the same row in the summary table
        assert "".join(f"<td>{c}</td>" for c in cells[1:-1]) in page, nodeid
        assert f">{cells[-1]}</span></td></tr>" in page
        # step summary: verdict, n and the three figures it shows
        verdict = {"pass": "✅ pass", "fail": "❌ fail"}[x["verdict"]]
        row = (f"| {nodeid} | {x['workload']} | {verdict} | {x['n']} | {_f(x['ttft_ms']['p95'])} | "
               f"{_f(x['tpot_ms']['p50'])} | {_f(x['e2e_ms']['p95'])} |")
        assert row in step, (row, step)
        for text in x["violations"]:
            assert text in line or text in "\n".join(terminal)
            assert html_lib.escape(text, quote=False) in html_lib.escape(page, quote=False)
            assert text.replace("|", "\\|") in step or text in step
