"""``server_sweep:`` (core.spec.server_sweep): the two forms, every refusal before any request (naming
the key and the fix), and the check of flags against a command's ``--help`` text."""
from __future__ import annotations

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.server_sweep import FLAG_BLOCK, URL_BLOCK, flag_names, unknown_flags
from pytest_llm_latency.core.spec.workload import make_workload

BASE = {"class": "custom", "prompt_tokens": 64, "output_tokens": 8, "slo": {"tpot_p50": "50ms"}}


def sweep(value, **extra):
    return make_workload("w", {**BASE, **extra, "server_sweep": value})


def test_flags_form_keeps_each_arms_arguments_in_order():
    w = sweep({"flags": {"mnbt-512": "--chunked-prefill --max-num-batched-tokens 512",
                         "mnbt-2048": ["--chunked-prefill", "--max-num-batched-tokens", 2048], "plain": ""}})
    s = w.server_sweep
    assert s.mode == "flags" and s.names == ("mnbt-512", "mnbt-2048", "plain")
    assert s.arms[0].flags == ("--chunked-prefill", "--max-num-batched-tokens", "512")
    assert s.arms[1].flags == ("--chunked-prefill", "--max-num-batched-tokens", "2048")
    assert s.arms[2].flags == () and s.arms[2].describe() == "no extra flags"
    assert s.block(40) == FLAG_BLOCK


def test_urls_form_and_the_blocks():
    w = sweep({"urls": {"a": "http://u:secret@a:8000", "b": "reference://h100-sxm/llama-3.1-8b"}, "rounds": 3},
              samples=10)
    s = w.server_sweep
    assert s.mode == "urls" and [a.url for a in s.arms] == ["http://u:secret@a:8000", "reference://h100-sxm/llama-3.1-8b"]
    assert "secret" not in s.arms[0].describe()
    assert s.block(10) == 4  # 3 rounds of 10 requests per arm: blocks of ceil(10 / 3)
    assert sweep({"urls": {"a": "http://a", "b": "http://b"}}).server_sweep.block(20) == URL_BLOCK
    assert sweep({"urls": {"a": "http://a", "b": "http://b"}, "block_size": 7}).server_sweep.block(20) == 7


def test_a_sweep_keeps_fixed_samples_and_point_estimates():
    w = sweep({"urls": {"a": "http://a", "b": "http://b"}})
    assert w.samples == 20 and not w.sequential and w.confidence is None


@pytest.mark.parametrize("value,extra,match", [
    ({"flags": {"only": "--x 1"}}, {}, r"server_sweep\.flags: a server sweep compares settings: it needs at least "
                                        r"two arms, got 1 \(only\)"),
    ({"urls": {}}, {}, "needs at least two arms, got 0"),
    ({"flags": {512: "--x 1", "512": "--x 2"}}, {}, r"arm name '512' is given twice"),
    ({"flags": {"": "--x 1", "b": ""}}, {}, r"arm name '': expected a non-empty name"),
    ({"flags": {"a b": "--x 1", "b": ""}}, {}, r"arm name 'a b'.*no spaces"),
    ({"flags": {"a": "--x 1", "b": "--x 1"}}, {}, r"arms 'a' and 'b' have the same flags"),
    ({"urls": {"a": "http://h", "b": "http://h"}}, {}, r"arms 'a' and 'b' have the same URL"),
    ({"urls": {"a": "http://h", "b": 3}}, {}, r"server_sweep\.urls\.b: expected the URL of a running server"),
    ({"flags": {"a": {"x": 1}, "b": ""}}, {}, r"server_sweep\.flags\.a: expected the flags as one string"),
    ({"flags": {"a": "--x 'unclosed", "b": ""}}, {}, r"cannot split"),
    ({"flags": {"a": "", "b": "-x"}, "urls": {"c": "http://c"}}, {}, r"got both flags and urls"),
    ({"block_size": 3}, {}, r"got neither flags nor urls"),
    ({"flags": {"a": "", "b": "-x"}, "block": 3}, {}, r"unknown key 'block'; did you mean 'block_size'"),
    ({"flags": {"a": "", "b": "-x"}, "block_size": 0}, {}, r"server_sweep\.block_size: expected an integer >= 1"),
    ({"flags": {"a": "", "b": "-x"}, "block_size": 2, "rounds": 2}, {}, r"block_size and rounds both set the blocks"),
    (["--x"], {}, r"server_sweep: expected a mapping"),
    ({"flags": {True: "--chunked-prefill", False: ""}}, {},  # `on:` / `off:` unquoted in YAML 1.1
     r"server_sweep\.flags\.True: arm name True: YAML reads an unquoted on, off, yes, no, true or false as a boolean, "
     r"not a name -- quote it"),
    ({"flags": {"a": "", "b": "-x"}}, {"samples": "auto"}, r"samples: auto does not combine with server_sweep"),
    ({"flags": {"a": "", "b": "-x"}}, {"baseline_target": "http://b"},
     r"server_sweep does not combine with baseline_target"),
    ({"flags": {"a": "", "b": "-x"}}, {"rate_sweep": {"rate_min": 1, "rate_max": 2}},
     r"server_sweep does not combine with rate_sweep"),
])
def test_bad_sweeps_are_refused_naming_the_key(value, extra, match):
    with pytest.raises(ConfigError, match=match):
        sweep(value, **extra)


