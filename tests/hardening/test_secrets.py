"""The API key never appears in any output: terminal (-vv), JUnit, JSON, HTML, logs,
a managed server's log tail, error bodies that echo it, or client reprs."""
import sys
from pathlib import Path

import httpx
import pytest

from pytest_llm_latency.client.transport.http import Redactor, make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from tests.helpers.rawserver import raw_server

SECRET = "sk-test-SECRET"


def _echo_401_server(seen: list):
    """Answers every request 401 with a body that echoes the Authorization and x-api-key headers it got."""
    def respond(req: bytes) -> bytes:
        auth = " ".join(ln.split(":", 1)[1].strip() for ln in req.decode("latin-1").split("\r\n")
                        if ln.lower().startswith(("authorization:", "x-api-key:")))
        seen.append(auth)
        body = ('{"error": {"message": "invalid api key: %s"}}' % auth).encode()
        return (b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    return raw_server(respond)


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
def test_secret_absent_from_every_output(pytester, monkeypatch, api):
    # 2 samples per workload (secrets, not statistics): the point estimate throughout this file
    seen: list = []
    port, stop = _echo_401_server(seen)
    dying = Path(__file__).with_name("dying_server.py")
    w = ("workloads:\n  w: {class: custom, prompt_tokens: 24, output_tokens: 8, samples: 2, warmup: 0, "
         "confidence: null, slo: {ttft_p50: %s}}\n")
    pytester.makefile(".slo.yaml", echo401=f"target: {{url: 'http://127.0.0.1:{port}', api: {api}}}\n" + w % "60s")
    # ignore_eos: Messages cannot ask for forced lengths; the server forces them (a short output would be an error)
    pytester.makefile(".slo.yaml", tight="target: {url: 'reference://h100-sxm/llama-3.1-8b?time_scale=0.1&"
                      "ignore_eos=1', "
                      f"api: {api}}}\n" + w % "1us")
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
    r.assert_outcomes(failed=2, errors=1)  # the 401 target cannot be judged: an error
    assert any(f"Bearer {SECRET}" in h for h in seen)  # the key was really sent
    if api == "anthropic-messages":
        assert any(h.endswith(f" {SECRET}") for h in seen)  # and as x-api-key, echoed back too
    outputs = {"stdout": r.stdout.str(), "stderr": r.stderr.str()}
    for name in ("j.xml", "r.json", "r.html", "run.log"):
        outputs[name] = (pytester.path / name).read_text()
    assert "invalid api key: Bearer ***" in outputs["stdout"]       # error body shown, key redacted
    assert "headers:" in outputs["stdout"]                           # the leaky log tail is shown...
    for name, text in outputs.items():
        assert SECRET not in text, f"API key leaked into {name}"    # ...but never the key


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_client_and_header_reprs_hide_the_key(api):
    from pytest_llm_latency.client.apis.target import Target, make_client

    sent: list[httpx.Request] = []
    http = make_http_client(api_key=SECRET, transport=httpx.MockTransport(lambda r: sent.append(r) or
                                                                          httpx.Response(500)))
    client = make_client(Target("http://x", api, "m"), http, redact=Redactor((SECRET,)))
    assert SECRET not in repr(client) and SECRET not in repr(http.headers) and SECRET not in repr(http)
    assert SECRET not in repr(http.auth) and SECRET not in repr(vars(client))
    http.post("http://x/v1/messages", json={})
    assert sent[-1].headers["authorization"] == f"Bearer {SECRET}"   # the key is really sent...
    if api == "anthropic-messages":
        assert sent[-1].headers["x-api-key"] == SECRET                # ...as Anthropic's header too
    client = OpenAIClient(http, "http://x", "m", redact=Redactor((SECRET,)))
    assert SECRET not in repr(client)
    req = http.build_request("POST", "http://x/v1/completions")
    assert SECRET not in repr(req.headers) and SECRET not in str(httpx.HTTPStatusError("boom", request=req,
                                                                                        response=httpx.Response(401)))


# ------------------------------------------------------------- every kind of secret
TOKEN = "hf_EXPANDED_token_4711"
PASSWORD = "url-PASSWORD-0815"


def _outputs(pytester, r) -> dict[str, str]:
    out = {"stdout": r.stdout.str(), "stderr": r.stderr.str()}
    for name in ("j.xml", "r.json", "r.html", "run.log"):
        path = pytester.path / name
        out[name] = path.read_text() if path.exists() else ""
    return out


REPORTS = ("-p", "no:cacheprovider", "-vv", "-rA", "--junitxml=j.xml", "--llm-latency-json=r.json",
           "--llm-latency-html=r.html", "--log-level=DEBUG", "--log-file=run.log", "--log-file-level=DEBUG",
           "--showlocals")


def test_expanded_command_value_absent_from_every_output(pytester, monkeypatch):
    """A managed command's ${VAR} is expanded to start the server, but every message shows the
    template, and the value is masked even where the server itself prints it (log tail)."""
    pytester.makepyfile(argv_then_exit="import sys\nprint('starting with', sys.argv[1:], flush=True)\n"
                                       "sys.exit(3)\n")
    pytester.makefile(".slo.yaml", managed=(
        f"target: {{command: ['{sys.executable}', 'argv_then_exit.py', '--api-key', '${{LLM_TEST_HF_TOKEN}}', "
        f"'--port', '{{port}}'], startup_timeout: 30}}\n"
        "workloads:\n  w: {class: custom, prompt_tokens: 24, output_tokens: 8, samples: 2, warmup: 0, "
        "confidence: null, "
        "slo: {ttft_p50: 60s}}\n"))
    monkeypatch.setenv("LLM_TEST_HF_TOKEN", TOKEN)
    monkeypatch.delenv("LLM_LATENCY_API_KEY", raising=False)
    r = pytester.runpytest_subprocess(*REPORTS, timeout=120)
    outcomes = r.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("errors", outcomes.get("error", 0)) == 1
    outputs = _outputs(pytester, r)
    assert "exited before becoming ready" in outputs["stdout"]
    assert "--api-key '${LLM_TEST_HF_TOKEN}'" in outputs["stdout"]      # the template is shown
    assert "starting with" in outputs["stdout"] and "'***'" in outputs["stdout"]  # log tail, masked
    for name, text in outputs.items():
        assert TOKEN not in text, f"expanded ${{LLM_TEST_HF_TOKEN}} leaked into {name}"


def test_url_credentials_sent_as_basic_auth_and_absent_from_every_output(pytester, monkeypatch):
    import base64

    seen: list = []
    port, stop = _echo_401_server(seen)
    pytester.makepyfile(test_m="import pytest\n\n@pytest.mark.llm_slo('custom', prompt_tokens=24, "
                               "output_tokens=8, samples=2, warmup=0, confidence=None, slo={'ttft_p50': '60s'})\n"
                               "def test_w():\n    pass\n")
    monkeypatch.delenv("LLM_LATENCY_API_KEY", raising=False)
    try:
        r = pytester.runpytest_subprocess(*REPORTS, f"--llm-latency-url=http://alice:{PASSWORD}@127.0.0.1:{port}",
                                          timeout=120)
    finally:
        stop()
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert f"Basic {basic}" in seen                                      # the credentials were really sent
    outputs = _outputs(pytester, r)
    assert f"url=http://alice:***@127.0.0.1:{port}" in outputs["stdout"]  # report header
    assert "invalid api key: Basic ***" in outputs["stdout"]             # echoed header value masked
    assert "alice:***@" in outputs["r.json"] and "alice:***@" in outputs["r.html"]
    for name, text in outputs.items():
        assert PASSWORD not in text and basic not in text, f"URL credentials leaked into {name}"


def test_url_credentials_and_api_key_together_are_a_clear_error(pytester, monkeypatch):
    pytester.makepyfile(test_m="import pytest\n\n@pytest.mark.llm_slo('custom', prompt_tokens=24, "
                               "output_tokens=8, samples=2, warmup=0, confidence=None, slo={'ttft_p50': '60s'})\n"
                               "def test_w():\n    pass\n")
    monkeypatch.setenv("LLM_LATENCY_API_KEY", SECRET)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--llm-latency-url=http://bob:{PASSWORD}@127.0.0.1:9",
                                      timeout=120)
    text = r.stdout.str()
    assert "LLM_LATENCY_API_KEY is set" in text and "use one" in text
    assert PASSWORD not in text and SECRET not in text


