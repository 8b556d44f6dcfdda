"""Block texts whose token counts add up: the prompts of a trace replay (issue 27).  A prompt is built
from per-block texts of **pieces** (a space and a common word of 1-4 letters, ``PALETTE``), whose costs
``calibrate`` measures on the server's own counter; the rules (opening prompt and head, lengths, fill
and ``GLUE``, identity of a block's text): docs/concepts.md#trace-prompts-block-texts-whose-counts-add-up.

Pure: no I/O, no clock.
"""
from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Sequence, Union

from ..errors import MeasurementError
from .synthesis import TokenCounter

#: the pieces: lower-case words one token long in common BPE / SentencePiece vocabularies,
#: by length in letters (a family: its pieces cost alike on every tokenizer above)
PALETTE: tuple[tuple[str, ...], ...] = (
    ("a",),
    ("of", "to", "in", "is", "it", "on", "as", "be", "at", "by", "or", "an", "we", "he", "if", "so",
     "up", "no", "do", "my"),
    ("the", "and", "for", "was", "are", "not", "but", "you", "all", "can", "had", "her", "one", "our",
     "out", "has", "his", "new", "two", "may"),
    ("that", "with", "from", "this", "have", "they", "will", "been", "more", "when", "were", "what",
     "some", "than", "then", "into", "time", "only", "over", "also"),
)
GLUE = "q"  # the glue letter (appended without a space)
CALIBRATION_CALLS = 12  # counter calls of one calibrate(), whatever the tokenizer
_FILL_MAX = 64  # longest rest a fill makes up (a stream is cut back at most this far)
_ANCHOR = (2, 1, 3, 0, 2, 1, 3, 2, 1, 3, 0, 1, 2, 3, 2, 1)   # family of each anchor piece
_ANCHOR2 = (3, 2, 1, 0, 3, 1, 2, 3, 2, 1)                  # another first family: the head check


@dataclass(frozen=True)
class RowTail:
    """The block id of a row's tail beyond its named ``hash_ids``: text of its own."""
    key: int | str


BlockId = Union[int, str, RowTail]


@dataclass(frozen=True)
class BlockSpec:
    """One prompt of a trace replay, as plain data: ``hash_ids`` name its blocks (block i has
    ``block_tokens`` tokens, the last partial; fewer ids than blocks: the rest is the row's own
    ``RowTail``), ``input_length`` its exact length as the server counts it, ``output_length``
    its forced output.  ``opens_prompt`` False: a session's later turn, whose text is appended
    to a history (no head, not verified alone: its count is the sum of its blocks).  ``key``
    names the row (None: its index in the list)."""
    hash_ids: tuple[int | str, ...]
    input_length: int
    output_length: int
    opens_prompt: bool = True
    key: int | str | None = None


@dataclass(frozen=True)
class Palette:
    """What ``calibrate`` measured on one server's counter."""
    costs: tuple[int, ...]  # tokens of one " word" piece of each PALETTE family
    head: int               # count(opening text) - its pieces' costs (BOS, template, dropped space)
    glue: int               # tokens of GLUE after a piece (1), or 0: not usable on this tokenizer
    calls: int = CALIBRATION_CALLS

    def describe(self) -> str:
        glue = f"glue letter {self.glue} token" if self.glue else "no glue letter"
        return (f"additive pieces of {'/'.join(map(str, self.costs))} tokens (1-4 letters), head {self.head:+d}, "
                f"{glue}; calibrated with {self.calls} counter calls")


class UnreachableLength(ValueError):
    """No text of pieces (and glue) has exactly this many tokens on the calibrated tokenizer."""


def _fail(what: str) -> MeasurementError:
    return MeasurementError("tokenize", (
        f"the server's tokenizer is not additive on space-led word pieces: {what}. Trace prompts are built from "
        f"blocks whose token counts must add up (word-, byte- or character-level tokenizers, and BPE/SentencePiece "
        f"with common words as single tokens, all qualify); replay this trace against a server with such a "
        f"tokenizer, or use prompt_tokens distributions instead of trace"))


