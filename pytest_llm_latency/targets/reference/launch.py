"""Start the reference server from Python: ``reference://`` URLs, subprocess or thread mode.

``reference://HARDWARE/MODEL?key=value&...`` -- e.g.
``reference://h100-sxm/llama-3.1-8b?efficiency=0.7&time_scale=1``.  The keys are the
``ReferenceConfig`` field names (``config.py``).  Booleans accept
1/0/true/false/yes/no/on/off, or no value (``?prefix_caching``).

``start_reference(config, mode=...)`` returns a ``ReferenceHandle`` (``.url``,
``.stop()``, a context manager):

* ``"subprocess"`` (default): ``python -m pytest_llm_latency.cli serve-reference ...``
  under the one process manager (``targets.process.ManagedTarget``): a free loopback
  port, ``/health`` polled until ready within ``startup_timeout`` s, a failure raised as
  ``ManagedTargetError`` with the log tail; ``stop()`` sends SIGTERM to the group, waits,
  then kills.  The server gets its own interpreter (and core), so its timing is not
  disturbed by the test process.
* ``"thread"``: the server runs on its own event loop in a daemon thread of this
  process -- fast to start, for tests; ``stop()`` joins it (bounded).

Handles that are garbage-collected or alive at interpreter exit are stopped.
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import threading
import weakref
from urllib.parse import parse_qsl, unquote, urlsplit

from ...core.errors import ConfigError
from ..process import ManagedTarget, ManagedTargetError
from .config import ReferenceConfig

SCHEME = "reference"
_LIVE: "weakref.WeakSet[ReferenceHandle]" = weakref.WeakSet()


def parse_reference_url(url: str) -> ReferenceConfig:
    """``reference://HARDWARE/MODEL?k=v`` -> a validated ``ReferenceConfig`` (or ConfigError)."""
    parts = urlsplit(url.strip())
    where = f"reference URL {url!r}"
    if parts.scheme != SCHEME:
        raise ConfigError(f"{where}: scheme must be {SCHEME}:// (e.g. reference://h100-sxm/llama-3.1-8b)")
    hardware = unquote(parts.netloc)
    model = unquote(parts.path.strip("/"))
    if not hardware or not model:
        raise ConfigError(f"{where}: expected reference://HARDWARE/MODEL[?key=value&...], "
                          f"e.g. reference://h100-sxm/llama-3.1-8b?efficiency=0.7")
    if parts.fragment:
        raise ConfigError(f"{where}: a '#' fragment is not allowed")
    values: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in values:
            raise ConfigError(f"{where}: key {key!r} given twice")
        if key in ("hardware", "model"):
            raise ConfigError(f"{where}: {key} goes in the URL path, not the query")
        values[key] = value
    cfg = dataclasses.replace(ReferenceConfig.from_strings(values, source=where), hardware=hardware, model=model)
    try:
        return cfg.validate()
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


class ReferenceHandle:
    """A running reference server.  ``url`` is its base URL; ``stop()`` is idempotent."""

    def __init__(self, url: str, config: ReferenceConfig, mode: str):
        self.url, self.config, self.mode = url, config, mode
        _LIVE.add(self)

    def stop(self, timeout: float = 5.0) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self) -> "ReferenceHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()


class _SubprocessHandle(ReferenceHandle):
    """The server in its own interpreter, run by the one process manager (``targets.process``):
    own process group, dies with its parent, ``/health`` polled until ready, TERM then KILL."""

    def __init__(self, url, config, target: ManagedTarget, log_dir: str):
        self.target: ManagedTarget | None = target
        self.log_dir = log_dir
        super().__init__(url, config, "subprocess")

    @property
    def pid(self) -> int | None:
        return None if self.target is None else self.target.pid

    @property
    def proc(self):
        """The ``Popen`` while it runs under our control; ``None`` once stopped."""
        target = getattr(self, "target", None)
        return None if target is None else target._proc

    def check_alive(self) -> None:
        """Raise ``ManagedTargetError`` (exit code and log tail) if the process has exited."""
        target = getattr(self, "target", None)
        if target is not None:
            target.check_alive()

    def stop(self, timeout: float = 5.0) -> None:
        target = getattr(self, "target", None)
        if target is None:
            return
        self.target = None
        target.stop(timeout_s=timeout)
        target._proc = None
        if not target.died:  # a dead server's log stays for the message that names it
            shutil.rmtree(self.log_dir, ignore_errors=True)


