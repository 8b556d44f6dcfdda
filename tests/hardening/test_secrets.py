"""The API key never appears in any output: terminal (-vv), JUnit, JSON, HTML, logs,
a managed server's log tail, error bodies that echo it, or client reprs."""
import sys
from pathlib import Path

import httpx

from pytest_llm_latency.client.http import Redactor, make_http_client
from pytest_llm_latency.client.openai import OpenAIClient
from rawserver import raw_server

SECRET = "sk-test-SECRET"


def _echo_401_server(seen: list):
    """Answers every request 401 with a body that echoes the Authorization header it got."""
    def respond(req: bytes) -> bytes:
        auth = next((ln.split(":", 1)[1].strip() for ln in req.decode("latin-1").split("\r\n")
                     if ln.lower().startswith("authorization:")), "")
        seen.append(auth)
        body = ('{"error": {"message": "invalid api key: %s"}}' % auth).encode()
        return (b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    return raw_server(respond)


def test_secret_absent_from_every_output(pytester, monkeypatch):
    seen: list = []
    port, stop = _echo_401_server(seen)
    dying = Path(__file__).with_name("dying_server.py")
    w = "workloads:\n  w: {class: custom, prompt_tokens: 24, output_tokens: 8, samples: 2, warmup: 0, slo: {ttft_p50: %s}}\n"
    pytester.makefile(".slo.yaml", echo401=f"target: {{url: 'http://127.0.0.1:{port}'}}\n" + w % "60s")
    pytester.makefile(".slo.yaml", tight="target: {url: 'reference://h100-sxm/llama-3.1-8b?time_scale=0.1'}\n"
                      + w % "1us")
    pytester.makefile(".slo.yaml", leaky=f"target: {{command: ['{sys.executable}', '{dying}', '{{port}}', '0'], "
                      f"env: {{LEAK_HEADERS: '1'}}}}\n" + w % "60s")
    monkeypatch.setenv("LLM_LATENCY_API_KEY", SECRET)
    try:
        r = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-vv", "-rA", "--junitxml=j.xml", "--llm-latency-json=r.json",
            "--llm-latency-html=r.html", "--log-level=DEBUG", "-o", "log_cli=true", "--log-file=run.log",
            "--log-file-level=DEBUG", "--showlocals", timeout=120)
    finally:
        stop()
    r.assert_outcomes(failed=3)
    assert f"Bearer {SECRET}" in seen  # the key was really sent
    outputs = {"stdout": r.stdout.str(), "stderr": r.stderr.str()}
    for name in ("j.xml", "r.json", "r.html", "run.log"):
        outputs[name] = (pytester.path / name).read_text()
    assert "invalid api key: Bearer ***" in outputs["stdout"]       # error body shown, key redacted
    assert "headers:" in outputs["stdout"]                           # the leaky log tail is shown...
    for name, text in outputs.items():
        assert SECRET not in text, f"API key leaked into {name}"    # ...but never the key


def test_client_and_header_reprs_hide_the_key():
    http = make_http_client(api_key=SECRET, transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    client = OpenAIClient(http, "http://x", "m", redact=Redactor((SECRET,)))
    assert SECRET not in repr(client) and SECRET not in repr(http.headers) and SECRET not in repr(http)
    req = http.build_request("POST", "http://x/v1/completions")
    assert SECRET not in repr(req.headers) and SECRET not in str(httpx.HTTPStatusError("boom", request=req,
                                                                                        response=httpx.Response(401)))
