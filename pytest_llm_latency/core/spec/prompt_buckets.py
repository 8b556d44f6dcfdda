"""TTFT budgets per prompt-length bucket (issue 27): ``ttft_<stat>_by_prompt``, a list of
``{below|at_least, budget}`` buckets, each judged by ``core.checks.by_prompt`` like the ordinary
``ttft_<stat>`` budget on its own requests.  Pure.  The buckets' ranges, the overflow and which
length a request has: docs/writing-slos.md#ttft-per-prompt-length-bucket.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .budgets import BY_PROMPT_KEYS, did_you_mean, parse_duration_ms
from ..errors import ConfigError
from ..measure.stats import STATS

__all__ = ["BY_PROMPT_KEYS", "PromptBucket", "PromptBudget", "parse_prompt_budget", "request_prompt_tokens",
           "split", "under"]

BUCKET_KEYS = ("below", "at_least", "budget")
EXAMPLE = "[{below: 1024, budget: 300ms}, {below: 8192, budget: 1.2s}, {at_least: 8192, budget: 3s}]"


@dataclass(frozen=True)
class PromptBucket:
    lo: int                # first length in the bucket (inclusive)
    hi: int | None         # first length past it (exclusive); None: the open top bucket
    limit: float           # ms

    @property
    def label(self) -> str:
        """``<1024``, ``1024..<8192``, ``>=8192``: the bucket's name in keys and messages."""
        if self.hi is None:
            return f">={self.lo}"
        return f"<{self.hi}" if self.lo == 0 else f"{self.lo}..<{self.hi}"

    @property
    def range_text(self) -> str:
        return f"[{self.lo}, {'inf' if self.hi is None else self.hi}) prompt tokens"

    def holds(self, length: int) -> bool:
        return self.lo <= length and (self.hi is None or length < self.hi)


@dataclass(frozen=True)
class PromptBudget:
    key: str                              # ttft_p95_by_prompt
    stat: str                             # p95
    buckets: tuple[PromptBucket, ...]
    source: str = ""
    metric: str = "ttft"

    def bucket_key(self, b: PromptBucket) -> str:
        """``ttft_p95_by_prompt[<1024]``: the bucket's name in the JSON, JUnit and the terminal."""
        return f"{self.key}[{b.label}]"

    @property
    def top(self) -> int | None:
        """The length from which a request is in no bucket (None: an open top bucket)."""
        return self.buckets[-1].hi

    def bucket_of(self, length: int) -> PromptBucket | None:
        return next((b for b in self.buckets if b.holds(length)), None)


