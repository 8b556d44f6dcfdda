"""Worker-process bodies for the controller's tests (``client.placement.processes.workers.run_workers``): importable by
the spawned interpreter, so they can stand in for ``client.placement.processes.shard.worker_main``."""
from __future__ import annotations

import os


def ready_then_exit(conn, shared=None) -> None:
    """Takes its shard, says "ready", and dies before the common start (exit code 3)."""
    conn.recv()
    conn.send(("ready", os.getpid()))
    os._exit(3)
