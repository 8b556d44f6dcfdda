"""The latency table and pytest agree: a test that could not be judged is a pytest
*error* (as a failed fixture is), a server that fails requests is a *failure*.  Notes
show on every run; the user's own ``llm.*`` properties survive."""
import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script
from pytest_llm_latency.targets.process import free_port

YAML = ("workloads:\n  w: {class: custom, prompt_tokens: 16, output_tokens: 4, samples: 20, warmup: 0, "
        "slo: {ttft_p50: 1s}}\n")
MARKED = """
import pytest

@pytest.mark.llm_slo(workload="custom", prompt_tokens=16, output_tokens=4, samples=20, warmup=0, ttft_p50="1s")
def test_m():
    pass
"""
FIXTURE = """
def test_f(llm_latency):
    r = llm_latency.measure(workload="custom", prompt_tokens=16, output_tokens=4, samples=20, warmup=0)
    assert r.ttft.p50 < 1000
"""


def table_verdicts(r) -> list[str]:
    """The verdict column of the latency table (rows end at the first indented reason line)."""
    out = r.stdout.lines
    start = next(i for i, ln in enumerate(out) if ln.startswith("test ") and "verdict" in ln)
    rows = []
    for ln in out[start + 2:]:
        if not ln or ln.startswith(("  ", "=", "notes", "times in ms")):
            break
        rows.append(ln.split()[-2] if ln.endswith("*") else ln.split()[-1])
    return rows


@pytest.mark.parametrize("form", ["yaml", "marker", "fixture"])
def test_nothing_listening_is_a_pytest_error_and_an_error_in_the_table(pytester, form):
    """Old code: the table said ERROR while pytest counted 1 failed."""
    if form == "yaml":
        pytester.makefile(".slo.yaml", w=YAML)
    else:
        pytester.makepyfile(MARKED if form == "marker" else FIXTURE)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url=http://127.0.0.1:{free_port()}",
                           "--llm-latency-connect-timeout=2", "--junitxml=j.xml", "--llm-latency-json=r.json")
    r.assert_outcomes(errors=1)
    assert table_verdicts(r) == ["ERROR"]
    r.stdout.fnmatch_lines(["*could not be judged*", "*cannot connect*"])
    (res,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert res["verdict"] == "error"
    assert r.ret == pytest.ExitCode.TESTS_FAILED


def test_a_configuration_error_in_measure_is_a_pytest_error(pytester):
    pytester.makepyfile("def test_c(llm_latency):\n    llm_latency.measure(workload='chatt')\n")
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1",
                           plugins=[FakeServerPlugin(Script())])
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines(["*configuration error*unknown workload class 'chatt'*"])


@pytest.mark.parametrize("form", ["yaml", "marker"])
def test_server_failing_requests_is_a_pytest_failure_and_a_fail_in_the_table(pytester, form):
    if form == "yaml":
        pytester.makefile(".slo.yaml", w=YAML)
    else:
        pytester.makepyfile(MARKED)
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1", "--junitxml=j.xml",
                           plugins=[FakeServerPlugin(Script(fail_every=5))])
    r.assert_outcomes(failed=1)
    assert table_verdicts(r) == ["FAIL"]
    r.stdout.fnmatch_lines(["*server failed: 4 of 20 requests failed (http_500 x4)*"])
    case = next(ET.parse(pytester.path / "j.xml").getroot().iter("testcase"))
    assert case.find("failure") is not None


def test_notes_reach_warnings_table_json_and_junit(pytester):
    pytester.makefile(".slo.yaml", w=YAML.replace("warmup: 0,", "warmup: 0, max_error_rate: 0.25,"))
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1", "--junitxml=j.xml",
                           "--llm-latency-json=r.json", plugins=[FakeServerPlugin(Script(fail_every=5))])
    r.assert_outcomes(passed=1, warnings=1)
    r.stdout.fnmatch_lines(["*warnings summary*", "*LatencyWarning: w: 4 of 20 requests failed*"])
    r.stdout.fnmatch_lines(["*w.slo.yaml::w*PASS [*]", "notes ([*]):", "  w.slo.yaml::w: 4 of 20 requests failed*"])
    (res,) = json.loads((pytester.path / "r.json").read_text())["results"]
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").getroot().iter("property")}
    assert props["llm.notes.1"] == res["notes"][0] and "allowed by max_error_rate" in res["notes"][0]


def test_the_users_own_llm_properties_survive(pytester):
    """Old code: record() removed every llm.* property, the user's included."""
    pytester.makepyfile("""
        def test_p(llm_latency, record_property):
            record_property("llm.mine", 1)
            llm_latency.measure(workload="custom", prompt_tokens=16, output_tokens=4, samples=20, warmup=0)
            record_property("llm.after", "x")
            llm_latency.measure(workload="custom", prompt_tokens=16, output_tokens=4, samples=20, warmup=0)
    """)
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1", "--junitxml=j.xml",
                           plugins=[FakeServerPlugin(Script())])
    r.assert_outcomes(passed=1)
    names = [p.get("name") for p in ET.parse(pytester.path / "j.xml").getroot().iter("property")]
    assert names.count("llm.mine") == 1 and names.count("llm.after") == 1
    assert names.count("llm.verdict") == 1 and names.count("llm.2.verdict") == 1  # ours, not duplicated


def test_under_xdist_an_unjudgeable_test_is_still_an_error(pytester):
    pytest.importorskip("xdist")
    pytester.makefile(".slo.yaml", w=YAML)
    pytester.makefile(".slo.yaml", n=YAML.replace("warmup: 0,", "warmup: 0, max_error_rate: 0.5,")
                      .replace("ttft_p50: 1s", "ttft_p50: 10s"))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--llm-latency-json=r.json",
                                      f"--llm-latency-url=http://127.0.0.1:{free_port()}", timeout=120)
    r.assert_outcomes(errors=2)
    results = json.loads((pytester.path / "r.json").read_text())["results"]
    assert sorted(x["verdict"] for x in results) == ["error", "error"]


def test_fixture_stops_with_the_cause_when_the_server_fails_before_any_sample(pytester):
    """A server failing during prompt preparation is a fail; measure() stops the test there with
    the cause, instead of handing back an empty result whose .ttft raises 'empty sample'."""
    pytester.makepyfile(test_f="""
        def test_f(llm_latency):
            llm_latency.measure(workload="custom", prompt_tokens=16, output_tokens=4, samples=3, warmup=0,
                                url="reference://h100-sxm/llama-3.1-8b?time_scale=0&fault=http_503")
            raise AssertionError("not reached")
    """)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "HTTP 503" in out and "not reached" not in out and "empty sample" not in out