def test_redaction_functions():
    from pytest_llm_latency.core.redact import expand_command, redact_url, split_url_credentials

    assert redact_url("GET https://user:tok%40en@h:1/v1 failed") == "GET https://user:***@h:1/v1 failed"
    assert redact_url("https://TOKEN@github.com/x") == "https://***@github.com/x"
    assert redact_url("see http://h:8000/v1 or a@b.c") == "see http://h:8000/v1 or a@b.c"
    assert split_url_credentials("https://u:p%40ss@h:9/x") == ("https://h:9/x", ("u", "p@ss"))
    assert split_url_credentials("reference://h100-sxm/m?x=1") == ("reference://h100-sxm/m?x=1", None)
    argv, secrets = expand_command(["bin", "--key=${K}", "$UNSET_VAR", "-t", "$T"], {"K": "k-secret", "T": "4"})
    assert argv == ["bin", "--key=k-secret", "$UNSET_VAR", "-t", "4"] and secrets == ("k-secret",)
    assert Redactor(("p@ss",))("p%40ss / p@ss / http://u:x@h") == "*** / *** / http://u:***@h"


def test_managed_target_shows_the_template_and_masks_values(tmp_path):
    from pytest_llm_latency.targets.process import ManagedTarget, ManagedTargetError

    script = "import sys; print('key is', sys.argv[-1], flush=True); sys.exit(2)"
    t = ManagedTarget([sys.executable, "-c", script, TOKEN], display_command=[sys.executable, "-c", script,
                                                                             "${HF_TOKEN}"],
                      secrets=(TOKEN,), log_path=tmp_path / "t.log", startup_timeout_s=30)
    try:
        t.start()
    except ManagedTargetError as exc:
        err = exc
    assert "${HF_TOKEN}" in str(err) and "key is ***" in str(err) and "exit code 2" in str(err)
    for text in (str(err), err.log_tail, " ".join(err.command), repr(t)):
        assert TOKEN not in text


