"""A/B in one run: ``baseline_target`` measured interleaved (ABAB blocks) with the test's target
and judged in the paired design.  Reference targets with jitter on: the same target (another
jitter seed) is not flagged, a 15% slower decode is."""
import json
import re
import sys

import pytest

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.5&jitter=0.05"
TEST = """
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=64, output_tokens=16, samples=30, warmup=1,
                     ttft_p95=None, tpot_p95=None, url={url!r}, baseline_target={bt!r})
def test_ab():
    pass
"""


def run(pytester, url, bt, *args):
    pytester.makepyfile(test_ab=TEST.format(url=url, bt=bt))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", *args, timeout=300)


def test_same_target_is_not_flagged_and_results_carry_the_paired_comparison(pytester):
    r = run(pytester, REF + "&jitter_seed=1", REF + "&jitter_seed=2")
    r.assert_outcomes(passed=1)
    res, = json.loads((pytester.path / "r.json").read_text())["results"]
    assert res["n"] == 30 and res["load"]["ab_blocks"] == 6 and res["load"]["ab_block_size"] == 5
    assert res["baseline"]["status"] in ("ok", "improvement")
    base = res["baseline"]
    assert base["label"] == f"baseline target {REF}&jitter_seed=2"
    assert base["cdf"]["tpot_ms"]["n"] == 30                 # the B arm measured as many requests
    assert all(c["status"] != "regression" for c in base["comparisons"])


def test_slower_candidate_decode_is_flagged_against_the_baseline_target(pytester):
    r = run(pytester, REF + "&jitter_seed=3&decode_efficiency=0.6087", REF + "&jitter_seed=4")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "TPOT p50 +" in out and f"vs baseline target {REF}&jitter_seed=4 (" in out
    assert "> tolerance 5%" in out


def test_bad_baseline_target_is_a_configuration_error(pytester):
    pytester.makepyfile(test_ab=TEST.format(url=REF, bt={"cmd": ["x"]}))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    r.assert_outcomes(errors=1)
    assert "baseline_target: expected a URL, or a mapping with url: or command:" in r.stdout.str()


FILE_LEVEL = """
target:
  url: "{ref}&jitter_seed=1"
  baseline_target: "{ref}&jitter_seed=2"
workloads:
  inherits: {{class: custom, prompt_tokens: 32, output_tokens: 8, samples: 10, warmup: 1, slo: {{}}}}
  own:
    {{class: custom, prompt_tokens: 32, output_tokens: 8, samples: 10, warmup: 1, slo: {{}},
     baseline_target: "{ref}&jitter_seed=3"}}
  opted_out: {{class: custom, prompt_tokens: 32, output_tokens: 8, samples: 10, warmup: 1, slo: {{}},
              baseline_target: null}}
"""


def test_file_level_baseline_target_applies_to_every_workload_unless_it_names_its_own(pytester):
    pytester.makefile(".slo.yaml", ab=FILE_LEVEL.format(ref=REF))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", timeout=300)
    r.assert_outcomes(passed=3)
    res = {x["workload"]: x for x in json.loads((pytester.path / "r.json").read_text())["results"]}
    assert res["inherits"]["baseline"]["label"] == f"baseline target {REF}&jitter_seed=2"   # the file's
    assert res["own"]["baseline"]["label"] == f"baseline target {REF}&jitter_seed=3"        # workload > file
    assert "baseline" not in res["opted_out"] and "ab_blocks" not in res["opted_out"].get("load", {})
    assert res["inherits"]["load"]["ab_blocks"] == 2 and res["own"]["load"]["ab_blocks"] == 2


