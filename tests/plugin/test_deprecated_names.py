"""Old names through pytest: each works this release and warns once with a
``LatencyDeprecationWarning`` naming the new one (in pytest's warnings summary); ``-W
error::pytest_llm_latency.LatencyWarning`` leaves it a warning; old and new together are a usage
or collection error naming both.  One test per old name on purpose: every other test uses the
new names.  The decode gate's figures: the reference target decodes at 0.7 of its ceiling."""
import pytest

from pytest_llm_latency.cli.main import main

SLO = """
target: {{url: "reference://h100-sxm/llama-3.1-8b?efficiency=0.7"}}
{roof}
workloads:
  decode:
    class: custom
    prompt_tokens: 64
    output_tokens: 64
    samples: 5
    warmup: 1
{extra}"""
DEPRECATED = "LatencyDeprecationWarning"


def run(pytester, *args, roof="", extra=""):
    pytester.makefile(".slo.yaml", gate=SLO.format(roof=roof, extra=extra))
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def collect(pytester, *args, roof="", extra=""):
    return run(pytester, "--collect-only", "-q", *args, roof=roof, extra=extra)


def test_old_min_efficiency_flag_is_used_and_warns_with_the_new_name(pytester):
    # 0.8 above the measured 0.7: the failure shows the old flag's value was the one judged
    r = run(pytester, "--llm-latency-min-efficiency=0.8")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*budget ≥ 0.80*",
                            f"*{DEPRECATED}: --llm-latency-min-efficiency is deprecated, use "
                            "--llm-latency-min-decode-efficiency instead (the old name works for this release)*"])
    assert r.stdout.str().count(f"{DEPRECATED}:") == 1  # once per run


def test_error_on_latency_warnings_leaves_a_deprecation_a_warning(pytester):
    r = collect(pytester, "--llm-latency-min-efficiency=0.8", "-W", "error::pytest_llm_latency.LatencyWarning")
    assert r.ret == pytest.ExitCode.OK
    r.stdout.fnmatch_lines([f"*{DEPRECATED}: --llm-latency-min-efficiency is deprecated*", "*1 test collected*"])


def test_old_env_and_ini_names_warn(pytester, monkeypatch):
    monkeypatch.setenv("LLM_LATENCY_MAX_REGRESSION", "ttft_p95=10%")
    pytester.makeini("[pytest]\nllm_latency_min_efficiency = 0.5\n")
    r = collect(pytester)
    assert r.ret == pytest.ExitCode.OK
    r.stdout.fnmatch_lines_random([
        f"*{DEPRECATED}: LLM_LATENCY_MAX_REGRESSION (environment) is deprecated, use LLM_LATENCY_REGRESSION "
        "(environment) instead*",
        f"*{DEPRECATED}: llm_latency_min_efficiency (ini) is deprecated, use llm_latency_min_decode_efficiency "
        "(ini) instead*"])


def test_old_max_regression_value_is_the_one_validated(pytester):
    r = collect(pytester, "--llm-latency-max-regression=tfft_p95=10%")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "--llm-latency-max-regression: unknown regression key 'tfft_p95'" in r.stderr.str()


def test_the_deprecation_can_itself_be_made_an_error(pytester):
    r = collect(pytester, "--llm-latency-max-regression=ttft_p95=10%",
                "-W", "error::pytest_llm_latency.LatencyDeprecationWarning")
    assert r.ret != pytest.ExitCode.OK
    assert "--llm-latency-max-regression is deprecated" in r.stdout.str() + r.stderr.str()


def test_old_and_new_flags_together_are_a_usage_error(pytester):
    r = collect(pytester, "--llm-latency-max-regression=ttft_p95=10%", "--llm-latency-regression=ttft_p95=5%")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--llm-latency-max-regression (deprecated) and --llm-latency-regression are both given: keep "
            "--llm-latency-regression only") in r.stderr.str()


def test_new_names_warn_nothing(pytester):
    r = run(pytester, "--llm-latency-min-decode-efficiency=0.5", "--llm-latency-regression=ttft_p95=10%",
            roof="roofline: {min_decode_efficiency: 0.5}")
    r.assert_outcomes(passed=1)
    assert DEPRECATED not in r.stdout.str()
    extra = ("  sweep_wl:\n    class: chat\n    requests: 20\n    rate_sweep: {rate_min: 1, rate_max: 2}\n"
             "  prefill:\n    prompt_sweep: [64, 128]\n    samples: 2\n    roofline: {min_prefill_efficiency: 0.3}\n")
    r = collect(pytester, extra=extra)
    assert r.ret == pytest.ExitCode.OK and "3 tests collected" in r.stdout.str()
    assert DEPRECATED not in r.stdout.str() and "warning" not in r.stdout.str()