@pytest.mark.parametrize("where", ["env", "slofile"])
def test_an_invalid_url_is_refused_without_its_password(pytester, monkeypatch, where):
    bad = "htp://bob:hunter2secret@example.invalid"
    if where == "env":
        monkeypatch.setenv("LLM_LATENCY_URL", bad)
        pytester.makefile(".slo.yaml", w="workloads: {w: {class: chat}}\n")
    else:
        pytester.makefile(".slo.yaml", w=f"target: {{url: '{bad}'}}\nworkloads: {{w: {{class: chat}}}}\n")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)
    out = r.stdout.str() + r.stderr.str()
    assert r.ret != 0 and "bob:***@example.invalid" in out
    assert "hunter2secret" not in out


def test_session_and_target_reprs_hide_every_secret(monkeypatch):
    """A session is a local variable in the plugin's frames: `pytest -l` prints its repr."""
    from pytest_llm_latency.plugin.options import Settings
    from pytest_llm_latency.plugin.session import LatencySession, target_from

    monkeypatch.setenv("TOKEN_FOR_TEST", "tok-valueABCDEF")
    spec = target_from(Settings.resolve({}, {}, {}), {"command": ["server", "--token", "${TOKEN_FOR_TEST}"],
                                                     "env": {"HF_TOKEN": "hf-literal-XYZ"}}, "f.slo.yaml")
    sess = LatencySession(Settings.resolve({"url": "https://al:pw_secret9@example.invalid"}, {}, {}))
    sess._secrets.update({"tok-valueABCDEF", "pw_secret9"})
    sess._servers[("k", spec.command, spec.env)] = object()
    for text in (repr(spec), repr(sess)):
        for secret in ("tok-valueABCDEF", "hf-literal-XYZ", "pw_secret9"):
            assert secret not in text, text


