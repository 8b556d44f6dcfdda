"""A small Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (standard library
only: no browser download, no websocket package, no port).

Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4.
Every wait is bounded; the browser is killed on close whatever state it is in.
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

#: flags that work on a machine without network, GPU or sandbox support (CI containers)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars")
CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")


def find_chromium() -> str | None:
    """Debian's ``chromium`` (installed by .ci/run), or $LLM_LATENCY_CHROMIUM."""
    env = os.environ.get("LLM_LATENCY_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for path in CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


class CDPError(RuntimeError):
    pass


class Browser:
    """``with Browser(path) as b: b.call("Page.navigate", {...}, session=...)``."""

    def __init__(self, executable: str, timeout_s: float = 30.0):
        self.timeout_s = timeout_s
        self.user_data = tempfile.mkdtemp(prefix="llm-latency-chromium-")
        ours_r, theirs_w = os.pipe()     # Chromium writes fd 4 -> we read
        theirs_r, ours_w = os.pipe()     # we write -> Chromium reads fd 3
        self.stderr = open(Path(self.user_data) / "stderr.txt", "wb")

        def child_fds():  # in the child: the pipes become fd 3 and 4 (via high fds: no clobbering)
            r, w = os.dup(theirs_r), os.dup(theirs_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={self.user_data}",
                                      "--remote-debugging-pipe", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                     preexec_fn=child_fds, close_fds=False)
        os.close(theirs_r)
        os.close(theirs_w)
        self._r, self._w = ours_r, ours_w
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    # -- transport ------------------------------------------------------------------
    def _send(self, msg: dict) -> None:
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self._w, data)
            data = data[n:]

    def _recv(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError("no answer from Chromium in time")
            ready, _, _ = select.select([self._r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise CDPError(f"Chromium closed the pipe (exit {self.proc.poll()}): {self.stderr_tail()}")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout_s: float | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._send(msg)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            reply = self._recv(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, session: str | None = None, timeout_s: float | None = None) -> dict:
        """The first event ``method`` (already received or arriving within the timeout)."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        seen = 0
        while True:
            for ev in self.events[seen:]:
                if ev.get("method") == method and (session is None or ev.get("sessionId") == session):
                    return ev
            seen = len(self.events)
            self.events.append(self._recv(deadline))

    def stderr_tail(self) -> str:
        try:
            return (Path(self.user_data) / "stderr.txt").read_text(errors="replace")[-800:]
        except OSError:
            return ""

    # -- pages ----------------------------------------------------------------------
    def new_page(self, width: int, height: int) -> str:
        """A fresh tab (about:blank) with the domains the checks listen to; its session id."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        return session

    def evaluate(self, session: str, expression: str):
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
        if "exceptionDetails" in res:
            raise CDPError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, session: str, path: Path, width: int, height: int) -> None:
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": {"x": 0, "y": 0, "width": width, "height": height,
                                                             "scale": 1}}, session=session, timeout_s=60)
        path.write_bytes(base64.b64decode(shot["data"]))

    # -- lifetime -------------------------------------------------------------------
    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close", timeout_s=5)
                except (CDPError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
        finally:
            for fd in (self._r, self._w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.stderr.close()
            shutil.rmtree(self.user_data, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
