"""Under pytest-xdist, latency tests are never measured concurrently (xdist_group + a run-wide lock)."""
import json

import pytest

pytest.importorskip("xdist")


FILE = "workloads: {%s: {class: custom, prompt_tokens: 16, output_tokens: 48, samples: 3, warmup: 0, slo: {ttft_p50: 1s}}}\n"


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
    r.stdout.fnmatch_lines(["*--dist load switched to loadgroup: latency tests run serially on one worker*"])
    results = json.loads((pytester.path / "r.json").read_text())["results"]
    assert len(results) == 4
    # never measured concurrently: the measurement intervals do not overlap, whichever
    # workers ran them (one worker under loadgroup; the run-wide lock otherwise)
    spans = sorted((res["measurement"]["measure_start_ns"], res["measurement"]["measure_end_ns"]) for res in results)
    assert all(prev_end <= start for (_, prev_end), (start, _) in zip(spans, spans[1:])), spans
    assert {res["measurement"]["worker"] for res in results} <= {"gw0", "gw1"}
