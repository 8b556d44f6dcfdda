"""Under pytest-xdist, latency tests are never measured concurrently (xdist_group + a run-wide lock)."""
import json

import pytest

pytest.importorskip("xdist")


FILE = ("workloads: {%s: {class: custom, prompt_tokens: 16, output_tokens: 48, samples: 3, warmup: 0, "
        "slo: {ttft_p50: 1s}}}\n")


def test_latency_tests_run_on_one_worker_and_results_reach_the_controller(pytester):
    for name in ("a", "b", "c", "d"):
        pytester.makefile(".slo.yaml", **{name: FILE % name})
    pytester.makepyfile(**{f"test_plain_{i}": "def test_x():\n    pass\n" for i in range(4)})
    # real time (the reference target, ~0.35 s of decode per request), so that unserialized
    # measurements on two workers would overlap
    # 3 samples each: the point estimate (no sample size up to 4 decides a p50 at the default 95%)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--llm-latency-confidence=null",
                                      "--llm-latency-url=reference://h100-sxm/llama-3.1-8b",
                                      "--llm-latency-json=r.json", timeout=120)
    r.assert_outcomes(passed=8)
    r.stdout.fnmatch_lines(["*--dist load switched to loadgroup: latency tests run serially on one xdist worker*"])
    results = json.loads((pytester.path / "r.json").read_text())["results"]
    assert len(results) == 4
    # never measured concurrently: the measurement intervals do not overlap, whichever
    # workers ran them (one worker under loadgroup; the run-wide lock otherwise)
    spans = sorted((res["measurement"]["measure_start_ns"], res["measurement"]["measure_end_ns"]) for res in results)
    assert all(prev_end <= start for (_, prev_end), (start, _) in zip(spans, spans[1:])), spans
    assert {res["measurement"]["xdist_worker"] for res in results} <= {"gw0", "gw1"}


def _keys(node, at="") -> set[str]:
    """Every key path of a JSON value (dicts only; list items share their list's path)."""
    if isinstance(node, dict):
        return {p for k, v in node.items() for p in {f"{at}.{k}"} | _keys(v, f"{at}.{k}")}
    if isinstance(node, list):
        return {p for v in node for p in _keys(v, f"{at}[]")}
    return set()


def test_a_run_under_n_2_has_the_keys_tests_and_verdicts_of_a_sequential_run(pytester, monkeypatch):
    """The document crosses from the workers as one serialized value per test: the same results
    as a sequential run, measured values, the nonce and the worker's name aside."""
    pytester.makefile(".slo.yaml", ok=FILE % "ok",
                      # an E2E budget no clock can flip (the stream's end ends its read: exact), where a
                      # TTFT this far under the first read's span would be refused, not failed
                      strict=(FILE % "strict").replace("ttft_p50: 1s", "ttft_p50: 1s, e2e_p50: 0.001ms"))
    pytester.makepyfile(test_fx="""
        def test_two(llm_latency):
            for n in (16, 32):
                llm_latency.measure("custom", prompt_tokens=n, output_tokens=8, samples=3, warmup=0,
                                    ttft_p50="10s", url="reference://h100-sxm/llama-3.1-8b?time_scale=0.05")
    """)
    docs = {}
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)  # this suite itself under -n: the inner plain run is not a worker
    for mode in ((), ("-n", "2")):
        args = ("-p", "no:cacheprovider", *mode, "--llm-latency-confidence=null", "--llm-latency-json=r.json",
                "--llm-latency-url=reference://h100-sxm/llama-3.1-8b?time_scale=0.05")
        r = pytester.runpytest_subprocess(*args, timeout=180)
        r.assert_outcomes(passed=2, failed=1)
        docs[mode] = json.loads((pytester.path / "r.json").read_text())
    seq, par = docs[()], docs[("-n", "2")]
    # only under xdist: the xdist worker, and the span it held the run-wide measurement lock for
    xdist_only = {f".measurement.{k}" for k in ("xdist_worker", "measure_start_ns", "measure_end_ns")}
    assert _keys(seq) - {".nonce"} == _keys(par) - {".nonce"} - {".results[]" + k for k in xdist_only}
    by_id = lambda doc: {x["nodeid"].replace("@llm-latency", ""): x for x in doc["results"]}  # noqa: E731
    s, p = by_id(seq), by_id(par)
    assert sorted(s) == sorted(p) == ["ok.slo.yaml::ok", "strict.slo.yaml::strict", "test_fx.py::test_two",
                                      "test_fx.py::test_two#2"]
    for nodeid in s:
        assert s[nodeid]["verdict"] == p[nodeid]["verdict"], nodeid
        assert _keys(s[nodeid]) == _keys(p[nodeid]) - xdist_only, nodeid
        assert len(s[nodeid]["violations"]) == len(p[nodeid]["violations"]) and s[nodeid]["n"] == p[nodeid]["n"]
    assert s["strict.slo.yaml::strict"]["verdict"] == "fail"
    assert p["test_fx.py::test_two#2"]["measurement"]["xdist_worker"]
