"""Exception types shared by every layer.

Pure: no pytest, no httpx.  The pytest layer maps ``ConfigError`` to
``pytest.UsageError`` (or a collection error for YAML files) and every
``MeasurementError`` to a failed test with the message shown verbatim.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .measure.record import RequestRecord


class LatencyError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(LatencyError, ValueError):
    """A bad value in configuration; the message names source, key and fix."""


class EmptySampleError(LatencyError, ValueError):
    """Statistics were asked of an empty sample (never reported as 0)."""


class MeasurementError(LatencyError):
    """A request could not be measured: a server fault or a protocol violation.

    ``kind`` is a short stable identifier (``connect``, ``http_429``,
    ``idle_timeout``, ``protocol`` ...) used in reports and counts.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.partial: RequestRecord | None = None  # the RequestRecord as far as it got (first token, gaps), when known


class ProtocolError(MeasurementError):
    """The byte stream broke the protocol (bad framing, bad JSON, oversize line)."""

    def __init__(self, message: str):
        super().__init__("protocol", message)


class LatencyWarning(UserWarning):
    """A note on a measurement (prompt-length deviation, bunched tokens, retries, short
    outputs allowed by max_error_rate, roofline not evaluated...).  Public as
    ``pytest_llm_latency.LatencyWarning``: ``-W error::pytest_llm_latency.LatencyWarning``
    turns every note into a failure."""


class LatencyDeprecationWarning(DeprecationWarning):
    """An old option, YAML key or marker argument: it still works for this release; the message names the new one."""
