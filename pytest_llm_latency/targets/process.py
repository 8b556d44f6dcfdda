"""The one process manager: start a server process, wait until it is ready, stop it.

Used for managed targets (a YAML suite may say ``target: {command: [...], ready: /health,
startup_timeout: 120, env: {...}}`` instead of pointing at a running server; see
``managed.TargetPool``) and by the reference launcher (``reference/launch.py``).
It owns the server's whole life: it picks a free loopback port,
substitutes ``{port}``/``{host}`` into the argv, starts the process in its own
process group (so ``llama-server`` and any helper children die together),
polls the ready path until HTTP 200 and stops the group at the end.

Every wait is bounded (per-poll HTTP timeout, startup deadline, stop grace
period).  Every failure raises ``ManagedTargetError`` whose message names the
command, the exit code if any and the tail of the process's log, because
"server failed to start" without its log is useless in CI.

Secrets: a command whose ``${VAR}`` values were expanded is shown as its template
(``display_command``), and the expanded values (``secrets``) are masked in every
message, log tail and repr.

No pytest import.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import IO, Mapping, Sequence

import httpx

from ..core.errors import LatencyError
from ..core.hosts import is_loopback
from ..core.redact import Redactor

__all__ = ["ManagedTarget", "ManagedTargetError", "die_with_parent", "free_port"]

POLL_HTTP_TIMEOUT_S = 2.0
POLL_BACKOFF_START_S = 0.02
POLL_BACKOFF_MAX_S = 0.25
LOG_TAIL_READ_BYTES = 64 * 1024

_LIVE: "weakref.WeakSet[ManagedTarget]" = weakref.WeakSet()


class ManagedTargetError(LatencyError):
    """A managed target could not be started or died.

    ``kind`` is one of ``not_found``, ``exited``, ``not_ready``, ``died``,
    ``not_started``; ``exit_code`` is ``None`` when the process was still
    running (or never ran).
    """

    def __init__(self, kind: str, message: str, *, command: Sequence[str] = (),
                 exit_code: int | None = None, log_tail: str = ""):
        super().__init__(message)
        self.kind = kind
        self.command = list(command)
        self.exit_code = exit_code
        self.log_tail = log_tail


def die_with_parent():
    """A ``preexec_fn`` that asks Linux to SIGKILL the child when the process that started it
    dies -- even by SIGKILL or a CI timeout, when no teardown runs -- so a managed server is
    never orphaned.  Linux ties this to the *thread* that forked, so start targets from a
    long-lived thread (the plugin and the fixtures use the main thread).  ``None`` (no-op)
    where ``prctl`` is unavailable."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover
        return None
    pr_set_pdeathsig = 1

    def _preexec() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    return _preexec


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for a currently free TCP port on ``host``.

    There is an unavoidable race between closing this socket and the server
    binding the port; a collision shows up as an early exit with the server's
    own "address in use" message in the log tail.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _describe_exit(code: int) -> str:
    try:
        return f"exit code {code} (killed by {signal.Signals(-code).name})" if code < 0 else f"exit code {code}"
    except ValueError:  # not a signal this platform names
        return f"exit code {code}"


