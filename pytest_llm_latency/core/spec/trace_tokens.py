"""Token accounting of trace rows (issue 27; the format: ``core.spec.trace``).  Pure stdlib.

``check_context``: each row's context (its session's history first) against the server's
``max_model_len``, under ``trace_overlong`` (error | skip | clip); ``DeclaredCache``: the cache hits
the trace declares for a row, from the rows completed before it was sent, rounded down to the
server's cache block (``core.measure.prefix_cache.CACHE_BLOCK_TOKENS``).  The rules:
docs/trace-replay.md#reading-rules-in-detail and docs/trace-replay.md#how-the-prefix-cache-is-judged.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from ..errors import ConfigError
from ..measure.prefix_cache import CACHE_BLOCK_TOKENS
from .trace import TraceRow, blocks_of


def check_context(rows: list[TraceRow], max_model_len: int | None, overlong: str, name: str, *,
                  block_tokens: int = 512, template_tokens: int = 0) -> tuple[list[TraceRow], list[str]]:
    """The rows that fit ``max_model_len`` (``trace_overlong``: error | skip | clip, see the module
    docstring) and notes on what was dropped or clipped.  ``max_model_len`` None: rows unchanged
    (the server will reject an overlong row; the driver names it).  ``template_tokens``: tokens
    each request carries beyond the row's (the chat template), counted in every context;
    ``block_tokens``: the trace's (``TraceSpec.block_tokens``), for the ids a clipped row keeps."""
    if max_model_len is None:
        return list(rows), []
    history: dict[str, int] = {}      # session -> its turns' tokens so far
    dropped: set[str] = set()         # sessions cut short
    out: list[TraceRow] = []
    skipped = followers = clipped = unclippable = 0
    for r in rows:
        if r.session_id is not None and r.session_id in dropped:
            followers += 1
            continue
        past = history.get(r.session_id, 0) if r.session_id is not None else 0
        need = template_tokens + past + r.input_length + r.output_length
        if need > max_model_len:
            if overlong == "error":
                raise ConfigError(f"{name}:{r.line}: input_length: {_what(r)} needs {need} tokens of context "
                                  f"({_parts(r, past, template_tokens)}), beyond the server's max_model_len "
                                  f"{max_model_len} -- set trace_overlong: skip (drop such rows) or clip (shorten "
                                  f"their prompts), or serve the model with a longer context")
            fits = max_model_len - template_tokens - past - r.output_length
            if overlong == "clip" and fits >= 1:
                r = replace(r, input_length=fits, hash_ids=r.hash_ids[:blocks_of(fits, block_tokens)])
                clipped += 1
            else:
                skipped += overlong == "skip"
                unclippable += overlong == "clip"
                if r.session_id is not None:
                    dropped.add(r.session_id)
                continue
        if r.session_id is not None:
            history[r.session_id] = past + r.input_length + r.output_length
        out.append(r)
    notes = []
    more = f" (and {followers} later turn{'s' if followers != 1 else ''} of their sessions)" if followers else ""
    if skipped:
        notes.append(f"trace_overlong: skip: {skipped} row{'s' if skipped != 1 else ''} beyond max_model_len "
                     f"{max_model_len} dropped{more}")
    if clipped:
        notes.append(f"trace_overlong: clip: input_length shortened on {clipped} row{'s' if clipped != 1 else ''} "
                     f"to fit max_model_len {max_model_len}")
    if unclippable:
        notes.append(f"trace_overlong: clip: {unclippable} row{'s' if unclippable != 1 else ''} dropped: the "
                     f"session's history and the output alone exceed max_model_len {max_model_len}"
                     f"{more if not skipped else ''}")
    if not out:
        raise ConfigError(f"{name}: no row fits the server's max_model_len {max_model_len} -- replay a trace with "
                          f"shorter rows, or serve the model with a longer context")
    return out, notes


def _what(r: TraceRow) -> str:
    return f"row {r.index}" if r.session_id is None or r.first_turn else f"row {r.index} (a later turn of session " \
        f"{r.session_id!r})"


def _parts(r: TraceRow, past: int, template: int) -> str:
    parts = ([f"template {template}"] if template else []) + ([f"history {past}"] if past else [])
    return " + ".join(parts + [f"input_length {r.input_length}", f"output_length {r.output_length}"])


