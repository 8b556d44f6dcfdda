"""Incremental assembly of streamed tool calls, and when their arguments became usable: the first
``delta.tool_calls`` entry, and the fragment after which the arguments parse as JSON (``core.agent``;
docs/agent-sessions.md).  Fragments of ``function.arguments`` are cut anywhere (mid-key, mid-string,
mid-escape, mid-UTF-8 as ``bytes``): ``JsonCompleteness`` carries string, escape and nesting state
across them and parses the whole text only once the top-level value has closed, O(total length).
Pure: no I/O.
"""
from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field


class JsonCompleteness:
    """Is the text fed so far one complete JSON value?  Fed in fragments."""

    __slots__ = ("_parts", "_depth", "_in_str", "_esc", "_started", "complete", "_decoder")

    def __init__(self):
        self._parts: list[str] = []
        self._depth = 0
        self._in_str = self._esc = self._started = False
        self.complete = False
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def feed(self, fragment: str | bytes) -> bool:
        """Add a fragment; True once the text is a complete JSON value (and stays True)."""
        if isinstance(fragment, (bytes, bytearray)):
            fragment = self._decoder.decode(bytes(fragment))  # a split multi-byte char waits for its tail
        if not fragment:
            return self.complete
        self._parts.append(fragment)
        if self.complete:  # more text after a complete value: re-check the whole (rare)
            self.complete = self._parses()
            return self.complete
        closed = False
        for ch in fragment:
            if self._in_str:
                if self._esc:
                    self._esc = False
                elif ch == "\\":
                    self._esc = True
                elif ch == '"':
                    self._in_str = False
                    closed = self._depth == 0
                continue
            if ch == '"':
                self._in_str, self._started = True, True
            elif ch in "{[":
                self._depth += 1
                self._started = True
            elif ch in "}]":
                self._depth -= 1
                closed = self._depth <= 0
        if closed and not self._in_str:  # a bare number/literal never counts: arguments are an object
            self.complete = self._parses()
        return self.complete

    def _parses(self) -> bool:
        try:
            json.loads(self.text)
        except ValueError:
            return False
        return True


@dataclass
class ToolCall:
    index: int
    id: str | None = None
    name: str = ""
    t_first_ns: int | None = None
    t_complete_ns: int | None = None
    scanner: JsonCompleteness = field(default_factory=JsonCompleteness, repr=False)

    @property
    def arguments(self) -> str:
        return self.scanner.text

    @property
    def complete(self) -> bool:
        return self.scanner.complete


@dataclass
class ToolCallStream:
    """The tool calls of one response, assembled from ``(t_ns, delta.tool_calls)`` pairs."""

    calls: dict[int, ToolCall] = field(default_factory=dict)
    t_first_ns: int | None = None

    def feed(self, t_ns: int, tool_calls) -> None:
        if not isinstance(tool_calls, list):
            return
        for pos, tc in enumerate(tool_calls):
            if not isinstance(tc, dict):
                continue
            index = tc.get("index", pos)
            index = index if isinstance(index, int) and not isinstance(index, bool) else pos
            call = self.calls.setdefault(index, ToolCall(index))
            if call.t_first_ns is None:
                call.t_first_ns = t_ns
            if self.t_first_ns is None:
                self.t_first_ns = t_ns
            if isinstance(tc.get("id"), str) and tc["id"]:
                call.id = tc["id"]
            fn = tc.get("function")
            fn = fn if isinstance(fn, dict) else {}
            if isinstance(fn.get("name"), str) and fn["name"] and not call.name:
                call.name = fn["name"]
            args = fn.get("arguments")
            if isinstance(args, dict):  # Ollama sends the arguments as an object, whole
                args = json.dumps(args)
            if isinstance(args, (str, bytes)) and args:
                was = call.complete
                if call.scanner.feed(args) and not was:
                    call.t_complete_ns = t_ns

    @property
    def t_complete_ns(self) -> int | None:
        """When every tool call's arguments were complete JSON (None: some never were)."""
        if not self.calls or not all(c.complete for c in self.calls.values()):
            return None
        return max(c.t_complete_ns or 0 for c in self.calls.values())  # complete: each has its time

    def ordered(self) -> list[ToolCall]:
        return [self.calls[i] for i in sorted(self.calls)]


def assemble(deltas: list[tuple[int, list]]) -> ToolCallStream:
    """``RequestRecord.tool_deltas`` → the assembled calls with their times."""
    s = ToolCallStream()
    for t_ns, tcs in deltas:
        s.feed(t_ns, tcs)
    return s
