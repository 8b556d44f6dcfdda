"""Per-chunk token counts a stream did not give, recovered after the samples (off the timing path:
no stream is in flight) by the rules of ``core.measure.metrics.COUNT_RULES`` (docs/concepts.md, ITL).

Cost: one tokenize call per *distinct* chunk text (cached; at most ``MAX_TOKENIZE_CALLS``
per workload, within ``TOKENIZE_DEADLINE_S``); streams already exact (continuous usage, or as
many chunks as tokens) cost nothing.  After a failed call the endpoint is not used again.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Callable

import httpx

from ...core.result.facts import PerChunkItl
from ...core.measure import metrics as m
from ...core.errors import MeasurementError
from ...core.measure.record import RequestRecord
from ...core.spec.workload import Workload

MAX_TOKENIZE_CALLS = 4096
TOKENIZE_DEADLINE_S = 60.0


class ChunkCounter:
    """``count(text) -> tokens | None``, cached per text; None once a call failed or the budget is
    spent (``stopped`` says why)."""

    def __init__(self, tokenize: Callable[[str], int]):
        self.tokenize = tokenize
        self.deadline = time.monotonic() + TOKENIZE_DEADLINE_S
        self.cache: dict[str, int] = {}
        self.calls = 0
        self.stopped: str | None = None

    def __call__(self, text: str) -> int | None:
        k = self.cache.get(text)
        if k is not None or self.stopped:
            return k
        if self.calls >= MAX_TOKENIZE_CALLS or time.monotonic() > self.deadline:
            self.stopped = f"the tokenize budget ({MAX_TOKENIZE_CALLS} calls, {TOKENIZE_DEADLINE_S:g} s) was spent"
            return None
        self.calls += 1
        try:
            k = int(self.tokenize(text))
        except (MeasurementError, httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            self.stopped = f"the tokenize endpoint failed ({getattr(exc, 'message', None) or exc})"
            return None
        self.cache[text] = k
        return k


def text_counter(client) -> ChunkCounter | None:
    """The server's tokenize endpoint as a chunk counter, or None where it has none."""
    from .tokens import tokenize_endpoint

    try:
        tok = tokenize_endpoint(client, add_special=False)
    except (MeasurementError, httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    return ChunkCounter(tok) if tok is not None else None


class CountRecovery:
    """Recovers the counts of a workload's records that lack them (``apply``, after the samples,
    or after each round of ``samples: auto``) and reports the rules used (``report``).
    ``counter``: found on first need ("detect"), or given (None: there is none)."""

    def __init__(self, client, workload: Workload, counter: Callable[[str], int | None] | None | str = "detect"):
        self.client, self.workload, self.counter = client, workload, counter
        self.whys: Counter = Counter()

    def apply(self, records: list) -> None:
        todo = [r for r in records if isinstance(r, RequestRecord) and r.token_count_rule is None and r.chunks]
        if todo and self.counter == "detect":
            needed = any(m.reported_output_tokens(r) is not None for r in todo)
            self.counter = text_counter(self.client) if needed else "detect"
        count = None if isinstance(self.counter, str) else self.counter
        for r in todo:
            why = m.recover_token_counts(r, count)
            if why:
                stopped = getattr(count, "stopped", None)
                self.whys[stopped if stopped and r.token_count_rule == "apportioned" else why] += 1

    def report(self, records: list[RequestRecord]) -> tuple[dict, list[str], PerChunkItl | None]:
        """(measurement fields: ``itl_token_counts``, notes, the streams left per chunk: a fact for
        ``core.checks.measurement_validity.check_token_counts``, an error where the workload has an
        ITL budget, since a per-chunk figure would fail a correct server)."""
        rules = Counter(r.token_count_rule for r in records if r.token_count_rule)
        if not rules:
            return {}, [], None
        extra: dict = {"itl_token_counts": m.itl_token_counts(records)}
        notes: list[str] = []
        per_chunk = None
        why = f" ({self.whys.most_common(1)[0][0]})" if self.whys else ""
        total = sum(rules.values())
        if rules.get("apportioned"):
            notes.append(f"ITL: per-chunk token counts were apportioned by text length on {rules['apportioned']} "
                         f"of {total} streams{why}: per-token ITL is an estimate there")
        if rules.get("per chunk"):
            n = rules["per chunk"]
            notes.append(f"ITL is per chunk, not per token, on {n} of {total} streams{why}")
            per_chunk = PerChunkItl(n, total, why)
        return extra, notes, per_chunk
