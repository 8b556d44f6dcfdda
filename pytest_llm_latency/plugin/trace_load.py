"""Loading a workload's trace (issue 27): the file (``files.trace_file``), parsed and validated
(``core.spec.trace.read_trace``), then selected (``trace_start_ms``, ``trace_rows``).  Here, in the
plugin layer, because it joins ``files/`` and ``core/`` (neither may import the other) and
because the plugin knows the folder a relative ``trace:`` is resolved against: the SLO file's
for a YAML workload, the test file's for a marker or ``measure()`` (``Path(item.path).parent``,
as for ``roofline.gguf``).  Every problem is a ``ConfigError`` before any request is sent."""
from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError
from ..core.spec.trace import TraceRow, TraceSpec, read_trace, select_rows
from ..files.trace_file import TraceFileError, trace_lines


def trace_path(spec: TraceSpec, base_dir: Path) -> Path:
    """``trace:`` resolved: ``~`` expanded, a relative path against ``base_dir``."""
    path = Path(spec.path).expanduser()
    return path if path.is_absolute() else base_dir / path


def load_trace(spec: TraceSpec, base_dir: Path) -> list[TraceRow]:
    """The rows to replay, in file order (streamed: the file's text is never held whole)."""
    path = trace_path(spec, base_dir)
    try:
        rows = read_trace(trace_lines(path, resolved_from=base_dir), str(path), spec.block_tokens)
    except TraceFileError as exc:
        raise ConfigError(str(exc)) from None
    return select_rows(rows, spec)
