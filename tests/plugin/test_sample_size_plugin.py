"""Issue 25, defects 1 and 2 through pytest, on the scripted fake server (virtual time):

* a fixed sample that could never pass (a p95 of 20 at 95%, ``inconclusive: fail``) is refused
  at collection for a YAML file and a marker, and by ``measure()`` -- before any request;
* ``samples: auto`` stops at the first budget decided fail and reports the others as not
  decided (asserted on the sample count and the text, never on time)."""
import json
from importlib import resources

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script

YAML = """
workloads:
  chat:
    class: chat
    prompt_tokens: 32
    output_tokens: 8
    samples: 20
    warmup: 0
"""

MARKED = """
import pytest

@pytest.mark.llm_slo("chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0)
def test_chat_slo():
    pass
"""

MEASURED = """
def test_measured(llm_latency):
    llm_latency.measure("chat", prompt_tokens=32, output_tokens=8, samples=20, warmup=0)
"""

REFUSED = ("*budget ttft_p95 (class default): 20 samples can never pass a p95 at 95% confidence (its upper bound "
           "needs >= 59 samples: 0.95^59 <= 0.05), so with inconclusive: fail the test could only fail: use "
           "samples: auto, samples: 59 or more, confidence: null (point estimate) or inconclusive: warn*")


def completions(script: Script) -> int:
    return sum(1 for r in script.requests if "completions" in str(r))


def run(pytester, script, *args):
    return pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-url=http://fake:1",
                              "--llm-latency-json=r.json", *args, plugins=[FakeServerPlugin(script)])


def test_a_yaml_workload_that_could_never_pass_is_a_collection_error(pytester):
    pytester.makefile(".slo.yaml", chat=YAML)
    script = Script(ttft_ms=20, tpot_ms=5)  # far inside every budget: it would still only fail
    r = run(pytester, script)
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines(["*ERROR collecting chat.slo.yaml*", "*chat.slo.yaml:*workloads.chat.samples: " + REFUSED])
    assert script.requests == []  # before any request


def test_a_marker_that_could_never_pass_is_a_usage_error(pytester):
    pytester.makepyfile(MARKED)
    script = Script(ttft_ms=20, tpot_ms=5)
    r = run(pytester, script)
    assert r.ret == 4  # pytest.ExitCode.USAGE_ERROR
    assert "test_chat_slo @llm_slo: budget ttft_p95" in r.stderr.str()
    r.stderr.fnmatch_lines([REFUSED])
    assert script.requests == []


def test_measure_that_could_never_pass_is_a_configuration_error(pytester):
    pytester.makepyfile(MEASURED)
    script = Script(ttft_ms=20, tpot_ms=5)
    r = run(pytester, script)
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines(["*configuration error: *test_measured measure(): " + REFUSED])
    assert completions(script) == 0


def test_the_ways_out_run(pytester):
    pytester.makefile(".slo.yaml", chat=YAML.replace("samples: 20", "samples: 20\n    inconclusive: warn"))
    run(pytester, Script(ttft_ms=20, tpot_ms=5)).assert_outcomes(passed=1, warnings=2)  # inconclusive: two notes
    pytester.makefile(".slo.yaml", chat=YAML.replace("samples: 20", "samples: 60"))
    run(pytester, Script(ttft_ms=20, tpot_ms=5)).assert_outcomes(passed=1)  # 60 below the budget: a pass


AUTO = """
import pytest

@pytest.mark.llm_slo(workload="custom", prompt_tokens=32, output_tokens=8, samples="auto", warmup=0,
                     ttft_p95="60s", tpot_p95="5ms")
def test_auto():
    pass
"""


def test_samples_auto_stops_at_the_first_fail_and_reports_the_rest_as_not_decided(pytester):
    # TPOT 10 ms against 5 ms: a fail at the first look (min_samples 10); TTFT 100 ms against 60 s
    # would pass, but not before 62 samples (a p95 at 95%): it is left not decided, not a violation
    pytester.makepyfile(AUTO)
    r = run(pytester, Script(ttft_ms=100, tpot_ms=10))
    r.assert_outcomes(failed=1)
    doc = json.loads((pytester.path / "r.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json.loads(resources.files("pytest_llm_latency").joinpath(
        "data/results.schema.json").read_text()))  # not_decided and stopped_by are in the shipped schema
    res = doc["results"][0]
    assert res["n"] == 10  # 62 before the fix: sampling went on until TTFT p95 passed
    assert res["measurement"]["stop_reason"] == "tpot_p95 failed at 10 samples: sampling stopped; not decided: ttft_p95"
    assert res["bounds"]["tpot_p95"]["status"] == "fail"
    assert (res["bounds"]["ttft_p95"]["status"], res["bounds"]["ttft_p95"]["stopped_by"]) == ("not_decided",
                                                                                            "tpot_p95")
    assert len(res["violations"]) == 1 and res["violations"][0].startswith("TPOT p95")
    out = r.stdout.str()
    assert "TTFT p95 100.0 ms (95% bounds 100.0..inf ms) -- not decided: sampling stopped when TPOT p95 failed " \
           "at 10 samples (budget 60000 ms)" in out  # the failure message
    assert "ttft_p95 <= 60000 ms: 100.00 (95% bounds 100.00..inf ms) -> NOT DECIDED at n=10 (sampling stopped " \
           "when tpot_p95 failed)" in out  # the terminal's bounds
    assert "inconclusive" not in out
