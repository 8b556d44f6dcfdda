"""``workers: auto`` by default (issue 39): a closed loop with nothing setting ``workers`` records
how many processes sent it and why (JSON ``load.workers`` / ``load.workers_reason``, JUnit, the
terminal).  Inline pytester runs: the tests' CPU count is pinned (``tests/conftest.py``)."""
import json
import xml.etree.ElementTree as ET

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05"
YAML = """
workloads:
  chat:
    class: chat
    prompt_tokens: 32
    output_tokens: 16
    concurrency: 2
    requests: 20
    confidence: null
    warmup: 1
"""


def _run(pytester):
    pytester.makefile(".slo.yaml", chat=YAML)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={REF}", "--junitxml=j.xml",
                           "--llm-latency-json=r.json")
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").getroot().iter("property")}
    return r, res, props


def test_a_default_closed_loop_on_a_local_target_with_two_cpus_runs_in_one_process_and_says_why(pytester):
    r, res, props = _run(pytester)
    assert res["load"]["workers"] == 1 and not res["load"].get("worker_lag")
    reason = res["load"]["workers_reason"]
    assert reason.startswith("auto: 2 streams x ") and "(warm-up)" in reason   # the warm-up's measured rate
    assert props["llm.load.workers_reason"] == reason and props["llm.load.workers"] == "1"
    r.stdout.fnmatch_lines(["*chat*: 1 process sent the load -- auto: 2 streams x *"])


def test_auto_sized_above_one_spawns_that_many_workers(pytester, monkeypatch):
    from pytest_llm_latency.client.placement import shares as load_plan
    from pytest_llm_latency.core.spec import worker_sizing

    monkeypatch.setattr(load_plan, "host_cpus", lambda: 4)              # 3 for the load, one for the server
    monkeypatch.setattr(worker_sizing, "EVENTS_PER_S_PER_PROCESS", 1)  # every event a process: one per stream
    r, res, _ = _run(pytester)
    assert res["load"]["workers"] == 2 and len(res["load"]["worker_lag"]) == 2
    assert res["load"]["workers_reason"].endswith("; at most one per stream: 2")
    assert res["verdict"] != "error", res.get("errors")
