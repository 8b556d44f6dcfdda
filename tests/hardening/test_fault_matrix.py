"""The fault matrix: every fault a server or proxy produces ends in a failed test
that names it; nothing hangs, nothing passes.  Faults come from the reference
target's fault modes, a managed server that dies mid-run, and a raw-socket
server for HTTP protocol violations."""
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_llm_latency.targets.process import free_port
from rawserver import raw_server

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05"
WORKLOAD = "workloads:\n  w: {class: custom, prompt_tokens: %d, output_tokens: 8, samples: 2, warmup: 0, slo: {ttft_p50: 60s}}\n"

# name -> (target YAML, prompt tokens, substrings the failure message must contain)
FAULTS = {
    "refused": ("{url: 'http://127.0.0.1:%(closed)d'}", 32, ["cannot connect"]),
    "reset": (f"{{url: '{REF}&fault=reset;after=2'}}", 32, ["closed mid-stream"]),
    "stall": (f"{{url: '{REF}&fault=stall;after=1;seconds=8'}}", 32, ["stall: no bytes", "idle timeout"]),
    "trickle": (f"{{url: '{REF}&fault=trickle;max_seconds=20'}}", 32, ["total timeout of 4s"]),
    "http_429": (f"{{url: '{REF}&fault=429;retry_after=1'}}", 32, ["HTTP 429", "after 2 retries", "Retry-After: 1"]),
    "http_503": (f"{{url: '{REF}&fault=503'}}", 32, ["HTTP 503"]),
    "context_length": (f"{{url: '{REF}&max_model_len=96'}}", 100,
                       ["prompt too long for max_model_len: 100 prompt + 8 output = 108 tokens > max_model_len 96"]),
    "unknown_model": (f"{{url: '{REF}', model: no-such-model}}", 32, ["no-such-model", "served models: llama-3.1-8b"]),
    "html_502": (f"{{url: '{REF}&fault=html502'}}", 32, ["non-SSE response (text/html)", "proxy"]),
    "malformed_json": (f"{{url: '{REF}&fault=malformed_json;after=1'}}", 32, ["malformed JSON"]),
    "no_done": (f"{{url: '{REF}&fault=no_done'}}", 32, ["without 'data: [DONE]'"]),
    "error_event": (f"{{url: '{REF}&fault=error_event;after=1'}}", 32, ["error event inside a 200 stream"]),
    "early_stop": (f"{{url: '{REF}&fault=early_stop;after=3'}}", 32, ["stopped before the forced 8 output tokens"]),
    "huge_line": (f"{{url: '{REF}&fault=huge_line;after=1;bytes=6000000'}}", 32, ["cap"]),
    "wrong_content_type": (f"{{url: '{REF}&fault=wrong_content_type'}}", 32, ["non-SSE response (application/json)"]),
    "server_dies": ("{command: ['%(python)s', '%(dying)s', '{port}', '2'], ready: /health, startup_timeout: 30}", 32,
                    ["simulated crash", "exit"]),
    "raw_garbage": ("{url: 'http://127.0.0.1:%(raw_garbage)d'}", 32, ["invalid HTTP response"]),
    "raw_bad_chunk": ("{url: 'http://127.0.0.1:%(raw_bad_chunk)d'}", 32, ["RemoteProtocolError"]),
}


@pytest.fixture
def raw_servers():
    garbage, stop1 = raw_server(lambda req: b"SSH-2.0-OpenSSH_9.6 not http at all\r\n\r\n")
    bad_chunk, stop2 = raw_server(lambda req: b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n"
                                   b"1f\r\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\n\r\nzz\r\n")
    yield {"raw_garbage": garbage, "raw_bad_chunk": bad_chunk}
    stop1()
    stop2()


def test_fault_matrix(pytester, raw_servers):
    values = {"closed": free_port(), "python": sys.executable,
              "dying": str(Path(__file__).with_name("dying_server.py")), **raw_servers}
    for name, (target, prompt, _) in FAULTS.items():
        pytester.makefile(".slo.yaml", **{name: f"target: {target % values}\n" + WORKLOAD % prompt})
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--junitxml=j.xml", "-n", "0",
                                      "--llm-latency-idle-timeout=1.5", "--llm-latency-total-timeout=4",
                                      "--llm-latency-connect-timeout=2", timeout=240)
    outcomes = r.parseoutcomes()
    assert outcomes.get("failed") == len(FAULTS) and not outcomes.get("passed"), r.stdout.str()[-3000:]
    root = ET.parse(pytester.path / "j.xml").getroot()
    messages = {}
    for case in root.iter("testcase"):
        fail = case.find("failure")
        assert fail is not None, f"{case.get('classname')}::{case.get('name')} did not fail"
        messages[f"{case.get('classname')}::{case.get('name')}"] = (fail.get("message") or "") + (fail.text or "")
    for name, (_, _, needles) in FAULTS.items():
        msg = next((m for k, m in messages.items() if k.startswith(name + ".slo")), None)
        assert msg is not None, f"no result for {name}: {sorted(messages)}"
        for needle in needles:
            assert needle in msg, f"{name}: {needle!r} not in:\n{msg}"