def test_file_roofline_min_efficiency_is_used_and_warns_naming_the_file(pytester):
    r = run(pytester, roof="roofline: {min_efficiency: 0.8}")
    r.assert_outcomes(failed=1)
    assert r.stdout.str().count(f"{DEPRECATED}:") == 1
    r.stdout.fnmatch_lines(["*budget ≥ 0.80*",
                            f"*{DEPRECATED}: gate.slo.yaml:2 roofline.min_efficiency is deprecated: use "
                            "'roofline.min_decode_efficiency' instead*"])


def test_workload_yaml_keys_warn_naming_file_workload_and_new_key(pytester):
    extra = ("    roofline: {min_efficiency: 0.5}\n"
             "  sweep_wl:\n    class: chat\n    requests: 20\n    sweep: {rate_min: 1, rate_max: 2}\n"
             "  prefill:\n    prompt_sweep: [64, 128]\n    samples: 2\n    slo: {min_prefill_efficiency: 0.3}\n")
    r = collect(pytester, extra=extra)
    assert r.ret == pytest.ExitCode.OK
    r.stdout.fnmatch_lines_random([
        "*gate.slo.yaml:10 workloads.decode.roofline.min_efficiency is deprecated: use "
        "'roofline.min_decode_efficiency' instead*",
        "*gate.slo.yaml:14 workloads.sweep_wl.sweep is deprecated: use 'rate_sweep' instead*",
        "*gate.slo.yaml:18 workloads.prefill.slo.min_prefill_efficiency is deprecated: use "
        "'roofline.min_prefill_efficiency' instead*"])
    assert r.stdout.str().count(DEPRECATED) == 3


def test_old_and_new_yaml_keys_together_are_a_collection_error(pytester):
    r = collect(pytester, extra="    sweep: {rate_min: 1, rate_max: 2}\n    rate_sweep: {rate_min: 1, rate_max: 2}\n")
    assert r.ret == pytest.ExitCode.INTERRUPTED
    r.stdout.fnmatch_lines(["*gate.slo.yaml:10 workloads.decode.sweep: both 'sweep' (deprecated) and 'rate_sweep' "
                            "are given: keep 'rate_sweep' only*"])


MARKED = """
import pytest

@pytest.mark.llm_slo(workload="chat", requests=20, sweep={"rate_min": 1, "rate_max": 2},
                     url="reference://h100-sxm/llama-3.1-8b")
def test_marked():
    pass
"""


def test_an_old_marker_argument_warns(pytester):
    pytester.makepyfile(MARKED)
    r = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert r.ret == pytest.ExitCode.OK
    r.stdout.fnmatch_lines([f"*{DEPRECATED}: test_an_old_marker_argument_warns.py::test_marked @llm_slo sweep is "
                            "deprecated: use 'rate_sweep' instead*"])


def test_the_old_sweep_subcommand_runs_and_names_rate_sweep(capsys):
    argv = ["--url", "http://x", "--class", "chat", "--rate-min", "5", "--rate-max", "1"]
    assert main(["sweep"] + argv) == 2  # it ran: the range is checked by rate-sweep itself
    err = capsys.readouterr().err
    assert "pytest-llm-latency: 'sweep' is deprecated, use 'pytest-llm-latency rate-sweep' instead" in err
    assert "pytest-llm-latency rate-sweep: --rate-min/--rate-max: rate_min (5) must be below rate_max (1)" in err
    assert main(["rate-sweep"] + argv) == 2
    assert "deprecated" not in capsys.readouterr().err


def test_compare_old_max_regression_flag(tmp_path, capsys):
    missing = str(tmp_path / "none.json")
    assert main(["compare", missing, missing, "--max-regression", "ttft_p95=lots"]) == 2
    err = capsys.readouterr().err
    assert "'--max-regression' is deprecated, use '--regression' instead" in err
    assert "--max-regression: regression ttft_p95: expected a percentage" in err  # its value was the one read
    assert main(["compare", missing, missing, "--max-regression", "ttft_p95=5%", "--regression", "ttft_p95=5%"]) == 2
    assert "--max-regression (deprecated) and --regression are both given" in capsys.readouterr().err


def test_the_shipped_examples_use_no_old_name(pytester):
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "example_slos"
    for f in src.glob("*.slo.yaml"):
        shutil.copy(f, pytester.path / f.name)
    shutil.copy(src / "pytest.ini", pytester.path / "pytest.ini")
    r = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert r.ret == pytest.ExitCode.OK and DEPRECATED not in r.stdout.str(), r.stdout.str()
