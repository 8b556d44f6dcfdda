"""Speculative decoding in the reference engine: how many tokens each decode drafts and accepts.

Pure: no I/O, no clock; the draws come from one ``random.Random(spec_seed)``, so the same
seed and the same request sequence give the same accepted counts (like ``jitter_seed``).

Per decode step of one sequence that still has ``r`` tokens to produce:

* it drafts ``d = min(k, r - 1)`` tokens (with chunked prefill also at most the step's
  token budget left - 1): the last step of a request drafts fewer, so nothing is drafted
  past the output length and every counter agrees with what the stream emitted;
* draft position ``i`` (0-based) is accepted when every earlier one was and a draw
  ``< p_i`` (``spec_acceptance``: one ``p`` for every position, i.e. geometric, or a
  comma list of ``k`` conditional probabilities);
* the step emits ``1 + accepted`` tokens (the target's own token after the accepted run).

So the expected tokens per step (no truncation) is ``1 + p_0 + p_0 p_1 + ... + p_0...p_{k-1}``
(``Speculation.expected_tokens_per_step``); ``1.0`` everywhere gives ``1 + k``.
"""
from __future__ import annotations

import math
import operator
import random
from dataclasses import dataclass
from functools import reduce
from itertools import accumulate

from ...core.errors import ConfigError


def parse_acceptance(raw: str, k: int, *, source: str = "reference") -> tuple[float, ...]:
    """``"p"`` or ``"p0,p1,...,p(k-1)"`` -> ``k`` per-position probabilities in [0, 1]."""
    parts = [x.strip() for x in str(raw).split(",")]
    try:
        probs = [float(x) for x in parts]
    except ValueError:
        raise ConfigError(f"{source}: spec_acceptance must be a number in [0, 1] or a comma list of "
                          f"spec_tokens such numbers (e.g. 0.8 or 0.9,0.7,0.5), got {raw!r}") from None
    bad = [p for p in probs if not (math.isfinite(p) and 0.0 <= p <= 1.0)]
    if bad:
        raise ConfigError(f"{source}: spec_acceptance values must be probabilities in [0, 1], got {raw!r}")
    if len(probs) == 1:
        return tuple(probs * k)
    if len(probs) != k:
        raise ConfigError(f"{source}: spec_acceptance lists {len(probs)} per-position probabilities "
                          f"({raw!r}) but spec_tokens is {k}: give one number or exactly {k}")
    return tuple(probs)


@dataclass(frozen=True)
class Speculation:
    """``k`` drafted tokens per step and the conditional acceptance of each draft position."""

    tokens: int
    acceptance: tuple[float, ...]
    seed: int = 0

    def __post_init__(self) -> None:
        if self.tokens < 1 or len(self.acceptance) != self.tokens:
            raise ValueError("Speculation needs tokens >= 1 and one acceptance per position")

    def expected_tokens_per_step(self) -> float:
        """``1 + sum_i prod_{j <= i} p_j``: the mean tokens a full (untruncated) step emits."""
        return reduce(operator.add, accumulate(self.acceptance, operator.mul), 1.0)  # in order, on any Python


class Drafting:
    """The engine's drafter: plans each decode's draft and draws its accepted length."""

    def __init__(self, spec: Speculation):
        self.spec = spec
        self._rng = random.Random(spec.seed)

    def plan(self, remaining: int, budget: float = math.inf) -> int:
        """Tokens to draft for a sequence with ``remaining`` tokens still to produce (>= 1)
        within a step's token ``budget`` left."""
        return max(int(min(self.spec.tokens, remaining - 1, budget - 1)), 0)

    def verify(self, drafted: int) -> int:
        """How many of ``drafted`` tokens the target accepts (a leading run of positions)."""
        accepted = 0
        for p in self.spec.acceptance[:drafted]:
            if p >= 1.0 or (p > 0.0 and self._rng.random() < p):
                accepted += 1
            else:
                break
        return accepted
