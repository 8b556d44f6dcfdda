"""A managed target's command run once with ``--help``, bounded, for the flags it lists (a server
sweep's flags are checked against it before any server starts: ``plugin/server_sweep.py``).

``serve-reference --help``, ``vllm serve --help`` and ``llama-server --help`` all list their options;
newer vLLM lists only its option groups there and every flag under ``--help=all``, which is asked for
when the first text mentions it.  ``{port}`` / ``{host}`` in the command are filled with a loopback
placeholder (nothing is served: the command prints its help and exits).  No pytest import."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Mapping, Sequence

from .process import die_with_parent

#: seconds one ``--help`` may take (a Python server imports its framework first)
HELP_TIMEOUT_S = 60.0
#: characters of help text kept (the flags are near the top of any help)
MAX_CHARS = 1_000_000


def _run(argv: list[str], env: dict[str, str], timeout_s: float) -> tuple[str | None, str]:
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True, preexec_fn=die_with_parent())
    except OSError as exc:
        return None, f"{argv[0]} could not be run ({exc})"
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5.0)
        return None, f"'{argv[-1]}' did not finish within {timeout_s:g} s"
    return out[:MAX_CHARS].decode("utf-8", "replace"), ""


def help_text(command: Sequence[str], env: Mapping[str, str] | None = None,
              timeout_s: float = HELP_TIMEOUT_S) -> tuple[str | None, str]:
    """``(what command --help printed, "")``, or ``(None, why not)``: not runnable, or no answer in time."""
    def fill(s: str) -> str:
        return s.replace("{port}", "0").replace("{host}", "127.0.0.1")
    argv = [fill(str(c)) for c in command]
    full_env = {**os.environ, **{k: fill(str(v)) for k, v in (env or {}).items()}}
    text, why = _run(argv + ["--help"], full_env, timeout_s)
    if text is not None and "--help=all" in text:  # vLLM: the groups here, every flag there
        more, _ = _run(argv + ["--help=all"], full_env, timeout_s)
        if more:
            text += "\n" + more
    return text, why
