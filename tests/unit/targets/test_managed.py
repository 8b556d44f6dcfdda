"""Unit tests of ``pytest_llm_latency.targets.managed`` with a tiny Python HTTP server.

The fake server is a real process (``sys.executable -c SERVER``), so start-up,
port substitution, process groups, signals and log capture are exercised for
real.  Nothing here sleeps to assert timing: waits are polling loops with
deadlines.  The llama-server case lives in tests/realserver (integration).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from pytest_llm_latency.core.errors import LatencyError
from pytest_llm_latency.targets.managed import TargetPool
from pytest_llm_latency.targets.process import ManagedTarget, ManagedTargetError, free_port

# argv: --host H --port P [--mode ok|503|ignore-term|spawn-child]
SERVER = r'''
import http.server, json, os, signal, subprocess, sys, time
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
mode = args.get("--mode", "ok")
print(f"fake server starting mode={mode} argv={sys.argv[1:]}", file=sys.stderr, flush=True)
if mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "spawn-child":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print(f"child pid {child.pid}", file=sys.stderr, flush=True)
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        if self.path == "/exit":
            print("exiting on request", file=sys.stderr, flush=True)
            os._exit(7)
        body = {"path": self.path, "argv": sys.argv[1:], "env": os.environ.get("FAKE_ENV")}
        code = 503 if (mode == "503" and self.path == "/health") else 200
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
srv = http.server.HTTPServer((args["--host"], int(args["--port"])), H)
print(f"listening on {args['--port']}", file=sys.stderr, flush=True)
srv.serve_forever()
'''


def server_cmd(mode: str = "ok") -> list[str]:
    return [sys.executable, "-c", SERVER, "--host", "{host}", "--port", "{port}", "--mode", mode]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still "exists"; treat it as dead (it is not running any more).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(predicate, timeout_s: float = 10.0) -> bool:
    """Poll ``predicate`` until true or the deadline passes (never a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def connection_refused(url: str) -> bool:
    try:
        httpx.get(url, timeout=1.0, trust_env=False)
    except httpx.ConnectError:
        return True
    return False


@pytest.fixture
def target_factory(tmp_path):
    """Build ManagedTargets whose logs live in tmp_path; stop any left running."""
    made: list[ManagedTarget] = []

    def make(command, **kw) -> ManagedTarget:
        kw.setdefault("startup_timeout_s", 30.0)
        t = ManagedTarget(command, log_path=tmp_path / f"t{len(made)}.log", **kw)
        made.append(t)
        return t

    yield make
    for t in made:
        t.stop(timeout_s=2.0)


def test_start_substitutes_port_and_host_and_serves(target_factory):
    t = target_factory(server_cmd(), env={"FAKE_ENV": "port-{port}"})
    t.start()
    assert t.is_running()
    assert t.url == f"http://127.0.0.1:{t.port}"
    body = httpx.get(t.url + "/anything", timeout=5, trust_env=False).json()
    assert body["path"] == "/anything"
    assert body["argv"] == ["--host", "127.0.0.1", "--port", str(t.port), "--mode", "ok"]
    assert body["env"] == f"port-{t.port}"
    assert t.ready_after_s is not None and 0 < t.ready_after_s < 30
    t.check_alive()  # does not raise
    assert wait_until(lambda: f"listening on {t.port}" in t.log_tail())


def test_stop_terminates_and_frees_port(target_factory):
    t = target_factory(server_cmd())
    t.start()
    pid, url = t.pid, t.url
    code = t.stop()
    assert code is not None and not t.is_running()
    assert not pid_alive(pid)
    assert connection_refused(url + "/health")
    assert t.stop() == code  # idempotent


def test_context_manager_stops_even_on_exception(tmp_path):
    t = ManagedTarget(server_cmd(), log_path=tmp_path / "cm.log", startup_timeout_s=30)
    with pytest.raises(RuntimeError, match="boom"):
        with t:
            assert t.is_running()
            raise RuntimeError("boom")
    assert not t.is_running()
    assert not pid_alive(t.pid)


def test_command_not_found_is_clear(target_factory):
    t = target_factory(["/nonexistent/definitely-not-a-server", "--port", "{port}"])
    with pytest.raises(ManagedTargetError) as ei:
        t.start()
    assert ei.value.kind == "not_found"
    assert isinstance(ei.value, LatencyError)
    assert "definitely-not-a-server" in str(ei.value)
    assert "--port " in str(ei.value)  # the substituted command is shown


def test_early_exit_reports_exit_code_and_stderr(target_factory):
    cmd = [sys.executable, "-c",
           "import sys; print('fatal: model file missing', file=sys.stderr); sys.exit(3)"]
    t = target_factory(cmd, startup_timeout_s=60)
    with pytest.raises(ManagedTargetError) as ei:
        t.start()
    err = ei.value
    assert err.kind == "exited" and err.exit_code == 3
    assert "exit code 3" in str(err)
    assert "fatal: model file missing" in str(err)
    assert "fatal: model file missing" in err.log_tail
    assert sys.executable in str(err)


def test_never_ready_times_out_and_kills_process_group(target_factory):
    # Never listens, but has a child: both must be gone after the timeout.
    t = target_factory([sys.executable, "-c",
                        "import subprocess, sys, time\n"
                        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                        "print('child pid', c.pid, flush=True)\n"
                        "time.sleep(60)"], startup_timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(ManagedTargetError) as ei:
        t.start()
    elapsed = time.monotonic() - t0
    assert ei.value.kind == "not_ready"
    assert "not ready within 1s" in str(ei.value)
    assert elapsed < 1.0 + 10.0 + 5.0  # deadline + stop grace + SIGKILL wait bound
    assert not t.is_running()
    child_pid = int(ei.value.log_tail.split("child pid")[1].split()[0])
    assert wait_until(lambda: not pid_alive(child_pid), 5.0), "child outlived its process group"


def test_ready_path_returning_503_is_not_ready(target_factory):
    t = target_factory(server_cmd("503"), startup_timeout_s=1.0)
    with pytest.raises(ManagedTargetError) as ei:
        t.start()
    assert ei.value.kind == "not_ready"
    assert "last poll: HTTP 503" in str(ei.value)
    assert not t.is_running()


def test_custom_ready_path_is_polled(target_factory):
    t = target_factory(server_cmd("503"), ready_path="/v1/models")  # /health would be 503
    t.start()
    assert t.is_running()


def test_stop_escalates_to_sigkill_when_sigterm_ignored(target_factory):
    t = target_factory(server_cmd("ignore-term"))
    t.start()
    code = t.stop(timeout_s=0.3)
    assert code == -9
    assert not pid_alive(t.pid)


def test_stop_kills_children_of_a_running_target(target_factory):
    t = target_factory(server_cmd("spawn-child"))
    t.start()
    assert wait_until(lambda: "child pid" in t.log_tail())
    child = int(t.log_tail().split("child pid")[1].split()[0])
    assert pid_alive(child)
    t.stop()
    assert wait_until(lambda: not pid_alive(child), 5.0)


def test_check_alive_raises_with_exit_code_after_death(target_factory):
    t = target_factory(server_cmd())
    t.start()
    with pytest.raises(httpx.HTTPError):
        httpx.get(t.url + "/exit", timeout=5, trust_env=False)
    assert wait_until(lambda: not t.is_running())
    with pytest.raises(ManagedTargetError) as ei:
        t.check_alive()
    assert ei.value.kind == "died" and ei.value.exit_code == 7
    assert "exit code 7" in str(ei.value) and "exiting on request" in str(ei.value)


def test_log_tail_limits_lines(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    t = ManagedTarget(["true"], log_path=log)
    assert t.log_tail(3) == "line 97\nline 98\nline 99"
    assert t.log_tail(0) == ""
    assert ManagedTarget(["true"], log_path=tmp_path / "none.log").log_tail() == ""


def test_url_before_start_and_bad_arguments(tmp_path):
    t = ManagedTarget(["true"], log_path=tmp_path / "l.log")
    with pytest.raises(ManagedTargetError, match="not started"):
        _ = t.url
    with pytest.raises(ManagedTargetError) as ei:
        t.check_alive()
    assert ei.value.kind == "not_started"
    with pytest.raises(ValueError, match="loopback"):
        ManagedTarget(["true"], log_path=tmp_path / "l.log", host="0.0.0.0")
    with pytest.raises(ValueError, match="ready_path"):
        ManagedTarget(["true"], log_path=tmp_path / "l.log", ready_path="health")
    with pytest.raises(ValueError, match="non-empty"):
        ManagedTarget([], log_path=tmp_path / "l.log")


def test_free_port_is_bindable():
    import socket
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # raises if taken


def test_pool_shares_identical_targets_and_closes_all(tmp_path):
    pool = TargetPool(tmp_path / "logs")
    try:
        a = pool.get(server_cmd(), startup_timeout_s=30)
        b = pool.get(server_cmd(), startup_timeout_s=30)
        c = pool.get(server_cmd(), startup_timeout_s=30, env={"FAKE_ENV": "x"})
        d = pool.get(server_cmd(), startup_timeout_s=30, ready_path="/v1/models")
        assert a is b
        assert len({id(a), id(c), id(d)}) == 3
        assert len({a.port, c.port, d.port}) == 3
        assert httpx.get(c.url + "/", timeout=5, trust_env=False).json()["env"] == "x"
        assert all(t.log_path.parent == tmp_path / "logs" for t in pool.targets())
    finally:
        pool.close()
    assert not any(t.is_running() for t in (a, c, d))
    assert pool.targets() == []
    assert not (tmp_path / "logs").exists(), "a session whose targets all ran cleans its log folder up"


def test_pool_release_stops_a_target_and_the_next_get_starts_a_fresh_one(tmp_path):
    # A/B alternating blocks: stop one server on purpose, start it again later (new port, new log)
    with TargetPool(tmp_path / "logs") as pool:
        a = pool.get(server_cmd(), startup_timeout_s=30)
        other = pool.get(server_cmd(), startup_timeout_s=30, env={"FAKE_ENV": "x"})
        assert pool.release(server_cmd()) is True
        assert not a.is_running() and wait_until(lambda: connection_refused(a.url))
        assert pool.release(server_cmd()) is False          # nothing running under that key now
        b = pool.get(server_cmd(), startup_timeout_s=30)
        assert b is not a and b.is_running() and b.pid != a.pid
        assert len({a.log_path, other.log_path, b.log_path}) == 3   # log names never reused
        assert httpx.get(b.url + "/", timeout=5, trust_env=False).status_code == 200
        assert other.is_running()                            # other keys untouched


def test_pool_remembers_failures_and_reports_dead_targets(tmp_path):
    with TargetPool(tmp_path / "logs") as pool:
        bad = [sys.executable, "-c", "import sys; sys.exit(5)"]
        with pytest.raises(ManagedTargetError) as first:
            pool.get(bad)
        with pytest.raises(ManagedTargetError) as second:
            pool.get(bad)
        assert second.value is first.value  # not restarted: one failure per session
        t, died = _start_then_kill_via_exit(pool)
        assert died.kind == "died" and died.exit_code == 7
    logs = tmp_path / "logs"
    assert logs.is_dir() and str(logs) in str(first.value), "a failed target's log is kept and named"
    assert "exiting on request" in (logs / Path(t.log_path).name).read_text()


def test_pool_keeps_the_log_of_a_target_that_died_after_start(tmp_path):
    pool = TargetPool(tmp_path / "logs")
    t, died = _start_then_kill_via_exit(pool)
    pool.close()
    assert str(t.log_path) in str(died) and t.log_path.exists()


def _start_then_kill_via_exit(pool: TargetPool):
    """A pooled target that exits (code 7) after start; the pool's next get() reports it."""
    t = pool.get(server_cmd(), startup_timeout_s=30)
    with pytest.raises(httpx.HTTPError):
        httpx.get(t.url + "/exit", timeout=5, trust_env=False)
    assert wait_until(lambda: not t.is_running())
    with pytest.raises(ManagedTargetError) as died:
        pool.get(server_cmd(), startup_timeout_s=30)
    return t, died.value


def test_managed_server_dies_with_the_process_that_started_it(tmp_path):
    """SIGKILL the parent (no teardown runs): the managed child must not be orphaned."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(  # the same Popen arguments ManagedTarget.start uses
        "import subprocess, sys, time\n"
        "from pytest_llm_latency.targets.process import die_with_parent\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                         start_new_session=True, preexec_fn=die_with_parent())\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the managed child outlived its SIGKILLed parent")


def test_second_stop_sends_no_signal(tmp_path, monkeypatch):
    import sys

    from pytest_llm_latency.targets.process import ManagedTarget

    t = ManagedTarget([sys.executable, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "l.log")
    import subprocess

    t._proc = subprocess.Popen(t.command, start_new_session=True)
    t._stopped = False
    t.stop(timeout_s=5)
    sent = []
    monkeypatch.setattr(t, "_signal_group", sent.append)
    assert t.stop() is not None and sent == []  # the (possibly reused) group id is left alone