class ManagedTarget:
    """One server process that we start, wait for and stop.

    ``command`` elements may contain ``{port}`` and ``{host}``; so may ``env``
    values.  stdout and stderr both go to ``log_path`` (truncated at start).
    """

    def __init__(self, command: Sequence[str], *, log_path: Path | str,
                 ready_path: str = "/health", startup_timeout_s: float = 120.0,
                 env: Mapping[str, str] | None = None, host: str = "127.0.0.1",
                 stop_timeout_s: float = 10.0, port: int | None = None,
                 display_command: Sequence[str] | None = None, secrets: Sequence[str] = ()):
        if not command:
            raise ValueError("ManagedTarget: command must be a non-empty list of strings")
        if not ready_path.startswith("/"):
            raise ValueError(f"ManagedTarget: ready_path must start with '/', got {ready_path!r}")
        if not is_loopback(host):
            raise ValueError(f"ManagedTarget: host must be a loopback address, got {host!r}")
        if startup_timeout_s <= 0:
            raise ValueError(f"ManagedTarget: startup_timeout_s must be > 0, got {startup_timeout_s}")
        self.command = [str(c) for c in command]
        self.display_command = [str(c) for c in display_command] if display_command else list(self.command)
        self.redact = Redactor(secrets)
        self.ready_path = ready_path
        self.startup_timeout_s = float(startup_timeout_s)
        self.env = dict(env or {})
        self.host = host
        self.stop_timeout_s = float(stop_timeout_s)
        self.log_path = Path(log_path)
        self.fixed_port = port  # None: a free loopback port is chosen at each start
        self.port: int | None = None
        self.died = False  # set when check_alive found it dead: its log is evidence
        self.argv: list[str] = []
        self.ready_after_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    # -- introspection -------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234`` (only after ``start``)."""
        if self.port is None:
            raise ManagedTargetError("not_started", f"target not started: {self._cmd_str()}",
                                     command=self._display_argv())
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _display_argv(self) -> list[str]:
        """The command as shown: the template (``${VAR}`` unexpanded), ports filled in."""
        argv = [self._substitute(c) for c in self.display_command] if self.port is not None else self.display_command
        return [self.redact(c) for c in argv]

    def _cmd_str(self) -> str:
        return shlex.join(self._display_argv())

    def log_tail(self, n_lines: int = 40) -> str:
        """Last ``n_lines`` of the process's combined stdout/stderr log."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - LOG_TAIL_READ_BYTES))
                data = f.read()
        except OSError:
            return ""
        lines = data.decode("utf-8", errors="replace").splitlines()
        return "\n".join(lines[-n_lines:]) if n_lines > 0 else ""

    def _error(self, kind: str, what: str, exit_code: int | None = None) -> ManagedTargetError:
        tail = self.redact(self.log_tail())
        code = f" ({_describe_exit(exit_code)})" if exit_code is not None else ""
        msg = (f"managed target {what}{code}\n  command: {self._cmd_str()}\n"
               f"  log: {self.log_path}\n  log tail:\n"
               + ("\n".join("    " + line for line in tail.splitlines()) or "    <empty>"))
        return ManagedTargetError(kind, self.redact(msg), command=self._display_argv(),
                                  exit_code=exit_code, log_tail=tail)

    # -- life cycle ----------------------------------------------------
    def _substitute(self, s: str) -> str:
        return s.replace("{port}", str(self.port)).replace("{host}", self.host)

    def start(self) -> "ManagedTarget":
        """Start the process and block until ready (HTTP 200) or raise.

        On any failure the process group is stopped before raising.
        """
        if self.is_running():
            return self
        try:
            self.port = self.fixed_port or free_port(self.host)
        except OSError as exc:
            raise ManagedTargetError("no_port", f"no free loopback port on {self.host}: {exc}",
                                     command=self._display_argv()) from None
        self.argv = [self._substitute(c) for c in self.command]
        env = os.environ.copy()
        env.update({k: self._substitute(str(v)) for k, v in self.env.items()})
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "wb")
        started = time.monotonic()
        try:
            self._proc = subprocess.Popen(self.argv, stdout=self._log_file, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                          preexec_fn=die_with_parent())
        except OSError as exc:  # not found, not executable, bad format
            self._close_log()
            raise ManagedTargetError(
                "not_found", self.redact(f"managed target command could not be executed: {exc}\n"
                                         f"  command: {self._cmd_str()}"), command=self._display_argv()) from None
        self._stopped = False
        _LIVE.add(self)
        try:
            self._wait_ready(started)
        except BaseException:
            self.died = True
            self.stop()
            raise
        self.ready_after_s = time.monotonic() - started
        return self

    def _wait_ready(self, started: float) -> None:
        deadline = started + self.startup_timeout_s
        ready_url = self.url + self.ready_path
        delay = POLL_BACKOFF_START_S
        last = "no response yet"
        assert self._proc is not None
        # trust_env=False: an HTTP(S)_PROXY in the environment must not capture loopback polls.
        with httpx.Client(trust_env=False) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise self._error("exited", "exited before becoming ready", code)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    r = client.get(ready_url, timeout=min(POLL_HTTP_TIMEOUT_S, max(remaining, 0.01)))
                    if r.status_code == 200:
                        # A 200 from a process that already died came from someone
                        # else who grabbed the port in the free_port() race.
                        code = self._proc.poll()
                        if code is not None:
                            raise self._error("exited", "exited while its port answered "
                                              "(port taken by another process?)", code)
                        return
                    last = f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}"
                time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
                delay = min(delay * 1.5, POLL_BACKOFF_MAX_S)
        raise self._error("not_ready", f"not ready within {self.startup_timeout_s:g}s at "
                          f"{ready_url} (last poll: {last}); it was killed")

    def check_alive(self) -> None:
        """Raise ``ManagedTargetError`` (exit code + log tail) if the process died."""
        if self._proc is None:
            raise self._error("not_started", "was never started")
        code = self._proc.poll()
        if code is not None:
            self.died = True
            raise self._error("died", "is no longer running", code)

    def stop(self, timeout_s: float | None = None) -> int | None:
        """SIGTERM the process group, wait up to ``timeout_s``, then SIGKILL it.

        Returns the exit code (``None`` if never started).  Safe to call twice.
        """
        proc = self._proc
        if proc is None:
            self._close_log()
            return None
        if getattr(self, "_stopped", False):  # never signal again: the group id may be reused
            return proc.poll()
        self._stopped = True
        grace = self.stop_timeout_s if timeout_s is None else timeout_s
        self._signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        # SIGKILL the group even if the leader exited: children may linger.
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # the kernel reaps it within 5 s
            proc.wait(timeout=5.0)
        self._close_log()
        _LIVE.discard(self)
        return proc.poll()

    def _signal_group(self, sig: int) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "ManagedTarget":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<ManagedTarget {state} port={self.port} {self._cmd_str()!r}>"


def _stop_all_live() -> None:
    """Last-resort cleanup at interpreter exit: no orphaned servers."""
    for target in list(_LIVE):
        target.stop(timeout_s=2.0)


atexit.register(_stop_all_live)
