"""Managed targets: servers that an SLO file's ``target.command`` starts, shared per session.

``TargetPool`` shares one running ``ManagedTarget`` (``process.py``, the one process
manager) per identical (command, env, ready path) for a whole session, and owns the
folder of their logs: removed at ``close`` unless a target failed, so the log a failure
message names is still there to read.
"""
from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path
from typing import Mapping, Sequence

from .process import ManagedTarget, ManagedTargetError

__all__ = ["ManagedTarget", "ManagedTargetError", "TargetPool"]


class TargetPool:
    """Session registry: one running ``ManagedTarget`` per identical key.

    The key is (command, env, ready path).  A target that failed to start is
    remembered and its error re-raised, so a broken command costs one
    startup timeout per session, not one per test.  ``close`` stops all.
    """

    def __init__(self, log_dir: Path | str, host: str = "127.0.0.1"):
        self.log_dir = Path(log_dir)
        self.host = host
        self._targets: dict[tuple, ManagedTarget] = {}
        self._failures: dict[tuple, ManagedTargetError] = {}
        self._lock = threading.Lock()
        self._started = 0  # log names stay unique when a released target is started again

    @staticmethod
    def key(command: Sequence[str], env: Mapping[str, str] | None, ready_path: str) -> tuple:
        return (tuple(str(c) for c in command), tuple(sorted((env or {}).items())), ready_path)

    def get(self, command: Sequence[str], *, ready_path: str = "/health",
            startup_timeout_s: float = 120.0, env: Mapping[str, str] | None = None,
            display_command: Sequence[str] | None = None, secrets: Sequence[str] = ()) -> ManagedTarget:
        """Return the running target for this key, starting it on first use.

        Raises ``ManagedTargetError`` if it cannot start, or if a shared target
        died since (a crash must be loud, not silently restarted).  ``display_command`` and
        ``secrets``: see ``ManagedTarget`` (what messages show and mask).
        """
        k = self.key(command, env, ready_path)
        with self._lock:
            if k in self._failures:
                raise self._failures[k]
            target = self._targets.get(k)
            if target is not None:
                target.check_alive()  # a crash is loud (and keeps the log), never silently restarted
                return target
            # named from the template: an expanded ${VAR} could be a secret, and the path is printed
            name = re.sub(r"[^\w.-]", "_", Path(str((display_command or command)[0])).name) or "target"
            log = self.log_dir / f"target-{self._started}-{name}.log"
            self._started += 1
            target = ManagedTarget(command, log_path=log, ready_path=ready_path,
                                   startup_timeout_s=startup_timeout_s, env=env, host=self.host,
                                   display_command=display_command, secrets=secrets)
            try:
                target.start()
            except ManagedTargetError as exc:
                self._failures[k] = exc
                raise
            self._targets[k] = target
            return target

    def release(self, command: Sequence[str], *, ready_path: str = "/health",
                env: Mapping[str, str] | None = None) -> bool:
        """Stop the running target for this key on purpose and forget it, so that the next
        ``get`` starts a fresh one (A/B alternating blocks: two servers that cannot both fit).
        A target that died before is kept (its crash stays loud).  True when one was stopped."""
        k = self.key(command, env, ready_path)
        with self._lock:
            target = self._targets.get(k)
            if target is None or target.died:
                return False
            del self._targets[k]
        target.stop()
        return True

    def targets(self) -> list[ManagedTarget]:
        return list(self._targets.values())

    @property
    def failed(self) -> bool:
        """True when a target failed to start or died: its log is kept."""
        return bool(self._failures) or any(t.died for t in self._targets.values())

    def close(self) -> None:
        """Stop every target (most recently started first), then remove the log folder,
        unless a target failed (its error message names the log, which must stay)."""
        with self._lock:
            targets = list(self._targets.values())
            failed = self.failed
            self._targets.clear()
        for t in reversed(targets):
            t.stop()
        if not failed:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> "TargetPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
