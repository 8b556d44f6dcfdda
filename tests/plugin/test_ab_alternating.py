"""A/B in one run, ``baseline_target: {mode: alternating}``: two managed targets that must not
run at the same time -- each block stops one and starts the other (AAAA BBBB AAAA ...), and
the verdict resamples whole blocks.  The targets are managed ``serve-reference`` commands
behind a small wrapper that logs when each starts and is stopped, so the test sees the order
(and that the two never overlapped) from the processes themselves."""
import json
import re
import sys

WRAPPER = r'''
import signal, subprocess, sys
name, log = sys.argv[1], sys.argv[2]

def write(event):
    with open(log, "a") as fh:
        fh.write(f"{event} {name}\n")

write("start")
child = subprocess.Popen([sys.executable, "-m", "pytest_llm_latency.cli", "serve-reference", *sys.argv[3:]])

def term(*_):  # the main thread's child.wait() below returns once the child has exited
    write("stop")  # (a second wait() here would spin on Popen's wait lock for its whole timeout)
    child.terminate()

signal.signal(signal.SIGTERM, term)
sys.exit(child.wait())
'''

SLO = """
target:
  command: {a}
  ready: /health
workloads:
  alt:
    class: custom
    prompt_tokens: 64
    output_tokens: 8
    samples: {samples}
    warmup: 1
    slo: {{}}
    baseline_target:
      command: {b}
      mode: alternating
      {block}
"""


def cmd(name: str, seed: int, *extra: str) -> str:
    # time scale 1: TPOT ~6.9 ms, so a 15 % slower decode (+1 ms) is above the 0.25 ms TPOT floor
    return json.dumps([sys.executable, "wrapper.py", name, "events.log", "--time-scale", "1", "--jitter", "0.05",
                       "--jitter-seed", str(seed), *extra, "--port", "{port}"])


def run(pytester, a: str, b: str, block: str = "", samples: int = 20):
    pytester.makefile(".py", wrapper=WRAPPER)
    pytester.makefile(".slo.yaml", alt=SLO.format(a=a, b=b, block=block, samples=samples))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", timeout=300)
    res, = json.loads((pytester.path / "r.json").read_text())["results"]
    events = (pytester.path / "events.log").read_text().split("\n")[:-1]
    return r, res, events


def test_same_command_alternating_one_at_a_time_is_not_flagged(pytester):
    r, res, events = run(pytester, cmd("A", 1), cmd("B", 2), "block: 5")
    r.assert_outcomes(passed=1)
    # 20 samples in blocks of 5: A, B, A, B, ... -- each stopped before the other starts; both
    # are stopped at the end
    assert events == ["start A", "stop A", "start B", "stop B"] * 4
    assert res["load"]["ab_mode"] == "alternating" and res["load"]["ab_blocks"] == 4
    assert res["load"]["ab_block_size"] == 5 and res["n"] == 20
    comps = res["baseline"]["comparisons"]
    assert comps and all(c["status"] != "regression" for c in comps)
    assert all(c["blocks"] == 4 for c in comps)            # the blocked design: 4 blocks resampled
    assert res["baseline"]["cdf"]["tpot_ms"]["n"] == 20


def test_slower_decode_is_flagged_in_alternating_blocks(pytester):
    # 20 samples in blocks of 5 (block: set), decode 15 % slower (0.7 / 1.15 efficiency)
    r, res, events = run(pytester, cmd("A", 3, "--decode-efficiency", "0.6087"), cmd("B", 4), "block: 5")
    r.assert_outcomes(failed=1)
    assert events == ["start A", "stop A", "start B", "stop B"] * 4
    assert res["load"]["ab_blocks"] == 4 and res["load"]["ab_block_size"] == 5
    tpot, = [c for c in res["baseline"]["comparisons"] if c["key"] == "tpot_p50"]
    assert tpot["status"] == "regression" and tpot["blocks"] == 4 and tpot["lower"] > 1
    assert "TPOT p50 +" in r.stdout.str() and "> tolerance 5%" in r.stdout.str()


#: A workload whose baseline_target is a URL, with the given mode/block keys.
URL_BASELINE = """
target: {{url: "reference://h100-sxm/llama-3.1-8b?time_scale=0"}}
workloads:
  alt:
    class: custom
    prompt_tokens: 16
    output_tokens: 4
    slo: {{}}
    baseline_target: {{url: "reference://h100-sxm/llama-3.1-8b?time_scale=0", {extra}}}
"""


def test_alternating_needs_two_managed_targets(pytester):
    pytester.makefile(".slo.yaml", alt=URL_BASELINE.format(extra="mode: alternating"))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    r.assert_outcomes(errors=1)
    assert "baseline_target.mode: alternating stops one target and starts the other" in r.stdout.str()
    assert "baseline_target is a URL -- use mode: interleaved, or give it a command" in r.stdout.str()


def test_bad_mode_and_block_are_collection_errors_naming_the_line(pytester):
    pytester.makefile(".slo.yaml", alt=URL_BASELINE.format(extra="mode: alternate, block: 0"))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert re.search(r"alt\.slo\.yaml:\d+ workloads\.alt baseline_target\.mode: expected interleaved", out)
    assert "got 'alternate'" in out


def test_a_baseline_that_cannot_start_between_blocks_is_a_target_failure_naming_it(pytester):
    dead = json.dumps([sys.executable, "-c", "import sys; sys.exit(3)", "{port}"])
    pytester.makefile(".py", wrapper=WRAPPER)
    pytester.makefile(".slo.yaml", alt=SLO.format(a=cmd("A", 1), b=dead, block="startup_timeout: 20",
                                                  samples=10))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    assert r.ret != 0 and "passed" not in r.parseoutcomes()
    out = r.stdout.str()
    assert "baseline target " in out and "could not start for an A/B block" in out
    # the candidate was stopped before the baseline was tried: never both at once
    assert (pytester.path / "events.log").read_text().split("\n")[:-1] == ["start A", "stop A"]