def parse_prompt_budget(key: str, value: Any, where: Callable[[tuple], str]) -> PromptBudget:
    """``value`` (a list of ``{below|at_least, budget}``) as a ``PromptBudget``; ``where(path)``
    names a place below the key (``where(())`` the key, ``where((1, "below"))`` an item's key)."""
    if key not in BY_PROMPT_KEYS:
        raise ConfigError(f"{where(())}: unknown budget {key!r}{did_you_mean(key, BY_PROMPT_KEYS)} -- per "
                          f"prompt-length budgets are ttft_<stat>_by_prompt with stat in {', '.join(STATS)}")
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) or not value:
        got = "an empty list" if isinstance(value, Sequence) and not value else f"{type(value).__name__} {value!r}"
        raise ConfigError(f"{where(())}: {key} is a list of prompt-length buckets, each {{below: N, budget: D}} "
                          f"(bucket i covers [previous below, below)), e.g. {EXAMPLE}; got {got}")
    buckets: list[PromptBucket] = []
    for i, item in enumerate(value):
        at = lambda *k, i=i: where((i,) + k)  # noqa: E731
        if not isinstance(item, Mapping):
            raise ConfigError(f"{at()}: expected a bucket like {{below: 1024, budget: 300ms}}, "
                              f"got {type(item).__name__} {item!r}")
        for k in item:
            if k not in BUCKET_KEYS:
                raise ConfigError(f"{at(k)}: unknown bucket key {k!r}{did_you_mean(k, BUCKET_KEYS)} -- a bucket has "
                                  f"below (or at_least, for the open top bucket) and budget")
        if "budget" not in item:
            raise ConfigError(f"{at()}: missing budget -- each bucket gives its TTFT budget, "
                              f"e.g. {{below: 1024, budget: 300ms}}")
        limit = parse_duration_ms(item["budget"], at("budget"))
        prev = buckets[-1].hi if buckets else 0
        if "below" in item and "at_least" in item:
            raise ConfigError(f"{at()}: give below or at_least, not both -- below ends a bucket, at_least "
                              f"starts the open top one")
        if "at_least" in item:
            buckets.append(_top(item["at_least"], i, len(value), prev, limit, at))
            continue
        if "below" not in item:
            raise ConfigError(f"{at()}: missing below -- each bucket but an open top one ({{at_least: N, "
                              f"budget: D}}) gives the prompt length it ends below, e.g. {{below: 1024, "
                              f"budget: 300ms}}")
        below = item["below"]
        if isinstance(below, bool) or not isinstance(below, int) or below < 1:
            raise ConfigError(f"{at('below')}: expected an integer number of prompt tokens >= 1, got {below!r}")
        if buckets and below <= (prev or 0):
            raise ConfigError(f"{at('below')}: {below} is not above the previous bucket's below ({prev}) -- list "
                              f"the buckets in increasing order of below (bucket i covers [previous below, below))")
        buckets.append(PromptBucket(prev or 0, below, limit))
    return PromptBudget(key, key.split("_")[1], tuple(buckets), where(()))


def _top(value: Any, i: int, count: int, prev: int | None, limit: float, at) -> PromptBucket:
    if i != count - 1:
        raise ConfigError(f"{at('at_least')}: the open top bucket (at_least) must be the last one")
    if i == 0 or prev is None:
        raise ConfigError(f"{at('at_least')}: an open top bucket needs a bucket with below before it -- for one "
                          f"budget over every length use the ordinary ttft budget (e.g. ttft_p95: 500ms)")
    if isinstance(value, bool) or not isinstance(value, int) or value != prev:
        raise ConfigError(f"{at('at_least')}: expected the last below ({prev}), got {value!r} -- the buckets are "
                          f"contiguous: the open top bucket covers [{prev}, inf)")
    return PromptBucket(prev, None, limit)


def under(where: Callable[[tuple], str], path: tuple) -> Callable[[tuple], str]:
    """``where`` for the key paths below ``path`` (``parse_prompt_budget``'s ``where``)."""
    return lambda p: where(path + p)


def request_prompt_tokens(x: Any) -> int | None:
    """A request's prompt length: the server's count, else the planned one (a ``RequestRecord``);
    a failure's (``Failure.prompt_tokens``: its partial record's).  None: unknown."""
    n = getattr(x, "prompt_tokens", None)
    return n if n is not None else getattr(x, "expected_prompt_tokens", None)


@dataclass
class Bucketed:
    """One budget's requests split into buckets: TTFT values (misses +inf) per bucket, in arrival
    order, and the requests in none."""
    values: dict[PromptBucket, list[float]]
    overflow: list[int]          # 1-based numbers (in ``rows``) of the requests above the top bucket
    unknown: int                 # failures with no known prompt length (in no bucket)
    longest: int | None          # the longest prompt among the overflow


def split(budget: PromptBudget, rows: Sequence[tuple[int | None, float]]) -> Bucketed:
    """``rows``: (prompt length or None, TTFT ms or +inf) per request, in arrival order."""
    out = Bucketed({b: [] for b in budget.buckets}, [], 0, None)
    for k, (length, ttft) in enumerate(rows, 1):
        if length is None:
            out.unknown += 1
            continue
        b = budget.bucket_of(length)
        if b is None:
            out.overflow.append(k)
            out.longest = max(out.longest or 0, length)
        else:
            out.values[b].append(ttft)
    return out