def test_where_names_the_arm():
    where = lambda path: "f.slo.yaml:9 workloads.w." + ".".join(map(str, path))  # noqa: E731
    w = make_workload("w", {**BASE, "server_sweep": {"flags": {"a": "--x", "b": ""}}}, where)
    assert w.server_sweep.arms[0].where == "f.slo.yaml:9 workloads.w.server_sweep.flags.a"


def test_flag_names_are_the_options_not_their_values():
    assert flag_names(["--max-num-batched-tokens", "512", "--enable-chunked-prefill", "-ub", "256", "--x=3",
                       "-1", "--speculative-config", '{"n": 3}']) == [
        "--max-num-batched-tokens", "--enable-chunked-prefill", "-ub", "--x", "--speculative-config"]


#: the shapes real help texts take: argparse (serve-reference, vllm: "--x, --no-x" and "--[no-]x"), llama.cpp
HELP = """usage: serve [-h] [--port PORT] [--chunked-prefill | --no-chunked-prefill]
  --max-num-batched-tokens MAX_NUM_BATCHED_TOKENS
  --[no-]enable-prefix-caching
  -b,    --batch-size N       logical maximum batch size (default: 2048)
  -ub,   --ubatch-size N      physical maximum batch size (default: 512)
"""


def test_unknown_flags_against_a_help_text():
    assert unknown_flags(["--max-num-batched-tokens", "--chunked-prefill", "--no-chunked-prefill", "-b", "-ub",
                          "--ubatch-size", "--enable-prefix-caching"], HELP) == []
    assert unknown_flags(["--max-num-batched-token", "--no-such-flag", "-u", "--port"], HELP) == [
        "--max-num-batched-token", "--no-such-flag", "-u"]  # a prefix of a flag is not the flag


#: llama-server 0.3.36's ``--help``, verbatim lines: short and long names, negations listed beside the flag
LLAMA_HELP = """-t,    --threads N                      number of CPU threads to use during generation (default: -1)
-b,    --batch-size N                   logical maximum batch size (default: 2048)
-ub,   --ubatch-size N                  physical maximum batch size (default: 512)
-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto', default: 'auto')
--perf, --no-perf                       whether to enable internal libllama performance timings (default:
-kvo,  --kv-offload, -nkvo, --no-kv-offload
-cb,   --cont-batching                  enable continuous batching (a.k.a dynamic batching) (default: enabled)
"""


@pytest.mark.parametrize("flags", [
    ["--no-enable-prefix-caching"],                       # vLLM's --[no-]x: the negation too
    ["--enable-prefix-caching=true"], ["--max-num-batched-tokens=2048"], ["--batch-size=512"],  # --flag=value
])
def test_negations_and_flag_equals_value_spellings_are_listed(flags):
    assert unknown_flags(flag_names(flags), HELP) == []


@pytest.mark.parametrize("flags", [["-b", "512"], ["-ub", "256"], ["--batch-size=1024"], ["-fa", "on"],
                                   ["--flash-attn=off"], ["--no-perf"], ["-nkvo"], ["--no-kv-offload"], ["-cb"],
                                   ["-t", "8", "--threads", "8"]])
def test_llama_servers_short_flags_and_negations_are_listed(flags):
    assert unknown_flags(flag_names(flags), LLAMA_HELP) == []


def test_a_negation_the_help_does_not_list_is_still_refused():
    assert unknown_flags(["--no-batch-size", "--no-", "-nb", "--no-prefix-caching"], LLAMA_HELP + HELP) == [
        "--no-batch-size", "--no-", "-nb", "--no-prefix-caching"]


def test_a_help_text_listing_no_options_skips_the_check():
    assert unknown_flags(["--anything"], "") is None
    assert unknown_flags(["--anything"], "usage: server [options]\n  --help  show this") is None


def test_a_sweep_stays_in_one_process_unless_workers_are_given_and_is_refused_on_ray():
    urls = {"urls": {"a": "http://a", "b": "http://b"}}
    assert sweep(urls, concurrency=4).workers == 1        # a block would spawn and warm processes anew
    assert sweep(urls, concurrency=4, workers=2).workers == 2
    with pytest.raises(ConfigError, match=r"a server sweep \(server_sweep\) on Ray nodes is not yet supported"):
        sweep(urls, concurrency=4, ray="head:6379")
