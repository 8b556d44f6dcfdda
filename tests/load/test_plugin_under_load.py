"""Under load through the plugin (pytester, a subprocess run): the server's view and the
diagnosis reach the JSON (with ``metrics_timeline``, schema-valid), JUnit and the HTML report;
a marker sets load keys; a YAML ``sweep:`` workload runs; and the ``sweep`` subcommand."""
import json
import re
import xml.etree.ElementTree as ET
from importlib import resources

import pytest

from pytest_llm_latency.cli.main import main

QUEUE = "reference://h100-sxm/llama-3.1-8b?max_num_seqs=8&time_scale=0.5"
YAML = """
workloads:
  chat:
    class: chat
    concurrency: 32
    samples: 24
    inconclusive: warn   # 24 samples cannot show a p95 met at 95% (59 can): the TTFT miss is still a fail
    warmup: 2
"""


def test_queueing_through_the_plugin_reaches_json_junit_and_html(pytester):
    jsonschema = pytest.importorskip("jsonschema")
    pytester.makefile(".slo.yaml", chat=YAML)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--llm-latency-url={QUEUE}", "--junitxml=j.xml",
                                      "--llm-latency-json=r.json", "--llm-latency-html=r.html", timeout=180)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*TTFT p95 * > budget 500 ms*", "*cause: queueing, not the model — * ms of the * ms "
                            "mean TTFT was spent in the server's queue (max waiting *"])
    doc = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(doc, json.loads(resources.files("pytest_llm_latency").joinpath(
        "data/results.schema.json").read_text()))
    res = doc["results"][0]
    assert res["causes"] and res["causes"][0].startswith("cause: queueing")
    assert res["server"]["server_waiting_max"] > 0 and res["load"]["load_mode"] == "closed"
    assert res["load"]["throughput_rps"] > 0 and 0 <= res["load"]["goodput_fraction"] <= 1
    waiting = res["server"]["metrics_timeline"]["vllm:num_requests_waiting"]
    assert len(waiting) >= 3 and max(v for _, v in waiting) > 0
    assert all(a[0] <= b[0] for a, b in zip(waiting, waiting[1:]))  # time-ordered, ms on the requests' axis
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").getroot().iter("property")}
    assert props["llm.cause.1"].startswith("cause: queueing") and float(props["llm.server.server_waiting_max"]) > 0
    assert "metrics_timeline" not in (pytester.path / "j.xml").read_text()  # the series stays out of JUnit
    html = (pytester.path / "r.html").read_text()
    assert re.search(r"queue depth", html)   # the timeline chart draws the server's gauges
    assert "cause: queueing, not the model" in html


def test_marker_load_keys_and_a_yaml_sweep(pytester):
    pytester.makefile(".slo.yaml", sw="""
workloads:
  sw:
    prompt_tokens: 64
    output_tokens: 32
    requests: 30
    warmup: 2
    arrival: constant
    slo: {ttft_p95: 30ms}
    rate_sweep: {rate_min: 8, rate_max: 120, max_steps: 5}
""")
    pytester.makepyfile(test_m="""
import pytest

@pytest.mark.llm_slo(workload="custom", prompt_tokens=16, output_tokens=8, rate=40, requests=20, warmup=0,
                     arrival="poisson", ttft_p95="5s")
def test_open_loop():
    pass
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-url=reference://h100-sxm/llama-3.1-8b?"
                                      "max_num_seqs=4&time_scale=0.5", "--llm-latency-json=r.json", timeout=180)
    r.assert_outcomes(passed=2)
    results = {x["nodeid"]: x for x in json.loads((pytester.path / "r.json").read_text())["results"]}
    assert results["test_m.py::test_open_loop"]["load"]["load_mode"] == "open"
    assert results["test_m.py::test_open_loop"]["load"]["offered_rate_rps"] == 40
    assert results["test_m.py::test_open_loop"]["n"] == 20  # requests: 20
    sweep = results["sw.slo.yaml::sw"]["load"]
    assert 8 < sweep["rate_sweep_capacity_rps"] < 120 and sweep["rate_sweep_steps"] <= 5


def test_sweep_subcommand_json(capsys):
    code = main(["rate-sweep", "--url", "reference://h100-sxm/llama-3.1-8b?max_num_seqs=4&time_scale=0.5",
                 "--prompt-tokens", "64", "--output-tokens", "32", "--slo", "ttft_p95=30ms", "--arrival", "constant",
                 "--rate-min", "8", "--rate-max", "120", "--max-steps", "4", "--requests", "24", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "pass"
    assert len(out["steps"]) == 4 and out["steps"][0]["rate_rps"] == 8 and out["steps"][-1]["rate_rps"] == 120
    assert out["capacity_rps"] == max(s["rate_rps"] for s in out["steps"] if s["passed"])
    assert main(["rate-sweep", "--url", "http://x", "--class", "chat", "--rate-min", "5", "--rate-max", "1"]) == 2
    assert "rate_min (5) must be below rate_max (1)" in capsys.readouterr().err


def test_sweep_subcommand_over_two_worker_processes(capsys):
    """``--workers 2``: every step an open loop sharded over two spawned worker processes (the workload
    key ``workers``), its records merged; the bisection as in one process (a few steps, one decode slot
    in real time: 400 req/s queues past the TTFT budget, 10 req/s does not)."""
    code = main(["rate-sweep", "--url", "reference://h100-sxm/llama-3.1-8b?max_num_seqs=1&time_scale=1",
                 "--prompt-tokens", "16", "--output-tokens", "4", "--slo", "ttft_p50=80ms", "--arrival", "constant",
                 "--rate-min", "10", "--rate-max", "400", "--max-steps", "2", "--requests", "12", "--warmup", "1",
                 "--workers", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "pass", out
    assert out["workers"] == 2                                      # the reported step's, over two processes
    assert [s["rate_rps"] for s in out["steps"]] == [10, 400] and [s["passed"] for s in out["steps"]] == [True, False]
    assert out["capacity_rps"] == 10 and out["lowest_failing_rps"] == 400
