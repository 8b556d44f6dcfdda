"""A flags sweep's arms against the managed command (``plugin.server_sweep``): each arm's target is the
command with its flags appended (shown as the template, secrets never); a flag the command's ``--help`` does
not list is a configuration error naming the flag and the arm; a help that lists no options, or no help at
all, skips the check with a note; a flags sweep of a URL target is refused."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.plugin.server_sweep import arm_spec, check_flags
from pytest_llm_latency.plugin.session import TargetSpec

HELP = "usage: serve [--port PORT] [--chunked-prefill | --no-chunked-prefill] [--max-num-batched-tokens N]"
TARGET = TargetSpec(url="managed://", api="openai-chat", model="m", command=("serve", "--key", "s3cret", "--port",
                                                                             "{port}"),
                    command_template=("serve", "--key", "${KEY}", "--port", "{port}"), secrets=("s3cret",))


def sweep(flags: dict):
    where = lambda path: "f.slo.yaml:4 workloads.w." + ".".join(map(str, path))  # noqa: E731
    return make_workload("w", {"class": "chat", "server_sweep": {"flags": flags}}, where).server_sweep


def helps(text, why=""):
    asked = []

    def read(command, env):
        asked.append(command)
        return text, why
    return read, asked


def test_known_flags_pass_and_the_help_is_read_once():
    read, asked = helps(HELP)
    assert check_flags(sweep({"c512": "--chunked-prefill --max-num-batched-tokens 512", "plain": ""}), TARGET,
                       read) == []
    assert asked == [TARGET.command]


def test_an_unknown_flag_names_the_flag_the_arm_and_where():
    read, _ = helps(HELP)
    with pytest.raises(ConfigError) as e:
        check_flags(sweep({"ok": "--chunked-prefill", "typo": "--chunked-prefil --max-num-batched-tokens 8"}), TARGET,
                    read)
    msg = str(e.value)
    assert msg.startswith("f.slo.yaml:4 workloads.w.server_sweep.flags.typo: arm 'typo': --chunked-prefil is not a "
                          "flag of the managed command: `serve --key ${KEY} --port {port} --help` lists no such option")
    assert "s3cret" not in msg


@pytest.mark.parametrize("text,why,note", [
    ("usage: serve [options]", "", "printed no list of options"),
    (None, "'--help' did not finish within 60 s", "'--help' did not finish within 60 s"),
])
def test_no_usable_help_skips_the_check_with_a_note(text, why, note):
    read, _ = helps(text, why)
    notes = check_flags(sweep({"a": "--anything", "b": ""}), TARGET, read)
    assert len(notes) == 1 and note in notes[0]
    assert notes[0].startswith("server_sweep: the arms' flags were not checked against the command: `serve --key")


def test_arms_without_flags_need_no_help():
    read, asked = helps(HELP)
    assert check_flags(make_workload("w", {"class": "chat", "server_sweep": {"urls": {"a": "http://a", "b": "http://b"}}}
                                     ).server_sweep, TARGET, read) == [] and asked == []


def test_a_flags_sweep_of_a_url_target_is_refused():
    with pytest.raises(ConfigError, match=r"server_sweep\.flags: a flags sweep appends each arm's flags to the "
                                          r"managed target's command, but the test's target is the URL http://h:1"):
        check_flags(sweep({"a": "--x", "b": ""}), TargetSpec(url="http://h:1", api="openai-chat", model=None))


def test_an_arms_target_is_the_command_with_its_flags():
    arm = sweep({"c512": ["--chunked-prefill", "--max-num-batched-tokens", 512], "plain": ""}).arms[0]
    spec = arm_spec(arm, TARGET)
    assert spec.command == TARGET.command + ("--chunked-prefill", "--max-num-batched-tokens", "512")
    assert spec.command_template[-3:] == ("--chunked-prefill", "--max-num-batched-tokens", "512")
    assert spec.secrets == ("s3cret",) and spec.api == "openai-chat"


def test_an_arms_flags_are_expanded_as_the_command_is_shown_as_written_and_their_values_are_secrets(monkeypatch):
    monkeypatch.setenv("LLM_TEST_ARM_KEY", "arm-TOKEN-1234")
    monkeypatch.setenv("LLM_TEST_SHORT", "on")  # too short to mask: "on" would garble every message
    arm = sweep({"keyed": "--api-key ${LLM_TEST_ARM_KEY} --flash-attn $LLM_TEST_SHORT", "plain": ""}).arms[0]
    spec = arm_spec(arm, TARGET)
    assert spec.command[-4:] == ("--api-key", "arm-TOKEN-1234", "--flash-attn", "on")
    assert spec.command_template[-4:] == ("--api-key", "${LLM_TEST_ARM_KEY}", "--flash-attn", "$LLM_TEST_SHORT")
    assert spec.secrets == ("s3cret", "arm-TOKEN-1234")
    assert arm.describe() == "flags --api-key '${LLM_TEST_ARM_KEY}' --flash-attn '$LLM_TEST_SHORT'"
    assert "arm-TOKEN-1234" not in repr(spec)
