"""A real nginx in front of a test server, for the proxy tier (tests/proxy) and the
real-server tier (tests/realserver).

One nginx process per ``Nginx``: its own ``-p`` prefix (a fresh temporary folder), its own
config, pid file and logs, one ``server`` block per setup on a free loopback port, and
``daemon off`` so the process started here is the master whose pid the pid file holds.
``stop()`` signals that pid (SIGTERM: fast shutdown) and waits, bounded, then kills the
process group it started.  Every wait is bounded; a start that fails raises
``NginxError`` with the error log's tail.  The system's nginx service is never touched.

Why a temporary folder and not pytest's ``tmp_path``: when the tests run as root, nginx's
workers run as ``nobody`` and must reach the prefix (request bodies over 16 KB and
responses that overflow the proxy buffers go to temp files there); pytest's base temp
folder is private (0700) to the user.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_llm_latency.targets.process import free_port

#: the user docs' page that recommends the nginx block (the tier tests exactly that block)
README = Path(__file__).resolve().parents[2] / "docs" / "reverse-proxy.md"
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0

#: what the access log records per request (the tests read it back): the setup's port,
#: status, the upstream's framing and the encoding sent to the client
LOG_FORMAT = ("$server_port $request_method $uri $status upstream_status=$upstream_status "
              "upstream_te=$upstream_http_transfer_encoding upstream_connection=$upstream_http_connection "
              "content_encoding=$sent_http_content_encoding request_time=$request_time")


class NginxError(RuntimeError):
    pass


def find_nginx() -> str | None:
    """The nginx binary: on PATH, or Debian's /usr/sbin (not on a non-root user's PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def nginx_version(binary: str) -> str:
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10)
    return (out.stderr or out.stdout).strip().split("/", 1)[-1]


def readme_recommended() -> list[str]:
    """The directives of the recommended ``location`` block for streaming LLM endpoints in
    ``docs/reverse-proxy.md`` (``proxy_pass`` left out: each setup points at its own
    upstream), so the tier tests exactly what the docs recommend."""
    text = README.read_text()
    m = re.search(r"```nginx\n(.*?)```", text, re.S)
    if not m:
        raise AssertionError("docs/reverse-proxy.md has no ```nginx block with the recommended settings")
    body = re.search(r"location [^{]*\{\n(.*?)\n\s*\}", m.group(1), re.S)
    if not body:
        raise AssertionError("the nginx block of docs/reverse-proxy.md has no location { ... }")
    lines = []
    for line in body.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("proxy_pass "):
            lines.append(line)
    return lines


@dataclass
class Site:
    """One setup: a ``server`` block on its own port proxying ``location /`` to ``upstream``
    (``host:port``) with ``directives`` inside the location."""

    name: str
    upstream: str
    directives: tuple[str, ...] = ()
    port: int = 0

    def block(self) -> str:
        inner = "\n".join(f"            {d}" for d in self.directives)
        return (f"    server {{\n        listen 127.0.0.1:{self.port};\n"
                f"        location / {{\n            proxy_pass http://{self.upstream};\n{inner}\n        }}\n    }}\n")


class Nginx:
    def __init__(self, binary: str, sites: list[Site]):
        self.binary, self.sites = binary, {s.name: s for s in sites}
        self.prefix = Path(tempfile.mkdtemp(prefix="llm-latency-nginx-"))
        self.prefix.chmod(0o755)  # workers run as nobody under root
        (self.prefix / "logs").mkdir()
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.sites[name].port}"

    @property
    def error_log(self) -> Path:
        return self.prefix / "logs" / "error.log"

    @property
    def access_log(self) -> Path:
        return self.prefix / "logs" / "access.log"

    def access_lines(self, name: str, request: str = "") -> list[str]:
        """Access-log lines of one setup, optionally only those of ``request`` ("POST /v1/completions")."""
        port = str(self.sites[name].port)
        if not self.access_log.exists():
            return []
        return [ln for ln in self.access_log.read_text().splitlines()
                if ln.split(" ", 1)[0] == port and ln.split(" ", 1)[1].startswith(request)]

    def config(self) -> str:
        blocks = "".join(s.block() for s in self.sites.values())
        return (f"worker_processes 1;\ndaemon off;\npid nginx.pid;\nerror_log logs/error.log info;\n"
                f"events {{ worker_connections 256; }}\n"
                f"http {{\n    log_format tier '{LOG_FORMAT}';\n    access_log logs/access.log tier;\n"
                f"    client_body_temp_path tmp/client_body;\n    proxy_temp_path tmp/proxy;\n"
                f"    fastcgi_temp_path tmp/fastcgi;\n    uwsgi_temp_path tmp/uwsgi;\n    scgi_temp_path tmp/scgi;\n"
                f"{blocks}}}\n")

    def log_tail(self, n: int = 3000) -> str:
        parts = []
        for f in (self.error_log, self.prefix / "logs" / "stderr.log"):
            if f.exists():
                parts.append(f.read_text(errors="replace")[-n:])
        return "\n".join(parts) or "(no log)"

    def start(self, attempts: int = 3) -> "Nginx":
        """Start on free ports; a port taken between choosing and binding is retried."""
        for attempt in range(attempts):
            for s in self.sites.values():
                s.port = free_port()
            (self.prefix / "tmp").mkdir(exist_ok=True)
            (self.prefix / "nginx.conf").write_text(self.config())
            try:
                self._start_once()
                return self
            except NginxError:
                self.stop()
                if "Address already in use" not in self.log_tail() or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> None:
        with open(self.prefix / "logs" / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(
                [self.binary, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), "-e", "logs/error.log"],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        pending = {s.port for s in self.sites.values()}
        while pending:
            if self.proc.poll() is not None:
                raise NginxError(f"nginx exited with code {self.proc.returncode} at start:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise NginxError(f"nginx did not listen on {sorted(pending)} within {START_TIMEOUT_S:g}s:\n"
                                 f"{self.log_tail()}")
            for port in list(pending):
                with socket.socket() as s:
                    s.settimeout(0.5)
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        pending.discard(port)
            time.sleep(0.05)
        pidfile = self.prefix / "nginx.pid"
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.pid = int(pidfile.read_text().strip()) if pidfile.exists() else self.proc.pid
        if self.pid != self.proc.pid:
            raise NginxError(f"nginx.pid says {self.pid}, but the master started here is {self.proc.pid}")

    def stop(self) -> None:
        """SIGTERM to the pid from the pid file, a bounded wait, then SIGKILL to the process
        group started here (master and workers)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.kill(self.pid or proc.pid, signal.SIGTERM)
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT_S)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        shutil.rmtree(self.prefix, ignore_errors=True)
