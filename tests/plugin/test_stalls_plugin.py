"""The stall a long prompt imposes, end to end on the reference target (issue 37): one open-loop workload
whose prompt lengths include long ones (6000..12000 tokens: about half), against the engine with chunked
prefill off (a long prefill is one step of 220..480 ms that every running stream waits for;
targets/reference/physics.py) and on with a 512-token budget per step (a step of ~20 ms): ``itl_stall_p99``
fails off, naming the stall and its cause, and passes on.  (A shorter prefill, 4000..6000 tokens, stalls
too but is below stall_prompt_tokens: its gaps are clean ones.)"""
import json

import pytest

from pytest_llm_latency.targets.reference.launch import start_reference

# ~20 s against two reference servers: the slow tier (the default tier's end-to-end stall check is
# tests/plugin/test_server_sweep_mix.py: the same engine with chunked prefill off and on, as two arms)
pytestmark = pytest.mark.slow_tier

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=1"
TEST = """
import pytest

SHARED = dict(workload="custom", prompt_tokens={{"distribution": "uniform", "min": 64, "max": 12000}},
              output_tokens=96, rate=5, requests=20, warmup=1, arrival="constant", workers=1,
              stall_prompt_tokens=6000, itl_stall_p99="150ms")


@pytest.mark.llm_slo(**SHARED, url="{off}")
def test_chunked_prefill_off():
    pass


@pytest.mark.llm_slo(**SHARED, url="{on}")
def test_chunked_prefill_on():
    pass
"""


@pytest.fixture(scope="module")
def servers():
    with start_reference(REF, mode="subprocess") as off, \
            start_reference(REF + "&chunked_prefill=1&max_num_batched_tokens=512", mode="subprocess") as on:
        yield off.url, on.url


def test_a_long_prefill_stalls_the_streams_without_chunked_prefill_and_not_with_it(pytester, servers):
    off, on = servers
    pytester.makepyfile(test_shared=TEST.format(off=off, on=on))
    r = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--llm-latency-seed=3",
                           "--llm-latency-json=r.json")
    results = {x["nodeid"].rsplit("::", 1)[1]: x for x in json.loads((pytester.path / "r.json").read_text())["results"]}
    unchunked, chunked = results["test_chunked_prefill_off"], results["test_chunked_prefill_on"]
    for res in (unchunked, chunked):  # the gaps are the server's, not a late client's
        assert res["client"]["client_fell_behind"] == 0, res["errors"]
        assert res["stall"]["stall_gaps"] >= 100 and res["stall"]["long_prefills"] >= 5, res["stall"]
    assert unchunked["verdict"] == "fail" and chunked["verdict"] == "pass", r.stdout.str()
    r.assert_outcomes(passed=1, failed=1)
    off_stall, on_stall = unchunked["stall"], chunked["stall"]
    assert off_stall["stall_ms_p99"] > 300 and off_stall["stall_ms_p99"] > 3 * on_stall["stall_ms_p99"]
    assert off_stall["stall_ms_p99"] > 2 * off_stall["clean_ms_p99"] and off_stall["long_prompt_tokens_p50"] >= 6000
    (violation,) = unchunked["violations"]
    assert violation.startswith(f"ITL stall p99 {off_stall['stall_ms_p99']:.1f} ms > budget 150 ms: ")
    assert "gaps overlapping a >= 6000-token prefill were over it" in violation
    assert "during other requests' prefills (" in violation and "clean gaps p99 " in violation
    assert any(c.startswith("cause: long prefills stall decode") and "--max-num-batched-tokens" in c
               for c in unchunked["causes"]), unchunked["causes"]
    out = r.stdout.str()
    assert "stalls (gaps overlapping another request's long prefill vs the others):" in out
    assert "test_chunked_prefill_off: >= 6000 tokens: stall p99" in out
    assert "; 100% during other requests' prefills (" in out
