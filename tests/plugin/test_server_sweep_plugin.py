"""``server_sweep:`` end to end on the reference target: a sweep of running servers (``urls:``) where only
some arms meet the TPOT budget -- the table names the arms meeting it and the recommended one, in the
terminal, JSON, JUnit and HTML; a sweep of a managed ``serve-reference`` command's flags, one server at a
time; and bad input refused before any request (one arm, a flags sweep without a managed command, a flag
the command does not take) or an arm that cannot start, named with its flags and the server's log."""
import json
import re
import sys
import xml.etree.ElementTree as ET

from tests.helpers.results import validated_results

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.5"
#: decode at 0.7, 0.5 and 0.1 of the bandwidth: TPOT ~3.4, ~4.8 and ~24 ms at time_scale 0.5
URLS = """
target: {{url: "{ref}"}}
workloads:
  decode:
    class: custom
    prompt_tokens: 64
    output_tokens: 8
    samples: 6
    warmup: 1
    slo: {{tpot_p50: {budget}}}
    server_sweep:
      urls:
        fast: "{ref}&decode_efficiency=0.7"
        mid: "{ref}&decode_efficiency=0.5"
        slow: "{ref}&decode_efficiency=0.1"
      block_size: 3
"""


def run_urls(pytester, budget: str):
    pytester.makefile(".slo.yaml", sweep=URLS.format(ref=REF, budget=budget))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json",
                                      "--llm-latency-html=r.html", "--junitxml=j.xml", timeout=300)
    res, = validated_results(pytester.path / "r.json")["results"]  # the arms part as the schema says
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").iter("property")}
    return r, res, props


def test_a_url_sweep_names_the_arms_meeting_the_budget_and_recommends_one(pytester):
    r, res, props = run_urls(pytester, "10ms")
    r.assert_outcomes(passed=1)
    out = r.stdout.str()
    assert "server sweep (times in ms; each arm judged on the workload's budgets):" in out
    assert re.search(r"fast\s+reference://\S+decode_efficiency=0\.7\s+6\s+0\s.*PASS \(recommended\)", out)
    assert re.search(r"slow\s+reference://\S+decode_efficiency=0\.1\s+6\s+0\s.*FAIL", out)
    assert ("2 of 3 arms meet every budget; recommended fast: most headroom (" in out
            and "on its tightest budget, TPOT p50" in out)
    assert re.search(r"slow: TPOT p50 \d+\.\d ms > budget 10 ms", out)
    arms = res["arms"]
    assert arms["mode"] == "urls" and arms["meeting"] == ["fast", "mid"] and arms["recommended"] == "fast"
    assert [(a["name"], a["verdict"], a["requests"]) for a in arms["arms"]] == [
        ("fast", "pass", 6), ("mid", "pass", 6), ("slow", "fail", 6)]
    assert arms["arms"][0]["tpot_p95_ms"] < arms["arms"][1]["tpot_p95_ms"] < arms["arms"][2]["tpot_p95_ms"]
    assert arms["blocks"] == 2 and arms["block_size"] == 3 and arms["reported"] == "fast" and res["n"] == 6
    assert props["llm.arms.recommended"] == "fast" and props["llm.arms.meeting"] == "fast, mid"
    assert props["llm.arms.slow.verdict"] == "fail"
    html = (pytester.path / "r.html").read_text()
    assert "Server sweep: TTFT p95 against ITL p99 per arm" in html and 'data-arm="slow"' in html
    assert "fast (recommended)" in html


def test_a_url_sweep_where_no_arm_meets_the_budget_fails_naming_each_arm(pytester):
    r, res, _ = run_urls(pytester, "1ms")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "server_sweep: no arm meets every budget (TPOT p50 <= 1 ms):\n" in out
    for name in ("fast", "mid", "slow"):  # each arm's first violation, one line each
        assert re.search(rf"\n  {name} \(reference://\S+\): TPOT p50 \d+\.\d ms > budget 1 ms", out), name
    assert res["arms"].get("meeting", []) == [] and "recommended" not in res["arms"]
    assert [a["verdict"] for a in res["arms"]["arms"]] == ["fail"] * 3


def test_a_file_of_url_sweeps_needs_no_target_of_its_own(pytester):
    """The arms are the targets: a file with no target.url (and no --llm-latency-url) sweeps its URLs, the
    first arm's standing in for the test's own (never started); a workload that is no urls: sweep still needs
    one."""
    pytester.makefile(".slo.yaml", sweep=URLS.format(ref=REF, budget="1s").replace(f'target: {{url: "{REF}"}}\n', ""))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", timeout=300)
    r.assert_outcomes(passed=1)
    arms = json.loads((pytester.path / "r.json").read_text())["results"][0]["arms"]
    assert [a["name"] for a in arms["arms"]] == ["fast", "mid", "slow"] and arms["recommended"] == "fast"
    pytester.makefile(".slo.yaml", sweep=URLS.format(ref=REF, budget="1s").replace(f'target: {{url: "{REF}"}}\n', "")
                      + "  plain: {class: custom, prompt_tokens: 8, output_tokens: 2}\n")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert "no LLM server URL: set --llm-latency-url" in r.stdout.str() and r.ret != 0


