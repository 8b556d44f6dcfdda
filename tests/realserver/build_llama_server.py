#!/usr/bin/env python3
"""Build (once) and cache llama.cpp's ``llama-server`` for the integration tier.

Why this exists: CI has no model hub and Debian 12 has no llama.cpp package,
but PyPI's ``llama-cpp-python`` sdist vendors the whole llama.cpp tree
(including ``tools/server``).  We download that pinned sdist, build only the
``llama-server`` target, and cache the binary keyed by version so that only
the first run pays the ~4-6 minute compile on 2 cores.

Cache layout (``LLM_LATENCY_CACHE`` overrides the root)::

    ${LLM_LATENCY_CACHE:-~/.cache/pytest-llm-latency}/
        sdist/llama_cpp_python-<version>.tar.gz      (kept: avoids re-download)
        llama-server/<version>/llama-server          (the binary)
        llama-server/<version>/build-info.json       (flags, wall time)
        llama-server/<version>.build.log             (last build's full log)

Properties:
  * idempotent: a present, runnable binary returns at once;
  * atomic: the build happens in a temporary directory and the binary is
    moved into place with ``os.replace``; a half-built binary is never seen;
  * concurrency-safe: an ``flock`` serialises builders (pytest-xdist workers);
  * clear errors: a missing tool or a failing step raises ``BuildError``
    naming the step, the command and the tail of the log.

Run ``python tests/realserver/build_llama_server.py``; the last stdout line
is the binary path.  Note: quantized GGUFs need ``--no-repack`` at run time on
CPUs with AMX (``ggml_backend_amx_mul_mat`` segfaults); the F32 models used by
the tests do not.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"

#: CMake flags from /work/shared/reference/cpu-servers.md.  The prebuilt web
#: UI must stay off, otherwise configure tries to download it (no internet).
CMAKE_FLAGS = [
    "-G", "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_CCACHE=OFF",
]

REQUIRED_TOOLS = ("cmake", "ninja")


class BuildError(RuntimeError):
    """The llama-server build failed; the message says which step and why."""


def cache_root() -> Path:
    """Root of every cached artefact (binary, sdist, models)."""
    env = os.environ.get("LLM_LATENCY_CACHE")
    root = Path(env) if env else Path.home() / ".cache" / "pytest-llm-latency"
    return root.expanduser()


def binary_path(version: str = LLAMA_CPP_PYTHON_VERSION, root: Path | None = None) -> Path:
    """Where the cached binary for ``version`` lives (whether built or not)."""
    return (root or cache_root()) / "llama-server" / version / "llama-server"


def _log(msg: str) -> None:
    # Progress goes to stderr so stdout's last line stays the binary path.
    print(f"[build_llama_server] {msg}", file=sys.stderr, flush=True)


def _is_usable(binary: Path) -> bool:
    """A cached binary counts only if it is an executable regular file that runs."""
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return False
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _tail(path: Path, n_lines: int = 40) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "<no log>"
    return "\n".join(lines[-n_lines:])


def _run_step(step: str, cmd: list[str], log_path: Path, cwd: Path | None = None,
              timeout_s: float = 3600.0) -> None:
    """Run one build step, appending its output to ``log_path``; raise on failure."""
    _log(f"{step}: {' '.join(cmd)}")
    with open(log_path, "ab") as log:
        log.write(f"\n=== {step}: {' '.join(cmd)}\n".encode())
        log.flush()
        try:
            proc = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=timeout_s)
        except FileNotFoundError as exc:
            raise BuildError(f"{step}: command not found: {cmd[0]!r} ({exc})") from exc
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"{step}: timed out after {timeout_s:.0f}s: {' '.join(cmd)}\n"
                             f"log tail ({log_path}):\n{_tail(log_path)}") from exc
    if proc.returncode != 0:
        raise BuildError(f"{step} failed with exit code {proc.returncode}: {' '.join(cmd)}\n"
                         f"log tail ({log_path}):\n{_tail(log_path)}")


def _check_tools() -> None:
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if shutil.which("c++") is None and shutil.which("g++") is None:
        missing.append("c++ (g++)")
    if missing:
        raise BuildError("cannot build llama-server: missing build tools "
                         f"{', '.join(missing)} (on Debian: apt-get install cmake ninja-build g++)")


def _ensure_sdist(version: str, root: Path, log_path: Path) -> Path:
    """Download the pinned sdist once into ``root/sdist`` (atomically)."""
    sdist_dir = root / "sdist"
    sdist_dir.mkdir(parents=True, exist_ok=True)
    target = sdist_dir / f"llama_cpp_python-{version}.tar.gz"
    if target.is_file() and tarfile.is_tarfile(target):
        return target
    with tempfile.TemporaryDirectory(dir=sdist_dir, prefix=".dl-") as tmp:
        _run_step("download sdist",
                  [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   f"llama-cpp-python=={version}", "-d", tmp],
                  log_path, timeout_s=1800)
        found = sorted(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        if not found:
            raise BuildError(f"pip download produced no llama_cpp_python sdist in {tmp}; "
                             f"log tail:\n{_tail(log_path)}")
        os.replace(found[0], target)
    return target


def _extract_llama_cpp(sdist: Path, dest: Path) -> Path:
    """Extract only ``vendor/llama.cpp`` from the sdist; return its directory."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name + "/"]
        if not members:
            raise BuildError(f"{sdist} has no vendor/llama.cpp tree")
        tar.extractall(dest, members=members, filter="data")
    candidates = list(dest.glob("*/vendor/llama.cpp"))
    if len(candidates) != 1 or not (candidates[0] / "CMakeLists.txt").is_file():
        raise BuildError(f"unexpected sdist layout in {sdist}: {candidates}")
    return candidates[0]


