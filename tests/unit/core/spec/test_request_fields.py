"""Reasoning requests (issue 36): the workload keys ``reasoning`` / ``thinking``, validated, and the one
mapping to each API's request-body fields; every refusal names the key, the API and the fix."""
import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.request_fields import RequestKeys, parse_request_keys, request_fields
from pytest_llm_latency.core.spec.workload import make_workload

EFFORT = RequestKeys(effort="high")
BUDGET = RequestKeys(budget_tokens=512)


def where(path):
    return "f.slo.yaml workloads.w." + ".".join(map(str, path))


@pytest.mark.parametrize("api, keys, fields", [
    ("openai-chat", EFFORT, {"reasoning_effort": "high"}),
    ("openai-chat", BUDGET, {"chat_template_kwargs": {"enable_thinking": True}, "thinking_token_budget": 512,
                             "thinking_budget_tokens": 512}),
    ("openai-chat", RequestKeys("low", 64), {"reasoning_effort": "low",
                                             "chat_template_kwargs": {"enable_thinking": True},
                                             "thinking_token_budget": 64, "thinking_budget_tokens": 64}),
    ("openai-responses", EFFORT, {"reasoning": {"effort": "high"}}),
    ("anthropic-messages", BUDGET, {"thinking": {"type": "enabled", "budget_tokens": 512}}),
    ("ollama", EFFORT, {"think": "high"}),
    ("ollama-chat", RequestKeys(effort="medium"), {"think": "medium"}),
])
def test_each_api_gets_its_own_fields(api, keys, fields):
    assert request_fields(keys, api) == fields


@pytest.mark.parametrize("api", ["openai-completions", "openai-chat", "openai-responses", "anthropic-messages",
                                 "ollama", "ollama-chat"])
def test_no_keys_send_nothing(api):
    assert request_fields(None, api) == {}


@pytest.mark.parametrize("key, keys, api, fix", [
    ("thinking", BUDGET, "openai-completions", "use api anthropic-messages or openai-chat"),
    ("reasoning", EFFORT, "openai-completions", "use api openai-chat or openai-responses"),
    ("reasoning", EFFORT, "anthropic-messages", "use thinking: {budget_tokens: N}"),
    ("thinking", BUDGET, "openai-responses", "use reasoning: {effort: low|medium|high}"),
    ("thinking", BUDGET, "ollama", "use reasoning: {effort: low|medium|high} (sent as think)"),
    ("thinking", BUDGET, "ollama-chat", "use reasoning: {effort: low|medium|high} (sent as think)"),
])
def test_a_key_without_meaning_on_the_api_is_refused_naming_key_api_and_fix(key, keys, api, fix):
    with pytest.raises(ConfigError) as e:
        request_fields(keys, api, "t.py::test workload 'w'")
    msg = str(e.value)
    assert msg.startswith(f"t.py::test workload 'w' {key}: the {api} API has no "), msg
    assert fix in msg and msg.endswith("or drop the key"), msg


def test_the_exact_refusal_of_thinking_on_completions():
    with pytest.raises(ConfigError, match=r"^thinking: the openai-completions API has no thinking field -- use api "
                                          r"anthropic-messages or openai-chat, or drop the key$"):
        request_fields(BUDGET, "openai-completions")


def test_parse_reads_both_keys_and_says_them_back():
    keys = parse_request_keys({"reasoning": {"effort": "medium"}, "thinking": {"budget_tokens": 100}}, 128, where)
    assert keys == RequestKeys("medium", 100)
    assert keys.to_json() == {"reasoning": {"effort": "medium"}, "thinking": {"budget_tokens": 100}}
    assert parse_request_keys({}, 128, where) is None
    assert parse_request_keys({"reasoning": None}, 128, where) is None


@pytest.mark.parametrize("spec, at, says", [
    ({"reasoning": {"effort": "extreme"}}, "workloads.w.reasoning.effort", "expected one of low, medium, high"),
    ({"reasoning": "high"}, "workloads.w.reasoning:", "expected a mapping like reasoning: {effort: high}"),
    ({"reasoning": {"level": "high"}}, "workloads.w.reasoning.level", "reasoning takes effort only"),
    ({"reasoning": {}}, "workloads.w.reasoning:", "reasoning needs effort"),
    ({"thinking": {"budget_tokens": 0}}, "workloads.w.thinking.budget_tokens", "expected a positive integer"),
    ({"thinking": {"budget_tokens": True}}, "workloads.w.thinking.budget_tokens", "expected a positive integer"),
    ({"thinking": {"budget_tokens": "1k"}}, "workloads.w.thinking.budget_tokens", "expected a positive integer"),
    ({"thinking": {"budget_tokens": 128}}, "workloads.w.thinking.budget_tokens",
     "budget_tokens (128) must be below output_tokens (128)"),
])
def test_bad_values_are_refused_at_their_key(spec, at, says):
    with pytest.raises(ConfigError) as e:
        parse_request_keys(spec, 128, where)
    assert at in str(e.value) and says in str(e.value), str(e.value)


def test_the_workload_carries_the_keys_from_yaml_and_marker_alike():
    w = make_workload("w", {"class": "custom", "prompt_tokens": 64, "output_tokens": 256,
                            "reasoning": {"effort": "low"}, "thinking": {"budget_tokens": 200}})
    assert w.request == RequestKeys("low", 200)
    assert make_workload("chat", {}).request is None


def test_the_budget_must_leave_room_in_the_workload_s_output():
    with pytest.raises(ConfigError, match=r"w\.thinking\.budget_tokens: budget_tokens \(128\) must be below "
                                          r"output_tokens \(128\).*raise output_tokens above 128"):
        make_workload("w", {"class": "chat", "thinking": {"budget_tokens": 128}}, where)
    w = make_workload("w", {"class": "custom", "prompt_tokens": 64,
                            "output_tokens": {"distribution": "uniform", "min": 300, "max": 500},
                            "thinking": {"budget_tokens": 299}})
    assert w.request == RequestKeys(budget_tokens=299)
    with pytest.raises(ConfigError, match=r"budget_tokens \(300\) must be below output_tokens \(300\)"):
        make_workload("w", {"class": "custom", "prompt_tokens": 64,
                            "output_tokens": {"distribution": "uniform", "min": 300, "max": 500},
                            "thinking": {"budget_tokens": 300}})
