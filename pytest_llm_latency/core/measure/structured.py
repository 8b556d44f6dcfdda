"""Structured output (issue 36): what a request of a ``structured:`` workload carries, the roles of
its requests, and the one definition of the TPOT overhead of constrained decoding.

A structured workload's samples carry the JSON Schema (``SchemaAsk``, role ``constrained``); when the
overhead is asked for (``structured_tpot_overhead_max``), every sample has an unconstrained twin
(role ``comparison``) sent interleaved with it through the same send path.  The records keep their
role (``RequestRecord.structured``), so the twins are set apart after the run.

``tpot_overhead``: p50 TPOT of the constrained requests ÷ p50 TPOT of their unconstrained twins − 1.
Medians, not means: one request stalled by a grammar compile (llama.cpp builds the grammar per
request) or a preemption moves a mean, not a median.  Pure: no I/O, no clock.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

CONSTRAINED = "constrained"
COMPARISON = "comparison"
ROLES = (CONSTRAINED, COMPARISON)
#: the failure kind of a constrained answer that is not valid for its schema (not JSON, or not matching)
SCHEMA_VIOLATION = "schema_violation"


@dataclass(frozen=True)
class SchemaAsk:
    """What one request of a structured workload asks: the schema's ``name`` (the file's stem; OpenAI
    wants one), the schema, and its role: ``constrained`` (the schema is sent and the answer validated)
    or ``comparison`` (the unconstrained twin: sent without it, for ``tpot_overhead``)."""
    name: str
    schema: Mapping[str, Any] = field(compare=False, hash=False, repr=False)
    role: str = CONSTRAINED

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"SchemaAsk.role must be one of {ROLES}, not {self.role!r}")

    @property
    def constrained(self) -> bool:
        return self.role == CONSTRAINED


def tpot_overhead(constrained_tpot_ms: Sequence[float], comparison_tpot_ms: Sequence[float]) -> float | None:
    """p50 TPOT constrained ÷ p50 TPOT unconstrained − 1 (0.25: constrained decode 25% slower per
    token); None when either side has no TPOT or the unconstrained p50 is 0."""
    if not constrained_tpot_ms or not comparison_tpot_ms:
        return None
    base = float(statistics.median(comparison_tpot_ms))
    if base <= 0:
        return None
    return float(statistics.median(constrained_tpot_ms)) / base - 1.0


def pair_roles(pairs: int) -> list[str]:
    """The roles of ``2 x pairs`` interleaved requests: pair i is (constrained, comparison) for even i
    and (comparison, constrained) for odd i, so neither goes first more often (a server warming up,
    a neighbour's load, a cache filling up favour neither)."""
    out: list[str] = []
    for i in range(pairs):
        out += [CONSTRAINED, COMPARISON] if i % 2 == 0 else [COMPARISON, CONSTRAINED]
    return out