def build(version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int = 2, root: Path | None = None,
          extra_cmake_flags: list[str] | None = None) -> Path:
    """Build ``llama-server`` into the cache and return the binary path.

    Returns immediately when a usable binary is already cached.  Builders are
    serialised with a lock file, and the check is repeated after taking it, so
    concurrent callers build once.
    """
    root = root or cache_root()
    final = binary_path(version, root)
    if _is_usable(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    lock_path = final.parent.parent / f".{version}.lock"
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"another build holds {lock_path}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_usable(final):
            return final
        _check_tools()
        log_path = final.parent.parent / f"{version}.build.log"
        log_path.write_text(f"llama-server build, llama-cpp-python {version}\n")
        started = time.monotonic()
        sdist = _ensure_sdist(version, root, log_path)
        with tempfile.TemporaryDirectory(dir=final.parent.parent, prefix=f".build-{version}-") as t:
            tmp = Path(t)
            src = _extract_llama_cpp(sdist, tmp / "src")
            bdir = tmp / "build"
            flags = CMAKE_FLAGS + list(extra_cmake_flags or [])
            _run_step("configure", ["cmake", "-S", str(src), "-B", str(bdir), *flags], log_path)
            _run_step("build", ["cmake", "--build", str(bdir), "--target", "llama-server",
                                "-j", str(jobs)], log_path)
            built = bdir / "bin" / "llama-server"
            if not built.is_file():
                raise BuildError(f"build succeeded but {built} is missing; "
                                 f"log tail:\n{_tail(log_path)}")
            staged = final.with_name(f".llama-server.{os.getpid()}.tmp")
            shutil.copy2(built, staged)
            staged.chmod(0o755)
            if not _is_usable(staged):
                staged.unlink(missing_ok=True)
                raise BuildError(f"built binary {built} does not run `--version`")
            os.replace(staged, final)
        wall_s = time.monotonic() - started
        info = {"llama_cpp_python": version, "cmake_flags": flags, "jobs": jobs,
                "wall_s": round(wall_s, 1), "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (final.parent / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
        _log(f"built in {wall_s:.0f}s: {final}")
        return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=LLAMA_CPP_PYTHON_VERSION,
                        help="llama-cpp-python sdist version to build (default: %(default)s)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="parallel compile jobs")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="cache root (default: $LLM_LATENCY_CACHE or ~/.cache/pytest-llm-latency)")
    args = parser.parse_args(argv)
    try:
        path = build(args.version, jobs=args.jobs, root=args.cache_dir)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