def calibrate(count: TokenCounter, *, nonce: str = "") -> Palette:
    """Measure piece costs, additivity, the head and the glue with exactly ``CALIBRATION_CALLS``
    calls of ``count`` (each text opened by its own anchor of nonce-drawn words, so a server
    counting by probe requests never answers one from a cache):

    1. an anchor (16 pieces of a fixed family layout, first space dropped);
    2. anchor + every word of family k once (4 calls): the family's cost per piece, which must
       be a whole number >= 1 (words of one family cost alike) -- pieces after a block add
       exactly their cost;
    3. anchor + the family's words repeated 1, 2, 3, 4 times in turn (4 calls): a second
       multiple, which must agree;
    4. another anchor opening with another family: the head must be the same;
    5. anchor + GLUE, anchor + GLUE + family 1 + GLUE: the glue's cost after a piece and
       before the next; usable only if 1 both times (else ``glue`` 0, never an error).
    """
    calls = 0

    def counted(text: str) -> int:
        nonlocal calls
        calls += 1
        return int(count(text))

    def anchor(i: int, layout: Sequence[int] = _ANCHOR) -> str:
        rng = random.Random(f"calibrate|{nonce}|{i}")
        return "".join(" " + rng.choice(PALETTE[f]) for f in layout)[1:]

    a0 = anchor(0)
    n0 = counted(a0)
    costs = []
    for k, family in enumerate(PALETTE):
        got = counted(anchor(1 + k) + "".join(" " + w for w in family)) - n0
        if got % len(family) or got < len(family):
            raise _fail(f"the {len(family)} words of {k + 1} letter(s) ({' '.join(family[:4])} ...) after a block "
                        f"add {got} tokens, not the same whole number (>= 1) for each")
        costs.append(got // len(family))
    for k, family in enumerate(PALETTE):
        words = [w for j, w in enumerate(family) for _ in range(1 + j % 4)]
        got = counted(anchor(5 + k) + "".join(" " + w for w in words)) - n0
        if got != costs[k] * len(words):
            raise _fail(f"{len(words)} words of {k + 1} letter(s) add {got} tokens, but {len(family)} of them added "
                        f"{costs[k] * len(family)} ({costs[k]} each): two multiples disagree")
    head = n0 - sum(costs[f] for f in _ANCHOR)
    a2 = anchor(9, _ANCHOR2)
    got = counted(a2) - sum(costs[f] for f in _ANCHOR2)
    if got != head:
        raise _fail(f"a prompt opening with a {_ANCHOR2[0] + 1}-letter word adds {got} tokens around its pieces, "
                    f"one opening with a {_ANCHOR[0] + 1}-letter word {head}: the head depends on the first word")
    glue = counted(anchor(10) + GLUE) - n0
    family = PALETTE[1]
    both = counted(anchor(11) + GLUE + "".join(" " + w for w in family) + GLUE) - n0
    usable = glue == 1 and both == 2 + costs[1] * len(family)
    return Palette(costs=tuple(costs), head=head, glue=1 if usable else 0, calls=calls)


@lru_cache(maxsize=64)
def _fills(costs: tuple[int, ...], glue: int) -> tuple[tuple[tuple[int, ...], int] | None, ...]:
    """For each rest r <= _FILL_MAX: the fewest pieces (families) plus glue letters costing exactly r
    (glue only where pieces alone cannot), or None."""
    best: list[tuple[int, int, tuple[int, ...], int] | None] = [(0, 0, (), 0)] + [None] * _FILL_MAX
    for r in range(1, _FILL_MAX + 1):
        options = []
        for f, c in enumerate(costs):
            prev = best[r - c] if c <= r else None
            if prev is not None:
                options.append((prev[0], prev[1] + 1, tuple(sorted(prev[2] + (f,))), prev[3]))
        if glue and (prev := best[r - 1]) is not None:
            options.append((prev[0] + 1, prev[1], prev[2], prev[3] + 1))
        best[r] = min(options) if options else None
    return tuple(None if b is None else (b[2], b[3]) for b in best)


@lru_cache(maxsize=8)
def _flat() -> tuple[tuple[str, ...], tuple[int, ...]]:
    words = tuple(" " + w for fam in PALETTE for w in fam)
    fams = tuple(f for f, fam in enumerate(PALETTE) for _ in fam)
    return words, fams


def _seed(nonce: str, block_id: BlockId) -> str:
    if isinstance(block_id, RowTail):
        return f"row|{nonce}|{block_id.key}"
    # the id's type is part of it: 7 and "7" are different ids (core.spec.trace), so different texts
    return f"block|{nonce}|{type(block_id).__name__}:{block_id}"


def _plan(palette: Palette, nonce: str, block_id: BlockId, length: int, first: bool) -> str | None:
    if length <= 0:
        return "" if length == 0 and not first else None
    words, fams = _flat()
    costs = palette.costs
    rng = random.Random(_seed(nonce, block_id))
    idx = rng.choices(range(len(words)), k=length // min(costs) + 1)
    cum = list(accumulate(costs[fams[i]] for i in idx))
    fills = _fills(costs, palette.glue)
    top = bisect_right(cum, length)
    for glue_ok in (False, True):  # cut the stream back rather than glue, where the fill allows
        for m in range(top, -1, -1):
            rest = length - (cum[m - 1] if m else 0)
            if rest > _FILL_MAX:
                break
            fill = fills[rest]
            if fill is None or (fill[1] and not glue_ok) or (first and m == 0 and not fill[0]):
                continue
            frng = random.Random(f"fill|{_seed(nonce, block_id)}|{length}")
            text = ("".join(words[i] for i in idx[:m]) + "".join(" " + frng.choice(PALETTE[f]) for f in fill[0])
                    + GLUE * fill[1])
            return text[1:] if first else text
    return None


def _nearest(palette: Palette, nonce: str, block_id: BlockId, length: int, first: bool) -> tuple[str, int]:
    for d in range(0, 2 * _FILL_MAX):
        for n in ((length + d, length - d) if d else (length,)):
            text = _plan(palette, nonce, block_id, n, first)
            if text is not None:
                return text, n
    raise UnreachableLength(f"no text of pieces within {2 * _FILL_MAX} tokens of {length} ({palette.describe()})")


def row_blocks(hash_ids: Sequence[int | str], input_length: int, block_tokens: int, key: int | str
               ) -> list[tuple[BlockId, int]]:
    """A row's blocks as (id, tokens): ``hash_ids[i]`` for block i of ``block_tokens`` tokens (the last
    partial); blocks beyond the named ids become one ``RowTail(key)`` block.  More ids than blocks is
    a ValueError (the trace parser reports it as bad input, with the file and line)."""
    n = -(-input_length // block_tokens) if input_length > 0 else 0
    if len(hash_ids) > n:
        raise ValueError(f"row {key!r}: {len(hash_ids)} hash_ids but input_length {input_length} makes {n} block(s) "
                         f"of {block_tokens} tokens")
    sizes = [min(block_tokens, input_length - i * block_tokens) for i in range(n)]
    out: list[tuple[BlockId, int]] = list(zip(hash_ids, sizes))
    if len(hash_ids) < n:
        out.append((RowTail(key), sum(sizes[len(hash_ids):])))
    return out


def head_from_the_end(lengths: list[int], head: int) -> list[int]:
    """The blocks' text lengths once the server's ``head`` (BOS, the chat template's tokens) is taken
    off an opening prompt: from its **last** blocks, not its first.  A chat template puts part of
    its tokens after the text (``<|eot_id|>``, the assistant header), so a first block cut by the
    whole head would leave rows that share it a few tokens short of a full block in common (one
    16-token cache block fewer); cut at the end, every shared leading block is whole.  The first
    block keeps at least one token; what it cannot give stays on it (an unreachable length,
    reported by the plan)."""
    out, left = list(lengths), head
    for i in range(len(out) - 1, -1, -1):
        take = min(left, max(out[i] - (1 if i == 0 else 0), 0))
        out[i] -= take
        left -= take
        if not left:
            break
    if left and out:
        out[0] -= left
    return out


def prompt_text(palette: Palette, nonce: str, blocks: Sequence[tuple[BlockId, int]], *, opens_prompt: bool,
                cache: dict | None = None) -> tuple[str, int]:
    """The text of ``blocks`` ((id, tokens) pairs, block lengths as the server counts them: with
    ``opens_prompt`` the head is taken off the last blocks, ``head_from_the_end``) and its planned
    server count (``palette.head`` included when ``opens_prompt``).  The planned count differs from
    the blocks' sum only where a length is unreachable (no text of pieces has it): the nearest is used, never
    silently.  ``cache`` (a dict kept by the
    caller) reuses block texts across prompts."""
    parts: list[str] = []
    cache = {} if cache is None else cache
    planned = palette.head if opens_prompt and blocks else 0
    wants = head_from_the_end([t for _, t in blocks], palette.head if opens_prompt else 0)
    for i, ((block_id, _), want) in enumerate(zip(blocks, wants)):
        first = opens_prompt and i == 0
        if want <= 0 and not first:
            continue  # the head took this (short, last) block whole
        k = (block_id, want, first)
        hit = cache.get(k)
        if hit is None:
            hit = cache[k] = _nearest(palette, nonce, block_id, want, first)
        parts.append(hit[0])
        planned += hit[1]
    return "".join(parts), planned
