"""The fault matrix: every fault a server or proxy produces ends in a test that fails
(or errors) and names it; nothing hangs, nothing passes.  Faults come from the reference
target's fault modes, a managed server that dies mid-run, and a raw-socket server for
HTTP protocol violations.

All faults run in one pytest subprocess (one start-up, and the slow faults' timeouts
overlap nothing else), once per module; each fault is then judged by its own test, so
one fault's regression does not hide another's.
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_llm_latency.targets.process import free_port
from tests.helpers.rawserver import raw_server

RUN_TIMEOUT_S = 300          # the whole matrix: ~45 s on a quiet 2-core machine
# the slow tier: every fault against raw servers in one plugin run (~1 min)
pytestmark = [pytest.mark.timeout(RUN_TIMEOUT_S + 60), pytest.mark.slow_tier]

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0.05"
# 2 samples: faults, not statistics -> the point estimate (no sample size up to 4 decides a p50 at 95%)
WORKLOAD = ("workloads:\n  w: {class: custom, prompt_tokens: %d, output_tokens: 8, samples: 2, warmup: 0, "
            "confidence: null, slo: {ttft_p50: 60s}}\n")

# name -> (target YAML, prompt tokens)
FAULTS = {
    "refused": ("{url: 'http://127.0.0.1:%(closed)d'}", 32),
    "reset": (f"{{url: '{REF}&fault=reset;after=2'}}", 32),
    "stall": (f"{{url: '{REF}&fault=stall;after=1;seconds=8'}}", 32),
    "trickle": (f"{{url: '{REF}&fault=trickle;max_seconds=20'}}", 32),
    "http_429": (f"{{url: '{REF}&fault=429;retry_after=1'}}", 32),
    "http_503": (f"{{url: '{REF}&fault=503'}}", 32),
    "context_length": (f"{{url: '{REF}&max_model_len=96'}}", 100),
    "unknown_model": (f"{{url: '{REF}', model: no-such-model}}", 32),
    "html_502": (f"{{url: '{REF}&fault=html502'}}", 32),
    "malformed_json": (f"{{url: '{REF}&fault=malformed_json;after=1'}}", 32),
    "no_done": (f"{{url: '{REF}&fault=no_done'}}", 32),
    "error_event": (f"{{url: '{REF}&fault=error_event;after=1'}}", 32),
    "early_stop": (f"{{url: '{REF}&fault=early_stop;after=3'}}", 32),
    "huge_line": (f"{{url: '{REF}&fault=huge_line;after=1;bytes=6000000'}}", 32),
    "wrong_content_type": (f"{{url: '{REF}&fault=wrong_content_type'}}", 32),
    "server_dies": ("{command: ['%(python)s', '%(dying)s', '{port}', '2'], ready: /health, startup_timeout: 30}", 32),
    "raw_garbage": ("{url: 'http://127.0.0.1:%(raw_garbage)d'}", 32),
    "raw_bad_chunk": ("{url: 'http://127.0.0.1:%(raw_bad_chunk)d'}", 32),
}

# name -> (pytest outcome: "failed" = the server is at fault, "error" = the run could not
# be judged; substrings the message must contain).  The one table to edit when a
# fault's verdict changes.
EXPECTED = {
    "refused": ("error", ["cannot connect"]),
    "reset": ("failed", ["closed mid-stream"]),
    "stall": ("failed", ["stall: no bytes", "idle timeout"]),
    "trickle": ("failed", ["total timeout of 4s"]),
    "http_429": ("failed", ["HTTP 429", "after 2 retries", "Retry-After: 1"]),
    "http_503": ("failed", ["HTTP 503"]),
    "context_length": ("error", ["prompt too long for max_model_len: 100 prompt + 8 output = 108 tokens "
                                  "> max_model_len 96"]),
    "unknown_model": ("error", ["no-such-model", "served models: llama-3.1-8b"]),
    "html_502": ("failed", ["non-SSE response (text/html)", "proxy"]),
    "malformed_json": ("failed", ["malformed JSON"]),
    "no_done": ("failed", ["without 'data: [DONE]'"]),
    "error_event": ("failed", ["error event inside a 200 stream"]),
    "early_stop": ("error", ["stopped before the forced 8 output tokens"]),
    "huge_line": ("failed", ["cap"]),
    "wrong_content_type": ("error", ["non-SSE response (application/json)"]),
    "server_dies": ("failed", ["simulated crash", "exit"]),
    "raw_garbage": ("failed", ["invalid HTTP response"]),
    "raw_bad_chunk": ("failed", ["RemoteProtocolError"]),
}

_JUNIT_OUTCOMES = {"failure": "failed", "error": "error", "skipped": "skipped"}


@dataclass
class MatrixRun:
    returncode: int
    output: str
    cases: dict[str, list[tuple[str, str]]]     # fault -> [(outcome, message)] per JUnit testcase

    def tail(self, n: int = 3000) -> str:
        return self.output[-n:]


@pytest.fixture(scope="module")
def raw_servers():
    garbage, stop1 = raw_server(lambda req: b"SSH-2.0-OpenSSH_9.6 not http at all\r\n\r\n")
    bad_chunk, stop2 = raw_server(lambda req: b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n"
                                   b"1f\r\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\n\r\nzz\r\n")
    yield {"raw_garbage": garbage, "raw_bad_chunk": bad_chunk}
    stop1()
    stop2()


def _parse_junit(path: Path) -> dict[str, list[tuple[str, str]]]:
    cases: dict[str, list[tuple[str, str]]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        fault = (case.get("classname") or "").split(".slo", 1)[0]
        outcome, message = "passed", ""
        for child in case:
            if child.tag in _JUNIT_OUTCOMES:
                outcome = _JUNIT_OUTCOMES[child.tag]
                message = (child.get("message") or "") + "\n" + (child.text or "")
                break
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        if outcome == "failed" and props.get("llm.verdict") == "error":
            # pytest counts an unjudgeable test as an error, but junitxml writes <failure>
            # for every call-phase report; the verdict property says which it was
            outcome = "error"
        cases.setdefault(fault, []).append((outcome, message))
    return cases


@pytest.fixture(scope="module")
def matrix(tmp_path_factory, raw_servers) -> MatrixRun:
    """Every fault as one ``.slo.yaml`` file, all run in one pytest subprocess."""
    root = tmp_path_factory.mktemp("fault_matrix")
    (root / "pytest.ini").write_text("[pytest]\n")          # this folder is the rootdir
    values = {"closed": free_port(), "python": sys.executable,
              "dying": str(Path(__file__).with_name("dying_server.py")), **raw_servers}
    for name, (target, prompt) in FAULTS.items():
        (root / f"{name}.slo.yaml").write_text(f"target: {target % values}\n" + WORKLOAD % prompt)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LLM_LATENCY_") and k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env["PY_COLORS"] = "0"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--junitxml=j.xml",
           "--llm-latency-idle-timeout=1.5", "--llm-latency-total-timeout=4", "--llm-latency-connect-timeout=2"]
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"the fault matrix did not finish in {RUN_TIMEOUT_S} s (a fault hangs):\n{out[-3000:]}")
    output = proc.stdout + proc.stderr
    junit = root / "j.xml"
    if not junit.exists():
        pytest.fail(f"the fault matrix wrote no JUnit XML (exit {proc.returncode}):\n{output[-3000:]}")
    return MatrixRun(proc.returncode, output, _parse_junit(junit))


def test_expected_table_covers_every_fault():
    assert set(EXPECTED) == set(FAULTS)
    assert {outcome for outcome, _ in EXPECTED.values()} <= {"failed", "error"}


def test_matrix_run_ends_with_test_failures_only(matrix):
    """Exit code 1 (tests failed): no usage error, internal error or interruption, and
    no test that belongs to no fault."""
    assert matrix.returncode == 1, matrix.tail()
    assert set(matrix.cases) == set(FAULTS), (sorted(matrix.cases), matrix.tail())
    errors = sum(1 for outcome, _ in EXPECTED.values() if outcome == "error")
    final = matrix.output.strip().splitlines()[-1]
    assert f"{len(EXPECTED) - errors} failed" in final and f"{errors} error" in final, \
        f"pytest's own counts: {final}"


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_fails_and_is_named(matrix, fault):
    outcome, needles = EXPECTED[fault]
    cases = matrix.cases.get(fault)
    assert cases, f"no result for {fault}: {sorted(matrix.cases)}\n{matrix.tail()}"
    assert len(cases) == 1, f"{fault}: {len(cases)} results: {cases}"
    got, message = cases[0]
    assert got == outcome, f"{fault}: expected {outcome}, got {got}:\n{message}"
    for needle in needles:
        assert needle in message, f"{fault}: {needle!r} not in:\n{message}"