class _ThreadHandle(ReferenceHandle):
    def __init__(self, url, config, server, loop: asyncio.AbstractEventLoop, thread: threading.Thread,
                 stop_event: asyncio.Event):
        self.server, self.loop, self._stop_event = server, loop, stop_event
        self.thread: threading.Thread | None = thread
        super().__init__(url, config, "thread")

    def stop(self, timeout: float = 5.0) -> None:
        thread = getattr(self, "thread", None)
        if thread is None:
            return
        if thread.is_alive():
            with contextlib.suppress(RuntimeError):  # its loop has closed already
                self.loop.call_soon_threadsafe(self._stop_event.set)
            thread.join(timeout)
        self.thread = None


def start_reference(config: ReferenceConfig | str, mode: str = "subprocess", *,
                    startup_timeout: float = 30.0) -> ReferenceHandle:
    """Start a server for ``config`` (a ``ReferenceConfig`` or a ``reference://`` URL)."""
    if isinstance(config, str):
        config = parse_reference_url(config)
    config.validate()
    if mode == "subprocess":
        return _start_subprocess(config, startup_timeout)
    if mode == "thread":
        return _start_thread(config, startup_timeout)
    raise ConfigError(f"reference: mode must be 'subprocess' or 'thread', got {mode!r}")


def _start_subprocess(config: ReferenceConfig, timeout: float) -> ReferenceHandle:
    cmd = [sys.executable, "-m", "pytest_llm_latency.cli", "serve-reference",
           *dataclasses.replace(config, port=0).to_cli_args(), "--port", "{port}"]
    log_dir = tempfile.mkdtemp(prefix="llm-latency-reference-")
    target = ManagedTarget(cmd, log_path=os.path.join(log_dir, "reference-server.log"), ready_path="/health",
                           startup_timeout_s=timeout, env={"PYTHONUNBUFFERED": "1"}, host=config.host,
                           port=config.port or None, stop_timeout_s=5.0)
    target.start()  # ManagedTargetError with the log tail when it exits or is not ready in time
    return _SubprocessHandle(target.url, config, target, log_dir)


def _start_thread(config: ReferenceConfig, timeout: float) -> ReferenceHandle:
    from .server import ReferenceServer

    ready = threading.Event()
    box: dict = {}

    async def main() -> None:
        stop_event = asyncio.Event()
        server = ReferenceServer(config)
        try:
            box["url"] = await server.start()
        except BaseException as e:  # reported to the caller
            box["error"] = e
            ready.set()
            await server.stop()
            return
        box.update(server=server, loop=asyncio.get_running_loop(), stop=stop_event)
        ready.set()
        try:
            await stop_event.wait()
        finally:
            await server.stop()

    thread = threading.Thread(target=lambda: asyncio.run(main()), name="reference-server", daemon=True)
    thread.start()
    if not ready.wait(timeout):
        raise ManagedTargetError("not_ready", f"reference server thread did not start within {timeout} s")
    if "error" in box:
        thread.join(timeout)
        raise ManagedTargetError("exited", f"reference server failed to start: {box['error']}") from box["error"]
    return _ThreadHandle(box["url"], config, box["server"], box["loop"], thread, box["stop"])


@atexit.register
def _stop_all() -> None:  # pragma: no cover - interpreter exit
    for handle in list(_LIVE):
        with contextlib.suppress(Exception):
            handle.stop(2.0)
