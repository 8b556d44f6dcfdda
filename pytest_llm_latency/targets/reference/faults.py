"""Fault injection: the parsing of fault specs and the canned error bodies.

A fault is chosen for the whole server (``--fault SPEC`` / ``?fault=SPEC``) or for one
request with the header ``X-Reference-Fault: SPEC`` (the header wins); ``SPEC`` =
``mode[;param=value]...``.  The modes, their parameters and what each response is:
docs/servers.md#faults.  Every fault is bounded in time (``MAX_FAULT_SECONDS``).
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field

from ...core.errors import ConfigError

HEADER = "x-reference-fault"
MAX_FAULT_SECONDS = 60.0
MAX_HUGE_LINE = 64 * 1024 * 1024

#: mode -> {param: default}
MODES: dict[str, dict[str, float | int | str | None]] = {
    "refuse": {},
    "reset": {"after": 2},
    "stall": {"after": 1, "seconds": 2.0},
    "trickle": {"bytes_per_s": 1.0, "max_seconds": 10.0, "headers": 0},
    "429": {"retry_after": 1},
    "503": {"retry_after": None},
    "context_length": {},
    "html502": {},
    "malformed_json": {"after": 1},
    "no_done": {},
    "error_event": {"after": 1},
    "early_stop": {"after": 1},
    "huge_line": {"bytes": 1024 * 1024, "after": 1},
    "wrong_content_type": {"body": "sse"},
    "rewrite_tool_history": {},
    "schema_violation": {},
    "pause": {"at": 1.0, "seconds": 2.0},
}
#: modes that act on the engine, not on one response
ENGINE_MODES = frozenset({"pause"})
ALIASES = {"rate_limit": "429", "http_429": "429", "unavailable": "503", "http_503": "503",
           "html_502": "html502", "502": "html502", "context": "context_length",
           "malformed": "malformed_json", "missing_done": "no_done", "error": "error_event",
           "content_type": "wrong_content_type", "huge": "huge_line",
           "schema": "schema_violation"}


@dataclass(frozen=True)
class Fault:
    mode: str
    params: dict = field(default_factory=dict)

    def get(self, name: str):
        return self.params.get(name, MODES[self.mode].get(name))

    def seconds(self, name: str) -> float:
        return max(0.0, min(float(self.get(name) or 0.0), MAX_FAULT_SECONDS))

    def __str__(self) -> str:
        return ";".join([self.mode] + [f"{k}={v}" for k, v in self.params.items()])


def parse_fault(spec: str | None, *, source: str = "fault") -> Fault | None:
    """Parse ``mode[;k=v]...``; ``None``/empty/``none`` -> no fault.  Bad specs raise ConfigError."""
    if spec is None:
        return None
    spec = spec.strip()
    if not spec or spec.lower() == "none":
        return None
    head, *rest = [p.strip() for p in spec.split(";")]
    mode = ALIASES.get(head.lower(), head.lower())
    if mode not in MODES:
        close = difflib.get_close_matches(mode, list(MODES) + list(ALIASES), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"{source}: unknown fault mode {head!r}{hint} (known: {', '.join(MODES)})")
    params: dict = {}
    for item in filter(None, rest):
        key, sep, raw = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in MODES[mode]:
            known = ", ".join(MODES[mode]) or "none"
            raise ConfigError(f"{source}: fault {mode!r} has no parameter {item!r} (parameters: {known})")
        default = MODES[mode][key]
        try:
            if isinstance(default, str):
                value: object = raw.strip().lower()
            elif isinstance(default, int) and not isinstance(default, bool):
                value = int(raw)
            else:
                value = float(raw)
        except ValueError:
            raise ConfigError(f"{source}: fault parameter {key}={raw!r} is not a number") from None
        if isinstance(value, (int, float)) and value < 0:
            raise ConfigError(f"{source}: fault parameter {key} must be >= 0")
        params[key] = value
    if mode == "huge_line" and int(params.get("bytes", 0)) > MAX_HUGE_LINE:
        raise ConfigError(f"{source}: huge_line bytes is capped at {MAX_HUGE_LINE}")
    if mode == "wrong_content_type" and params.get("body", "sse") not in ("sse", "json"):
        raise ConfigError(f"{source}: wrong_content_type body must be sse or json")
    if mode == "trickle" and float(params.get("bytes_per_s", 1.0)) <= 0:
        raise ConfigError(f"{source}: trickle bytes_per_s must be > 0")
    return Fault(mode, params)


# -- canned bodies ---------------------------------------------------------------------
def openai_error(message: str, err_type: str, code: int) -> bytes:
    """vLLM's ErrorResponse shape."""
    return json.dumps({"error": {"message": message, "type": err_type, "param": None,
                                 "code": code}}).encode()


def context_length_message(max_model_len: int, prompt_tokens: int, completion_tokens: int) -> str:
    return (f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {prompt_tokens + completion_tokens} tokens ({prompt_tokens} in the "
            f"messages, {completion_tokens} in the completion). Please reduce the length of "
            f"the messages or completion.")


HTML_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
            b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
            b"</body>\r\n</html>\r\n")


_RETRY_ERRORS = {"429": ("Too many requests (injected fault)", "RateLimitError"),
                 "503": ("Service unavailable (injected fault)", "ServiceUnavailableError")}


def status_fault_response(fault: Fault, max_model_len: int) -> tuple[int, list[tuple[str, str]], bytes] | None:
    """(status, headers, body) for faults answered before any generation, else None."""
    if fault.mode in _RETRY_ERRORS:
        headers = [("content-type", "application/json")]
        if fault.get("retry_after") is not None:
            headers.append(("retry-after", str(int(fault.get("retry_after")))))
        status = int(fault.mode)
        return status, headers, openai_error(*_RETRY_ERRORS[fault.mode], status)
    if fault.mode == "context_length":
        msg = context_length_message(max_model_len, max_model_len, 1)
        return 400, [("content-type", "application/json")], openai_error(msg, "BadRequestError", 400)
    if fault.mode == "html502":
        return 502, [("content-type", "text/html")], HTML_502
    return None
