"""Atomic file writes: temp file in the same directory, fsync, rename.

A reader (or a crash at any point) sees either the complete old file or the
complete new one, never a torn write.  A writer killed mid-write (SIGKILL, power
loss) may leave its temp file behind: ``.<name>.<random>.tmp`` next to the
target -- hidden, never ending in the target's suffix, and never renamed onto the
target by anyone else.  Old ones are not swept here, since a live concurrent
writer may own one.
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def _new_file_mode(path: Path) -> int:
    """The mode an ordinary ``open(path, 'w')`` would give: keep an existing file's mode,
    else 0o666 minus the umask (mkstemp's temp files are 0o600)."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(os.stat(path).st_mode)
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    mode = _new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
