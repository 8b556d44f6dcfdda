"""reference:// URLs, the config table, the CLI, and both start modes (start, serve, stop, no leftovers)."""
from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.targets.process import ManagedTargetError
from pytest_llm_latency.targets.reference import tokenizer
from pytest_llm_latency.targets.reference.config import ReferenceConfig
from pytest_llm_latency.targets.reference.launch import parse_reference_url, start_reference


def test_parse_url_full():
    cfg = parse_reference_url("reference://h100-sxm/llama-3.1-8b?efficiency=0.7&time_scale=1"
                              "&max_num_seqs=8&prefix_caching&chunked_prefill=yes"
                              "&max_num_batched_tokens=512&fault=stall;after=2")
    assert (cfg.hardware, cfg.model, cfg.efficiency, cfg.time_scale) == ("h100-sxm", "llama-3.1-8b", 0.7, 1.0)
    assert cfg.max_num_seqs == 8 and cfg.prefix_caching and cfg.chunked_prefill
    assert cfg.max_num_batched_tokens == 512 and cfg.fault == "stall;after=2"
    assert cfg.physics().decode_efficiency == 0.7 and cfg.physics().prefill_efficiency == 0.7


def test_parse_url_defaults_and_aliases():
    cfg = parse_reference_url("reference://H100/llama-3.1-8b")
    phys = cfg.physics()
    assert phys.decode_efficiency == 0.7 and phys.prefill_efficiency == 0.5
    assert cfg.model_name == "llama-3.1-8b" and cfg.context_length() == 131072
    assert parse_reference_url("reference://h100-sxm/llama-3.1-8b?served_model_name=x").model_name == "x"


@pytest.mark.parametrize("url, needle", [
    ("http://h100-sxm/llama-3.1-8b", "scheme must be reference://"),
    ("reference://h100-sxm", "expected reference://HARDWARE/MODEL"),
    ("reference://h100-sxn/llama-3.1-8b", "did you mean h100-sxm"),
    ("reference://h100-sxm/llama-3.1-8c", "did you mean llama-3.1-8b"),
    ("reference://h100-sxm/llama-3.1-8b?eficiency=0.7", "did you mean efficiency"),
    ("reference://h100-sxm/llama-3.1-8b?efficiency=fast", "bad value 'fast' for efficiency"),
    ("reference://h100-sxm/llama-3.1-8b?efficiency=1.5", "must be in (0, 1]"),
    ("reference://h100-sxm/llama-3.1-8b?time_scale=-1", "time_scale must be a finite number >= 0"),
    ("reference://h100-sxm/llama-3.1-8b?time_scale=inf", "time_scale must be a finite number >= 0"),
    ("reference://h100-sxm/llama-3.1-8b?prefix_caching=maybe", "bad value 'maybe'"),
    ("reference://h100-sxm/llama-3.1-8b?max_num_batched_tokens=64", "needs chunked_prefill"),
    ("reference://h100-sxm/llama-3.1-8b?fault=stal", "did you mean stall"),
    ("reference://h100-sxm/llama-3.1-8b?fault=stall;wait=3", "has no parameter"),
    ("reference://h100-sxm/llama-3.1-8b?time_scale=1&time_scale=2", "given twice"),
    ("reference://h100-sxm/llama-3.1-8b?model=x", "goes in the URL path"),
    ("reference://a10g/llama-3.1-8b?gpu_memory_utilization=0.5", "do not fit"),
])
def test_parse_url_errors(url, needle):
    with pytest.raises(ConfigError) as exc:
        parse_reference_url(url)
    assert needle in str(exc.value)


def test_cli_args_round_trip():
    cfg = parse_reference_url("reference://h100-sxm/llama-3.1-8b?efficiency=0.8&prefix_caching=1"
                              "&max_num_seqs=4&served_model_name=m")
    from pytest_llm_latency.cli.main import build_parser
    from pytest_llm_latency.cli.serve_reference import config_from_args

    args = build_parser().parse_args(["serve-reference", *cfg.to_cli_args()])
    assert config_from_args(args) == cfg
    assert ReferenceConfig().to_cli_args() == []


def test_tokenizer_rule_and_chat_template_tokens():
    assert tokenizer.count("a  b\tc\nd") == 4
    assert tokenizer.encode("x y") == [tokenizer.encode_word("x"), tokenizer.encode_word("y")]
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there you"}]
    rendered = tokenizer.render_chat(msgs)
    assert tokenizer.count(rendered) == 5 + 2 * 2 + 1  # content + 2 per message + 1 (module docstring)
    parts = [{"role": "user", "content": [{"type": "text", "text": "a b"}, {"type": "text", "text": "c"}]}]
    assert tokenizer.count(tokenizer.render_chat(parts)) == 3 + 3
    g1, g2 = tokenizer.TextGenerator(7), tokenizer.TextGenerator(7)
    assert g1.next(5) == g2.next(2) + g2.next(3)
    assert tokenizer.count(g1.next(40)) == 40 and g1.next(40).isascii()
    lengths = {tokenizer.natural_length(s) for s in range(200)}
    assert min(lengths) >= 1 and len(lengths) > 50


def test_thread_mode_serves_and_stops():
    handle = start_reference("reference://h100-sxm/llama-3.1-8b?time_scale=0", mode="thread")
    with handle:
        assert httpx.get(handle.url + "/health", timeout=5).status_code == 200
    assert handle.thread is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(handle.url + "/health", timeout=2)


def test_subprocess_mode_serves_and_stops():
    handle = start_reference(parse_reference_url("reference://h100-sxm/llama-3.1-8b?time_scale=0"))
    pid = handle.pid
    with handle:
        models = httpx.get(handle.url + "/v1/models", timeout=5).json()
        assert models["data"][0]["max_model_len"] == 131072
    assert handle.proc is None
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(pid, 0)        # reaped: the pid is gone
            time.sleep(0.05)


@pytest.mark.parametrize("mode", ["subprocess", "thread"])
def test_start_failure_is_a_managed_target_error(mode):
    """One process manager, one error type: the log tail names the cause."""
    with socket.socket() as busy:                      # the port is taken: bind fails
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cfg = ReferenceConfig(port=busy.getsockname()[1])
        with pytest.raises(ManagedTargetError) as exc:
            start_reference(cfg, mode=mode, startup_timeout=15)
    assert "before becoming ready" in str(exc.value) or "failed to start" in str(exc.value)
    assert "address already in use" in str(exc.value).lower()


def test_cli_prints_url_and_exits_on_sigterm():
    proc = subprocess.Popen([sys.executable, "-m", "pytest_llm_latency.cli", "serve-reference", "--port", "0",
                             "--time-scale", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "no URL line within 20 s"
        line = proc.stdout.readline().decode().strip()
        assert line.startswith("http://127.0.0.1:")
        assert httpx.get(line + "/health", timeout=5).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
        proc.stderr.close()


def test_cli_rejects_bad_config():
    out = subprocess.run([sys.executable, "-m", "pytest_llm_latency.cli", "serve-reference",
                          "--hardware", "h100-sxn"], capture_output=True, timeout=30)
    assert out.returncode == 2 and b"did you mean h100-sxm" in out.stderr


def test_check_alive_reports_a_dead_server():
    handle = start_reference(ReferenceConfig(time_scale=0))
    try:
        handle.check_alive()
        handle.proc.kill()
        handle.proc.wait(5)
        with pytest.raises(ManagedTargetError) as exc:
            handle.check_alive()
        assert "exit code -9 (killed by SIGKILL)" in str(exc.value)
        assert os.path.exists(handle.target.log_path), "a dead server's log is kept"
    finally:
        handle.stop()