#: a managed serve-reference that logs each start (with its arguments) and stop; its --help is not a start
WRAPPER = r'''
import signal, subprocess, sys
log = sys.argv[1]

def write(event):
    with open(log, "a") as fh:
        fh.write(event + "\n")

cmd = [sys.executable, "-m", "pytest_llm_latency.cli", "serve-reference", *sys.argv[2:]]
if "--help" in sys.argv:
    sys.exit(subprocess.call(cmd))
write(" ".join(["start", *sys.argv[6:]]))  # after events.log --time-scale X --port N: the arm's flags
child = subprocess.Popen(cmd)

def term(*_):
    write("stop")
    child.terminate()

signal.signal(signal.SIGTERM, term)
sys.exit(child.wait())
'''
FLAGS = """
target:
  command: {cmd}
workloads:
  mnbt:
    class: custom
    prompt_tokens: 64
    output_tokens: 8
    samples: 4
    warmup: 1
    slo: {{tpot_p50: 1s}}
    server_sweep:
      flags:
{arms}
      block_size: 2
"""


def flags_file(pytester, arms: dict[str, str]) -> None:
    pytester.makefile(".py", wrapper=WRAPPER)
    cmd = json.dumps([sys.executable, "wrapper.py", "events.log", "--time-scale", "0.05", "--port", "{port}"])
    pytester.makefile(".slo.yaml", flags=FLAGS.format(
        cmd=cmd, arms="\n".join(f"        {name}: {json.dumps(v)}" for name, v in arms.items())))


def events(pytester) -> list[str]:
    path = pytester.path / "events.log"
    return path.read_text().splitlines() if path.exists() else []


def test_a_flags_sweep_restarts_the_managed_command_with_each_arms_flags(pytester):
    flags_file(pytester, {"chunked-512": "--chunked-prefill --max-num-batched-tokens 512", "plain": ""})
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", timeout=300)
    r.assert_outcomes(passed=1)
    # 4 requests per arm in blocks of 2: one server at a time, each started with its arm's flags
    assert events(pytester) == ["start --chunked-prefill --max-num-batched-tokens 512", "stop", "start", "stop"] * 2
    arms = json.loads((pytester.path / "r.json").read_text())["results"][0]["arms"]
    assert arms["mode"] == "flags" and arms["meeting"] == ["chunked-512", "plain"]
    assert [a.get("flags") for a in arms["arms"]] == ["--chunked-prefill --max-num-batched-tokens 512", ""]
    out = r.stdout.str()
    assert "2 arms (one managed server, restarted per arm with its flags), 2 block(s) of 2 request(s)" in out
    assert re.search(r"plain\s+\(no extra flags\)\s+4\s+0", out)


def test_an_unknown_flag_and_an_arm_that_cannot_start_are_errors_naming_them(pytester):
    flags_file(pytester, {"plain": "", "typo": "--no-such-flag 3"})
    pytester.makefile(".slo.yaml", down=(pytester.path / "flags.slo.yaml").read_text().replace(
        "typo: \"--no-such-flag 3\"", "broken: \"--max-num-batched-tokens 512\""))  # needs --chunked-prefill
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "flags.slo.yaml", timeout=300)
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert re.search(r"flags\.slo\.yaml:\d+ workloads\.mnbt\.server_sweep\.flags\.typo: arm 'typo': --no-such-flag "
                     r"is not a flag of the managed command: `\S+ wrapper\.py events\.log .* --help` lists no such "
                     r"option", out)
    assert events(pytester) == []  # refused before any server started, so before any request
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "down.slo.yaml", timeout=300)
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert ("server_sweep arm 'broken' (flags --max-num-batched-tokens 512) could not start for a block: managed "
            "target exited before becoming ready") in out
    assert "max_num_batched_tokens needs chunked_prefill" in out  # the server's own log tail


def test_one_arm_and_a_flags_sweep_without_a_managed_command_are_refused_at_collection(pytester):
    pytester.makefile(".slo.yaml", one="""
target: {url: "reference://h100-sxm/llama-3.1-8b?time_scale=0"}
workloads:
  w: {class: custom, prompt_tokens: 8, output_tokens: 2, server_sweep: {urls: {only: "reference://h100-sxm/llama-3.1-8b"}}}
""", nocmd="""
target: {url: "reference://h100-sxm/llama-3.1-8b?time_scale=0"}
workloads:
  w: {class: custom, prompt_tokens: 8, output_tokens: 2, server_sweep: {flags: {a: "--chunked-prefill", b: ""}}}
""")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    out = r.stdout.str()
    assert re.search(r"one\.slo\.yaml:\d+ workloads\.w\.server_sweep\.urls: a server sweep compares settings: it "
                     r"needs at least two arms, got 1 \(only\)", out)
    assert re.search(r"nocmd\.slo\.yaml:\d+ workloads\.w\.server_sweep\.flags: a flags sweep appends each arm's "
                     r"flags to the managed target's command, but the test's target is the URL reference://", out)
    assert "give target.command" in out and r.ret != 0
