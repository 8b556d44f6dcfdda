"""Bad configuration, end to end through pytester: every mistake stops the run before
any request, and the message names the place (file:line or the option's source), the
key path, and the fix.

YAML mistakes are collection errors (exit 2, message in the report); option, env and
ini mistakes are ``pytest.UsageError`` (exit 4, ``ERROR: ...`` on stderr).  Every run
registers the scripted fake server, so a request that slipped through would be
recorded in ``script.seen_headers`` -- and the tests assert that it stays empty.

A few mistakes are still only caught in the call phase (marker arguments, a URL that
is missing everywhere, too few samples for a marker's percentile); they never pass and
say how to fix; marker and URL mistakes are usage errors at collection, before any request.
"""
import re

import pytest

from tests.helpers.fakeserver import FakeServerPlugin, Script

URL = "target: {url: http://fake:8000}\n"
# the inner runs need no hypothesis plugin (it would re-import hypothesis in each run: ~1 s)
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
WL = "workloads:\n  chat:\n"


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing ``needle`` (the line the error must name)."""
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in the fixture text")


def run_file(pytester, raw: bytes, *args):
    (pytester.path / "bad.slo.yaml").write_bytes(raw)
    script = Script()
    r = pytester.runpytest(*QUIET, *args, plugins=[FakeServerPlugin(script)])
    return r, script


# id, file text, text on the line the error must name, key path, fix hint (regex)
YAML_CASES = [
    ("yaml-syntax-indent", URL + WL + "    class: chat\n   samples: 20\n", "   samples: 20",
     "YAML syntax error", r"check indentation and quoting"),
    ("yaml-syntax-tab", URL + WL + "\tclass: chat\n", "\tclass", "YAML syntax error", r"character '\\t'"),
    ("duplicate-key", URL + WL + "    samples: 20\n    class: chat\n    samples: 40\n", "samples: 40",
     "workloads.chat.samples", r"duplicate key 'samples' \(first at line 4\).*remove or rename"),
    ("duplicate-workload", URL + "workloads:\n  chat: {class: chat}\n  chat: {class: agent}\n",
     "chat: {class: agent}", "workloads.chat", r"duplicate key 'chat' \(first at line 3\)"),
    ("unknown-top-level-key", URL + "workload:\n  chat: {}\n", "workload:", "workload",
     r"did you mean 'workloads'\?"),
    ("unknown-target-key", "target:\n  url: http://fake:8000\n  modle: m\nworkloads: {chat: {}}\n", "modle",
     "target.modle", r"did you mean 'model'\?"),
    ("unknown-workload-key", URL + WL + "    sample: 20\n", "sample:", "workloads.chat.sample",
     r"did you mean 'samples'\?"),
    ("unknown-budget", URL + WL + "    slo:\n      ttf_p95: 1s\n", "ttf_p95", "workloads.chat.slo.ttf_p95",
     r"did you mean 'ttft_p95'"),
    ("percentile-p101", URL + WL + "    slo: {ttft_p101: 1s}\n", "ttft_p101", "workloads.chat.slo.ttft_p101",
     r"p101 is not computed.*e\.g\. ttft_p95"),
    ("percentile-p0", URL + WL + "    slo:\n      tpot_p0: 1s\n", "tpot_p0", "workloads.chat.slo.tpot_p0",
     r"p0 is not computed.*e\.g\. tpot_p95"),
    ("string-where-int", URL + WL + "    samples: twenty\n", "samples:", "workloads.chat.samples",
     r"expected an integer >= 1, got 'twenty'"),
    ("float-where-int", URL + WL + "    prompt_tokens: 1.5e3\n", "prompt_tokens", "workloads.chat.prompt_tokens",
     r"expected an integer >= 1"),
    ("list-where-mapping-target", "target: [http://fake:8000]\nworkloads: {chat: {}}\n", "target:", "target",
     r"expected a mapping like \{url: http://localhost:8000\}, got list"),
    ("workload-spec-is-list", URL + "workloads:\n  chat: [class, chat]\n", "chat: [", "workloads.chat",
     r"expected a mapping \(class, prompt_tokens.*got list"),
    ("slo-is-list", URL + WL + "    slo: [ttft_p95, 500ms]\n", "slo:", "workloads.chat.slo",
     r"expected a mapping of budgets like \{ttft_p95: 500ms\}, got list"),
    ("empty-workloads", URL + "workloads: {}\n", "workloads:", "workloads",
     r"expected a mapping of workload name to spec, e\.g\. 'workloads: \{chat: \{class: chat\}\}'"),
    ("file-is-a-list", "- chat\n- agent\n", "- chat", "(top level)", r"must be a mapping with a 'workloads:' key"),
    ("negative-budget", URL + WL + "    slo: {ttft_p95: -5}\n", "slo:", "workloads.chat.slo.ttft_p95",
     r"a budget must be a positive duration, got -5"),
    ("unit-typo", URL + WL + "    slo:\n      ttft_p95: 500sm\n", "500sm", "workloads.chat.slo.ttft_p95",
     r"cannot read duration '500sm'; did you mean 'ms'.*e\.g\. '500ms'"),
    ("bool-as-duration", URL + WL + "    slo:\n      tpot_p95: yes\n", "tpot_p95", "workloads.chat.slo.tpot_p95",
     r"expected a duration like 500 or '500ms', got boolean True \(YAML reads yes/no"),
    ("output-tps-min-negative", URL + WL + "    slo: {output_tps_min: -10}\n", "slo:",
     "workloads.chat.slo.output_tps_min", r"expected a positive number, got -10"),
    ("unknown-class", URL + WL + "    class: chatt\n", "class: chatt", "workloads.chat.class",
     r"unknown workload class 'chatt'; did you mean 'chat'\?"),
    ("class-is-a-list", URL + WL + "    class: [chat]\n", "class:", "workloads.chat.class",
     r"expected a class name \(chat, agent, agent_session, long_summarization or custom\)"),
    ("custom-without-prompt-tokens", URL + "workloads:\n  summarize:\n    output_tokens: 64\n", "summarize:",
     "workloads.summarize", r"set prompt_tokens and output_tokens, or class: one of chat"),
    ("samples-zero", URL + WL + "    samples: 0\n", "samples:", "workloads.chat.samples",
     r"expected an integer >= 1, got 0"),
    ("warmup-negative", URL + WL + "    warmup: -1\n", "warmup:", "workloads.chat.warmup",
     r"expected an integer >= 0, got -1"),
    ("concurrency-zero", URL + WL + "    concurrency: 0\n", "concurrency:", "workloads.chat.concurrency",
     r"expected an integer >= 1, got 0"),
    ("max-error-rate-above-1", URL + WL + "    max_error_rate: 1.5\n", "max_error_rate",
     "workloads.chat.max_error_rate", r"expected a fraction between 0 and 1, got 1\.5"),
    ("shared-prefix-not-below-prompt", URL + WL + "    prompt_tokens: 64\n    shared_prefix_tokens: 64\n",
     "shared_prefix_tokens", "workloads.chat.shared_prefix_tokens",
     r"shared_prefix_tokens \(64\) must be smaller than prompt_tokens \(64\)"),
    # the point estimate's sample floor (confidence: null; at 95% fewer samples are inconclusive)
    ("p99-of-10-samples", URL + WL + "    confidence: null\n    samples: 10\n    slo:\n      ttft_p99: 1s\n",
     "samples: 10", "workloads.chat.samples", r"p99 needs >= 100 samples, got 10: raise samples or use p90"),
    ("class-default-p95-of-5-samples", URL + WL + "    confidence: null\n    samples: 5\n", "samples: 5",
     "workloads.chat.samples", r"budget ttft_p95 \(class default\): p95 needs >= 20 samples, got 5: raise samples"),
    # at the default 95%: a budget that no sample size up to samples can decide either way
    ("p50-of-4-samples-at-95", URL + WL + "    samples: 4\n    slo:\n      ttft_p50: 1s\n", "samples: 4",
     "workloads.chat.samples", r"no sample size up to 4 can decide a p50 at 95% confidence: raise samples"),
    ("url-scheme-ftp", "target:\n  url: ftp://fake:8000\nworkloads: {chat: {}}\n", "ftp://", "target.url",
     r"expected an http://, https:// or reference:// URL, e\.g\. 'url: http://localhost:8000'"),
    ("url-without-host", "target:\n  url: 'http://'\nworkloads: {chat: {}}\n", "url:", "target.url",
     r"is not a server URL"),
    ("unknown-api", "target:\n  url: http://fake:8000\n  api: openai-chatt\nworkloads: {chat: {}}\n", "api:",
     "target.api",
     r"did you mean 'openai-chat'.*use one of openai-completions, openai-chat, openai-responses, anthropic-messages, "
     r"ollama"),
    ("command-is-a-string", "target:\n  command: llama-server --port 8000\nworkloads: {chat: {}}\n", "command:",
     "target.command", r"expected a list of strings like \['llama-server'.*split the command into its arguments"),
    ("startup-timeout-negative", URL.replace("}", ", startup_timeout: -1}") + "workloads: {chat: {}}\n", "target:",
     "target.startup_timeout", r"expected seconds > 0 such as 120, got -1"),
    ("env-not-a-mapping", "target:\n  url: http://fake:8000\n  env: [A=1]\nworkloads: {chat: {}}\n", "env:",
     "target.env", r"expected a mapping of variable name to value"),
    ("file-roofline-not-a-mapping", URL + "roofline: 0.5\nworkloads: {chat: {}}\n", "roofline:", "roofline",
     r"expected a mapping like \{min_decode_efficiency: 0\.5\}"),
]


@pytest.mark.parametrize("text,needle,key,hint", [pytest.param(*c[1:], id=c[0]) for c in YAML_CASES])
def test_bad_slo_file_is_a_collection_error_naming_file_line_key_and_fix(pytester, text, needle, key, hint):
    r, script = run_file(pytester, text.encode())
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.INTERRUPTED, out
    r.assert_outcomes(errors=1)
    assert "ERROR collecting bad.slo.yaml" in out
    assert re.search(rf"bad\.slo\.yaml:{line_of(text, needle)}\b", out), out
    assert key in out
    assert re.search(hint, out), out
    assert script.seen_headers == []  # nothing reached the server, not even /v1/models


def test_the_same_file_without_the_mistake_does_run(pytester):
    """Control for the table above: the fake server and file layout do measure when valid."""
    text = (URL + WL + "    prompt_tokens: 32\n    output_tokens: 4\n    samples: 20\n    warmup: 0\n"
            "    confidence: null\n")  # the scripted server's constant latencies: the point estimate
    r, script = run_file(pytester, text.encode())
    r.assert_outcomes(passed=1)
    assert len(script.requests) >= 20  # 20 measured (+ the prompt-length probe)


NON_UTF8 = b"target: {url: http://fake:8000}\nworkloads:\n  chat: {class: \xffchat}\n"


def test_non_utf8_file_names_the_file(pytester):
    r, script = run_file(pytester, NON_UTF8)
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.INTERRUPTED
    assert "ERROR collecting bad.slo.yaml" in out and re.search("utf-8", out, re.I)
    assert script.seen_headers == []


def test_non_utf8_file_names_line_and_fix(pytester):
    r, _ = run_file(pytester, NON_UTF8)
    r.stdout.fnmatch_lines(["*bad.slo.yaml:3:17: not valid UTF-8 (byte 0xff*save the file as UTF-8*"])


def test_parse_slo_file_reports_non_utf8_line_and_column():
    from pytest_llm_latency.core.errors import ConfigError
    from pytest_llm_latency.plugin.slofile import parse_slo_file

    with pytest.raises(ConfigError, match=r"^f\.slo\.yaml:3:17: not valid UTF-8 \(byte 0xff.*save the file as UTF-8"):
        parse_slo_file(NON_UTF8, "f.slo.yaml")


def test_recursive_and_exponential_yaml_aliases_are_config_errors_not_hangs():
    from pytest_llm_latency.core.errors import ConfigError
    from pytest_llm_latency.plugin.slofile import parse_slo_file

    with pytest.raises(ConfigError, match=r"f\.slo\.yaml:1 workloads: expected a mapping"):
        parse_slo_file("workloads: &x [*x]\n", "f.slo.yaml")  # was RecursionError
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9))
    with pytest.raises(ConfigError, match="unknown top-level key 'a'"):
        parse_slo_file(laughs, "f.slo.yaml")  # 9**10 paths: walking them all never finished


# ----------------------------------------------------------------- options, env, ini

MARKED = """
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=32, output_tokens=4, samples=20, warmup=0)
def test_chat():
    pass