def block_lengths(row: TraceRow, block_tokens: int) -> list[int]:
    """The lengths of the row's named blocks (``hash_ids``): ``block_tokens`` each, but the
    row's last block (when named) is partial: ``input_length - (blocks - 1) * block_tokens``."""
    blocks = blocks_of(row.input_length, block_tokens)
    last = row.input_length - (blocks - 1) * block_tokens
    return [last if i == blocks - 1 else block_tokens for i in range(len(row.hash_ids))]


class DeclaredCache:
    """What the trace says a server's prefix cache may hold, as rows complete.  ``completed(row)``
    when a row's response has finished; ``hits(row)`` when a row is sent: the cached prompt tokens
    its declaration explains (docs/trace-replay.md#how-the-prefix-cache-is-judged), rounded down to
    ``cache_block``."""

    def __init__(self, block_tokens: int, cache_block: int = CACHE_BLOCK_TOKENS):
        self.block_tokens = block_tokens
        self.cache_block = cache_block
        self._root: dict = {}                 # hash id -> [longest length of that block, children]
        self._history: dict[str, int] = {}    # session -> tokens of its completed turns

    def completed(self, row: TraceRow) -> None:
        if row.session_id is not None:
            self._history[row.session_id] = self._history.get(row.session_id, 0) + row.input_length \
                + row.output_length
        if not row.first_turn:
            return
        level = self._root
        for hid, length in zip(row.hash_ids, block_lengths(row, self.block_tokens)):
            node = level.setdefault(hid, [0, {}])
            node[0] = max(node[0], length)
            level = node[1]

    def hits(self, row: TraceRow) -> int:
        if not row.first_turn:
            assert row.session_id is not None
            # the previous answer's last token was sampled, never fed back: the server holds the history
            # but that one token (llama.cpp's cache_n, vLLM's last block then one token short)
            tokens = max(self._history.get(row.session_id, 0) - 1, 0)
        else:
            tokens, level = 0, self._root
            for hid, length in zip(row.hash_ids, block_lengths(row, self.block_tokens)):
                node = level.get(hid)
                if node is None:
                    break
                tokens += min(length, node[0])
                if length < self.block_tokens or node[0] < self.block_tokens:
                    break  # a partial block ends the shared run
                level = node[1]
        return tokens // self.cache_block * self.cache_block


def declared_hits(row: TraceRow, completed: Iterable[TraceRow], block_tokens: int,
                  cache_block: int = CACHE_BLOCK_TOKENS) -> int:
    """The cached prompt tokens ``row``'s declaration explains, given the rows that completed
    before it was sent (``DeclaredCache`` for a whole replay)."""
    cache = DeclaredCache(block_tokens, cache_block)
    for done in completed:
        if done.index != row.index:
            cache.completed(done)
    return cache.hits(row)


def declared_from_stamps(rows: Iterable[TraceRow], stamps: dict[int, tuple[int | None, int | None]], block_tokens: int,
                         cache_block: int = CACHE_BLOCK_TOKENS) -> tuple[dict[int, int], dict[int, int]]:
    """The declared hits and the judge's bound of each sent row, decided after the run from its
    stamps (worker processes cannot share ``DeclaredCache`` cheaply): ``stamps[row index] =
    (t_send_ns, t_end_ns)``, ``t_end_ns`` None for a row that did not complete (a failure), a row
    without a send stamp left out (never sent).  The events in time order, a row's end before a
    send at the same instant: at a row's send, ``declared`` = the hits the rows completed so far
    explain, ``bound`` = those of the rows sent so far (completed or in flight); the same books
    as the replay keeps live (``client.drivers.trace_replay``), on the stamps instead of the
    bookkeeping's own order.  Returns ``(declared, bound)`` by row index."""
    by_index = {r.index: r for r in rows}
    events: list[tuple[int, int, int]] = []   # (time, 0 end | 1 send, row index)
    for index, (t_send, t_end) in stamps.items():
        if t_send is None or index not in by_index:
            continue
        events.append((t_send, 1, index))
        if t_end is not None:
            events.append((t_end, 0, index))
    cache, sent = DeclaredCache(block_tokens, cache_block), DeclaredCache(block_tokens, cache_block)
    declared: dict[int, int] = {}
    bound: dict[int, int] = {}
    for _, kind, index in sorted(events):
        row = by_index[index]
        if kind == 0:
            cache.completed(row)
        else:
            declared[index], bound[index] = cache.hits(row), sent.hits(row)
            sent.completed(row)
    return declared, bound
