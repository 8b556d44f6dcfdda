"""Reading a Mooncake trace file (issue 27): ``.jsonl`` or gzip-compressed (``.jsonl.gz``; gzip
is recognised by its magic bytes, whatever the name), streamed line by line so a million-row
trace is never held as text (the rows are parsed as they come: ``core.spec.trace.read_trace``).

Stdlib only, like the rest of ``files/``: problems are a ``TraceFileError`` (a ``ValueError``)
naming the file, and the line where one is known; ``plugin.trace_load`` turns them into the
``ConfigError`` the plugin reports as a usage error."""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO, Any, Iterator

GZIP_MAGIC = b"\x1f\x8b"


class TraceFileError(ValueError):
    """A trace file that cannot be read; the message names it and the fix."""


def trace_lines(path: Path, resolved_from: Path | None = None) -> Iterator[str]:
    """The file's lines as text, one at a time (decompressed when gzip).  ``resolved_from``: the
    folder a relative ``trace:`` was resolved against, named when the file is missing."""
    try:
        raw = path.open("rb")
    except FileNotFoundError:
        where = f" (trace: is resolved against {resolved_from})" if resolved_from is not None else ""
        raise TraceFileError(f"{path}: no such trace file{where} -- give the path of a Mooncake JSONL trace, "
                             f"relative to the SLO file's (or test file's) folder, or absolute") from None
    except OSError as exc:
        raise TraceFileError(f"{path}: cannot read the trace file ({exc.strerror or exc}) -- check the path and "
                             f"its permissions") from None
    return _lines(raw, path)


def _lines(raw: IO[bytes], path: Path) -> Iterator[str]:
    with raw:
        gz = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
        line = 0
        try:
            for line, data in enumerate(stream, 1):
                try:
                    yield data.decode("utf-8")
                except UnicodeDecodeError:
                    raise TraceFileError(f"{path}:{line}: row: not UTF-8 text -- a trace is JSON lines in "
                                         f"UTF-8") from None
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError; a cut-off file an EOFError
            raise TraceFileError(f"{path}:{line + 1}: row: the gzip stream is damaged ({exc}) -- compress the "
                                 f"trace again (gzip trace.jsonl) or give it uncompressed") from None