"""

# id, CLI args, env, ini lines, where + key (must be in stderr), fix hint (regex)
OPTION_CASES = [
    ("env-bad-int", [], {"LLM_LATENCY_SAMPLES": "abc"}, "",
     "LLM_LATENCY_SAMPLES (environment): 'abc' is not valid for samples", r"expected a positive integer"),
    ("env-url-no-scheme", [], {"LLM_LATENCY_URL": "localhost:8000"}, "",
     "LLM_LATENCY_URL (environment): 'localhost:8000' is not valid for url", r"an http://, https:// or reference://"),
    ("ini-bad-timeout", [], {}, "llm_latency_idle_timeout = -3",
     "llm_latency_idle_timeout (ini): '-3' is not valid for idle_timeout", r"expected seconds > 0"),
    ("ini-bad-samples", [], {}, "llm_latency_samples = 0",
     "llm_latency_samples (ini): '0' is not valid for samples", r"expected a positive integer"),
    ("cli-bad-api", ["--llm-latency-api=openai"], {}, "",
     "--llm-latency-api: 'openai' is not valid for api",
     r"expected one of openai-completions, openai-chat, openai-responses, anthropic-messages, ollama"),
    ("cli-url-ftp", ["--llm-latency-url=ftp://fake:21"], {}, "",
     "--llm-latency-url: 'ftp://fake:21' is not valid for url", r"expected an http://, https:// or reference://"),
    ("cli-url-no-host", ["--llm-latency-url=http://"], {}, "",
     "--llm-latency-url: 'http://' is not valid for url", r"expected an http://"),
    ("cli-min-efficiency-above-1", ["--llm-latency-min-decode-efficiency=1.04"], {}, "",
     "--llm-latency-min-decode-efficiency: '1.04' is not valid for min_decode_efficiency", r"a fraction in \(0, 1\]"),
    ("cli-negative-seed", ["--llm-latency-seed=-1"], {}, "",
     "--llm-latency-seed: '-1' is not valid for seed", r"a non-negative integer"),
    ("env-bad-bool", [], {"LLM_LATENCY_SKIP": "maybe"}, "",
     "LLM_LATENCY_SKIP (environment): 'maybe' is not valid for skip", r"true or false"),
]


@pytest.mark.parametrize("args,env,ini,key,hint", [pytest.param(*c[1:], id=c[0]) for c in OPTION_CASES])
def test_bad_option_is_a_usage_error_naming_source_key_and_fix(pytester, monkeypatch, args, env, ini, key, hint):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(MARKED)
    script = Script()
    urls = [] if any(a.startswith("--llm-latency-url") for a in args) or "LLM_LATENCY_URL" in env \
        else ["--llm-latency-url=http://fake:1"]
    r = pytester.runpytest(*QUIET, *urls, *args, plugins=[FakeServerPlugin(script)])
    err = r.stderr.str()
    assert r.ret == pytest.ExitCode.USAGE_ERROR, r.stdout.str() + err
    assert key in err, err
    assert re.search(hint, err), err
    assert script.seen_headers == []


def test_llm_option_with_the_plugin_disabled_is_a_usage_error(pytester):
    """pytest itself rejects the flag; with the plugin disabled it cannot add a hint of its own."""
    pytester.makepyfile("def test_x():\n    pass\n")
    r = pytester.runpytest("-p", "no:llm_latency", "--llm-latency-url=http://fake:1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*unrecognized arguments: --llm-latency-url=http://fake:1*"])


def test_option_sources_keep_their_precedence_when_one_layer_is_bad(pytester, monkeypatch):
    """A bad env value under a CLI value is never read (CLI > env); alone, it is the error."""
    monkeypatch.setenv("LLM_LATENCY_SAMPLES", "abc")
    pytester.makepyfile("def test_x():\n    pass\n")
    r = pytester.runpytest(*QUIET, "--llm-latency-url=http://fake:1", "--llm-latency-samples=20")
    assert r.ret == pytest.ExitCode.OK
    r = pytester.runpytest(*QUIET, "--llm-latency-url=http://fake:1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR


# ---------------------------------------------------------------- hardware (roofline)

def test_unknown_hardware_lists_close_matches():
    from pytest_llm_latency.roofline import catalog
    from pytest_llm_latency.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown hardware 'h100-sxn'; did you mean [^?]*h100-sxm") as ei:
        catalog.hardware("h100-sxn")
    assert "(known: " in str(ei.value)


def test_unknown_roofline_hardware_in_yaml_is_a_collection_error(pytester):
    text = URL + "roofline:\n  hardware: h100-sxn\n  min_decode_efficiency: 0.5\nworkloads: {chat: {}}\n"
    r, script = run_file(pytester, text.encode())
    assert r.ret == pytest.ExitCode.INTERRUPTED
    out = r.stdout.str()
    assert "roofline.hardware" in out and re.search(r"did you mean [^?]*h100-sxm", out), out
    assert re.search(rf"bad\.slo\.yaml:{line_of(text, 'roofline:')}\b", out), out
    assert script.seen_headers == []


# --------------------------------------------------- markers and the missing URL (run time)

# id, marker, CLI args, fix hint (regex), whether the call phase stops before any request today
RUNTIME_CASES = [
    ("marker-unknown-kwarg", "@pytest.mark.llm_slo(workload='chat', ttft_p955='500ms', samples=20)",
     ["--llm-latency-url=http://fake:1"],
     r"test_m\.py::test_chat @llm_slo: unknown llm_slo argument 'ttft_p955'; did you mean 'ttft_p95'", True),
    ("marker-p99-of-10-samples", "@pytest.mark.llm_slo(workload='chat', prompt_tokens=32, output_tokens=4, "
     "samples=10, warmup=0, ttft_p99='1s', confidence=None)", ["--llm-latency-url=http://fake:1"],
     r"p99 needs >= 100 samples, got 10|10 samples cannot support a p99 \(needs >= 100\)", False),
    ("no-url-anywhere", "@pytest.mark.llm_slo(workload='chat', samples=60)", [],  # 60: a p95 can pass at 95%
     r"no LLM server URL: set --llm-latency-url, LLM_LATENCY_URL, ini llm_latency_url, or target\.url", True),
]


def _run_marker(pytester, decorator, args):
    pytester.makepyfile(test_m=f"import pytest\n\n{decorator}\ndef test_chat():\n    pass\n")
    script = Script()
    return pytester.runpytest(*QUIET, *args, plugins=[FakeServerPlugin(script)]), script


@pytest.mark.parametrize("decorator,args,hint,quiet", [pytest.param(*c[1:], id=c[0]) for c in RUNTIME_CASES])
def test_marker_and_url_mistakes_never_pass_and_say_how_to_fix(pytester, decorator, args, hint, quiet):
    r, script = _run_marker(pytester, decorator, args)
    out = r.stdout.str() + r.stderr.str()
    assert r.ret != pytest.ExitCode.OK
    assert re.search(hint, out), out
    if quiet:
        assert script.seen_headers == []


@pytest.mark.parametrize("decorator,args,hint", [pytest.param(*c[1:4], id=c[0]) for c in RUNTIME_CASES])
def test_marker_and_url_mistakes_are_usage_errors_before_any_request(pytester, decorator, args, hint):
    r, script = _run_marker(pytester, decorator, args)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert re.search(hint, r.stderr.str())
    assert script.seen_headers == []


def test_cli_samples_override_is_what_the_percentile_check_uses(pytester):
    text = URL + WL + "    prompt_tokens: 32\n    output_tokens: 4\n    warmup: 0\n    samples: 10\n" \
                      "    confidence: null\n    slo: {ttft_p99: 1s}\n"  # the point estimate's floor
    r, script = run_file(pytester, text.encode(), "--llm-latency-samples=100")
    r.assert_outcomes(passed=1)
    assert len([q for q in script.requests if q["max_tokens"] == 4]) == 100  # + 1 calibration probe