ARM_TOKEN = "arm-EXPANDED-key-0042"
#: a managed serve-reference taking --api-key (its --help lists it); each start records its arguments
#: (the server got the value, not the template) and prints them to its log; --crash exits at once
ARM_SERVER = r'''
import signal, subprocess, sys
received, args = sys.argv[1], sys.argv[2:]
cmd = [sys.executable, "-m", "pytest_llm_latency.cli", "serve-reference"]
if "--help" in args:
    text = subprocess.run(cmd + ["--help"], capture_output=True, text=True).stdout
    print(text + "\n  --api-key KEY  the key clients send\n  --crash  exit at once", flush=True)
    sys.exit(0)
print("starting with", args, flush=True)
with open(received, "a") as fh:
    fh.write(" ".join(args) + "\n")
if "--crash" in args:
    sys.exit(3)
at = args.index("--api-key")
child = subprocess.Popen(cmd + args[:at] + args[at + 2:])
signal.signal(signal.SIGTERM, lambda *_: child.terminate())
sys.exit(child.wait())
'''


def test_a_sweep_arms_expanded_flag_value_absent_from_every_output(pytester, monkeypatch):
    """A flags sweep's ``${VAR}`` reaches the server expanded, every output shows the arm's flags as written
    (the arms part, table, JUnit, HTML, a start error), and the value is masked in the server's log tail."""
    import html
    import json

    pytester.makepyfile(arm_server=ARM_SERVER)
    cmd = json.dumps([sys.executable, "arm_server.py", str(pytester.path / "received.log"), "--time-scale", "0.05",
                      "--port", "{port}"])
    work = ("class: custom, prompt_tokens: 24, output_tokens: 4, samples: 2, warmup: 0, confidence: null, "
            "slo: {ttft_p50: 60s}")
    pytester.makefile(".slo.yaml", arms=(
        f"target: {{command: {cmd}, startup_timeout: 60}}\n"
        f"workloads:\n"
        f"  ok: {{{work}, server_sweep: {{flags: {{keyed: '--api-key ${{LLM_TEST_ARM_TOKEN}}', "
        f"other: '--api-key $LLM_TEST_ARM_TOKEN --time-scale 0.04'}}}}}}\n"
        f"  down: {{{work}, server_sweep: {{flags: {{crashing: '--api-key ${{LLM_TEST_ARM_TOKEN}} --crash', "
        f"keyed: '--api-key ${{LLM_TEST_ARM_TOKEN}}'}}}}}}\n"))
    monkeypatch.setenv("LLM_TEST_ARM_TOKEN", ARM_TOKEN)
    monkeypatch.delenv("LLM_LATENCY_API_KEY", raising=False)
    r = pytester.runpytest_subprocess(*REPORTS, timeout=300)
    r.assert_outcomes(passed=1, errors=1)
    assert ARM_TOKEN in (pytester.path / "received.log").read_text()  # the server got the value
    outputs = _outputs(pytester, r)
    out = outputs["stdout"]
    assert "server_sweep arm 'crashing' (flags --api-key '${LLM_TEST_ARM_TOKEN}' --crash) could not start" in out
    assert "starting with" in out and "'***'" in out  # the log tail, masked
    assert "--api-key '${LLM_TEST_ARM_TOKEN}'" in html.unescape(outputs["r.html"])
    assert "${LLM_TEST_ARM_TOKEN}" in outputs["j.xml"]
    ok = next(res for res in json.loads(outputs["r.json"])["results"] if res["workload"] == "ok")
    assert [a["flags"] for a in ok["arms"]["arms"]] == ["--api-key '${LLM_TEST_ARM_TOKEN}'",
                                                        "--api-key '$LLM_TEST_ARM_TOKEN' --time-scale 0.04"]
    for name, text in outputs.items():
        assert ARM_TOKEN not in text, f"expanded ${{LLM_TEST_ARM_TOKEN}} leaked into {name}"