def test_bad_file_level_baseline_target_is_a_collection_error_naming_the_file(pytester):
    pytester.makefile(".slo.yaml", ab="""
target:
  url: "reference://h100-sxm/llama-3.1-8b?time_scale=0"
  baseline_target: {cmd: [x]}
workloads:
  chat: {class: chat}
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    r.assert_outcomes(errors=1)
    assert re.search(r"ab\.slo\.yaml:\d+ target baseline_target: expected a URL, or a mapping with url: or "
                     r"command:", r.stdout.str())


def test_samples_auto_with_a_baseline_target_is_a_configuration_error(pytester):
    pytester.makefile(".slo.yaml", ab=f"""
target: {{url: "{REF}"}}
workloads:
  chat: {{class: custom, prompt_tokens: 32, output_tokens: 8, samples: auto, slo: {{ttft_p95: 1s}},
         baseline_target: "{REF}&jitter_seed=2"}}
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert "workloads.chat.samples: samples: auto does not combine with baseline_target" in out
    assert "give samples: N" in out


def test_run_wide_samples_auto_keeps_an_ab_workloads_fixed_count(pytester):
    r = run(pytester, REF + "&jitter_seed=1", REF + "&jitter_seed=2", "--llm-latency-samples=auto")
    r.assert_outcomes(passed=1)
    res, = json.loads((pytester.path / "r.json").read_text())["results"]
    assert res["n"] == 30 and res["load"]["ab_blocks"] == 6


# a target that unloads its model after its 12th request (another client's model evicting it), taking 200 ms to
# load it again: the sample after that, in the third block of its arm, is a cold start
OLLAMA = "reference://h100-sxm/llama-3.1-8b?time_scale=1&tokenize_endpoint=0"
EVICTING = OLLAMA + "&load_time=0.2&evict_every=12"
COLD_AB = """
workloads:
  cold: {{class: custom, prompt_tokens: 64, output_tokens: 4, samples: 15, warmup: 1, max_error_rate: 0.5,
         cold_starts: fail, baseline_target: {{url: "{bt}", block: 5}}}}
"""


@pytest.mark.parametrize("evicting", ["candidate", "baseline target"])
def test_a_cold_start_in_a_later_block_of_either_arm_fails_the_run(pytester, evicting):
    """Every block of each arm is judged (``core.result.blocks``): before, only the first block's facts were
    kept, and this run passed."""
    url, bt = (EVICTING, OLLAMA) if evicting == "candidate" else (OLLAMA, EVICTING)
    pytester.makefile(".slo.yaml", ab=COLD_AB.format(bt=bt))
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={url}", "--llm-latency-api=ollama",
                           "--llm-latency-json=r.json")
    r.assert_outcomes(failed=1)
    res, = json.loads((pytester.path / "r.json").read_text())["results"]
    prefix = "" if evicting == "candidate" else "baseline target: "
    text = next(v for v in res["violations"] if v.startswith(prefix + "1 of 15 samples were cold starts"))
    number = int(re.search(r"load_duration: #(\d+) ", text).group(1))
    assert number > 5, text                                   # a sample of a later block than the first
    assert res["load"]["ab_blocks"] == 3
    if evicting == "candidate":
        assert res["cold_start"] == {"cold_starts": 1, "cold_start_samples": str(number)}


def test_a_baseline_target_that_cannot_start_errors_before_any_request(pytester):
    """Both arms are resolved before the driver runs: a baseline target whose command exits at once
    is an error naming it, and the test's own target was never sent a prompt."""
    from tests.helpers.rawserver import raw_server

    seen: list[bytes] = []

    def respond(req: bytes) -> bytes:
        seen.append(req.split(b"\r\n", 1)[0])
        return b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    port, stop = raw_server(respond)
    try:
        bt = {"command": [sys.executable, "-c", "raise SystemExit(3)"], "url": "http://127.0.0.1:{port}/v1",
              "startup_timeout": 20}
        pytester.makepyfile(test_ab=TEST.format(url=f"http://127.0.0.1:{port}/v1", bt=bt))
        r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    finally:
        stop()
    r.assert_outcomes(errors=1)
    assert "baseline target " in r.stdout.str() and "could not start" in r.stdout.str()
    assert not [line for line in seen if line.startswith(b"POST")], seen
