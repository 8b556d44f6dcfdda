import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.plugin.options import Settings


def resolve(cli=None, env=None, ini=None):
    return Settings.resolve(cli or {}, env or {}, ini or {})


@pytest.mark.parametrize("cli,env,ini,want,source", [
    ({"seed": "1"}, {"LLM_LATENCY_SEED": "2"}, {"seed": "3"}, 1, "--llm-latency-seed"),
    ({}, {"LLM_LATENCY_SEED": "2"}, {"seed": "3"}, 2, "LLM_LATENCY_SEED (environment)"),
    ({}, {}, {"seed": "3"}, 3, "llm_latency_seed (ini)"),
    ({}, {}, {}, 0, "default"),
])
def test_precedence_cli_env_ini_default(cli, env, ini, want, source):
    s = resolve(cli, env, ini)
    assert s.get("seed") == want and s.source("seed") == source


def test_marker_beats_cli_and_yaml_is_below_ini():
    s = resolve({"samples": "5"}, {}, {"url": "http://ini:1"})
    assert s.pick("samples", marker=9).value == 9
    assert s.pick("samples", yaml=7).value == 5
    assert s.pick("url", yaml="http://yaml:1").value == "http://ini:1"
    assert resolve().pick("url", yaml="http://yaml:1", yaml_source="f.slo.yaml:2").source == "f.slo.yaml:2"


@pytest.mark.parametrize("cli,env,ini,needle", [
    ({"samples": "abc"}, {}, {}, "--llm-latency-samples: 'abc' is not valid for samples: expected a positive integer"),
    ({}, {"LLM_LATENCY_SAMPLES": "0"}, {}, "LLM_LATENCY_SAMPLES (environment): '0'"),
    ({}, {}, {"url": "ftp://x"}, "llm_latency_url (ini): 'ftp://x' is not valid for url"),
    ({"api": "openai"}, {}, {},
     "expected one of openai-completions, openai-chat, openai-responses, anthropic-messages, ollama"),
    ({}, {"LLM_LATENCY_MIN_DECODE_EFFICIENCY": "2"}, {}, "a fraction"),
    ({}, {"LLM_LATENCY_SKIP": "maybe"}, {}, "true or false"),
])
def test_errors_name_their_source(cli, env, ini, needle):
    with pytest.raises(ConfigError) as ei:
        resolve(cli, env, ini)
    assert needle in str(ei.value)


def test_precedence_end_to_end(pytester, monkeypatch):
    pytester.makeini("[pytest]\nllm_latency_seed = 3\nllm_latency_model = ini-model\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    monkeypatch.setenv("LLM_LATENCY_SEED", "2")
    r = pytester.runpytest("--llm-latency-url=http://h:1")
    r.stdout.fnmatch_lines(["*model=ini-model seed=2"])
    r = pytester.runpytest("--llm-latency-url=http://h:1", "--llm-latency-seed=1")
    r.stdout.fnmatch_lines(["*seed=1"])
    monkeypatch.setenv("LLM_LATENCY_SEED", "x")
    r = pytester.runpytest("--llm-latency-url=http://h:1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*LLM_LATENCY_SEED (environment): 'x' is not valid for seed*"])
