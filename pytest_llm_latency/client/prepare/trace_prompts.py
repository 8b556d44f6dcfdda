"""The prompts of a trace replay, all ready before the first send (issue 27, "bounded preparation";
measured in docs/benchmarks.md, trace preparation).

Each prompt is its blocks' text (``core.prompts.block_text``): block texts whose token counts add up, so
a prompt's length is known from its blocks.  Counter calls <= set-up (``make_counter``) +
``CALIBRATION_CALLS`` + 2 x opening prompts, and == set-up + ``CALIBRATION_CALLS`` + opening prompts
when the tokenizer is additive (every tokenizer recorded): one verify call per opening prompt (a
session's later turn is its blocks' sum), plus at most one re-plan per prompt whose verify disagrees
with the plan (its last block re-cut by the difference, verified once more); a prompt still off keeps
the closer count as its ``counted_tokens`` (the deviation the run reports).

Without a tokenize endpoint (``make_counter``'s linear estimate) the palette is calibrated on
``CALIBRATION_CALLS`` unmeasured one-token requests (each text opened by its own nonce-drawn words:
none is served from a cache) and nothing is verified before sending: each request's usage check
reports a deviation.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Callable, Sequence, cast

from ...core.prompts.block_text import BlockSpec, Palette, calibrate, prompt_text, row_blocks
from ...core.prompts.synthesis import Prompt
from .tokens import _probe, make_counter
from ..transport.clock import MEASUREMENT_CLOCK

if TYPE_CHECKING:
    from ...core.spec.workload import Workload

_NO_PARTS = SimpleNamespace(system_prompt_tokens=0, shared_prefix_tokens=0)  # make_counter's probe: no system part


@dataclass(frozen=True)
class PrepStats:
    """What preparing a trace's prompts cost."""
    tokenize_calls: int     # counter calls made here: calibration (with an endpoint) + verifies (not the set-up's)
    calibration_calls: int  # calibration's calls: counter calls, or probe requests without an endpoint
    verify_calls: int       # one per opening prompt, plus one per re-plan (0 without an endpoint)
    replans: int            # prompts whose verify disagreed with the plan and were re-cut once
    seconds: float          # wall time of the whole preparation, set-up included (the injected clock)
    deviations: int = 0     # prompts whose count (or plan, unverified) is not their input_length
    description: str = ""   # how the prompts were counted, for the result's measurement


def prepare_block_prompts(client_or_counter, specs: Sequence[BlockSpec], *, nonce: str, seed: int,
                          block_tokens: int, counter: Callable[[str], int] | None = None,
                          clock: Callable[[], int] = MEASUREMENT_CLOCK) -> tuple[list[Prompt], PrepStats]:
    """One ``Prompt`` per spec, in order: ``user`` = its blocks' text (``system`` empty),
    ``expected_tokens`` = ``input_length``, ``counted_tokens`` = the verify call's count (the plan's,
    unverified, for a later turn or without an endpoint), ``output_tokens`` = ``output_length``,
    ``key`` = the spec's key (its index when None).  ``client_or_counter``: a client (its counter is
    ``make_counter``'s, unless ``counter`` is given) or a plain counter ``text -> tokens``."""
    t0 = clock()
    client = client_or_counter if hasattr(client_or_counter, "stream") else None
    how = "counter given"
    if counter is None and client is None:
        counter = client_or_counter
    elif counter is None:
        counter, how = make_counter(client, cast("Workload", _NO_PARTS), seed, nonce)
    assert counter is not None
    estimate = getattr(counter, "per_char", None) is not None
    if estimate and client is None:
        raise ValueError("prepare_block_prompts: a linear estimate (no tokenize endpoint) needs the client, "
                         "to calibrate on probe requests")
    calls = probes = 0

    def counted(text: str) -> int:
        nonlocal calls
        calls += 1
        return int(counter(text))

    def probed(text: str) -> int:
        nonlocal probes
        probes += 1
        return _probe(client, "", text)
    palette = calibrate(probed if estimate else counted, nonce=nonce)
    calibration = probes if estimate else calls
    prompts, verifies, replans, deviations, first_off = _build(palette, specs, nonce, block_tokens,
                                                               None if estimate else counted)
    if estimate:
        how = (f"{how}; no tokenize endpoint: pieces calibrated on {calibration} unmeasured one-token requests "
               f"({palette.describe()}), prompts not verified before sending -- each request's usage check "
               f"reports a deviation")
    else:
        how = (f"{how}; {palette.describe()}; {verifies} verify call(s) for {len(specs)} prompt(s), "
               f"{replans} re-plan(s)")
    if deviations:
        how += f"; {deviations} prompt(s) not exact ({first_off})"
    stats = PrepStats(tokenize_calls=calls, calibration_calls=calibration, verify_calls=verifies, replans=replans,
                      seconds=(clock() - t0) / 1e9, deviations=deviations, description=how)
    return prompts, stats


def _build(palette: Palette, specs: Sequence[BlockSpec], nonce: str, block_tokens: int,
           verify: Callable[[str], int] | None) -> tuple[list[Prompt], int, int, int, str]:
    cache: dict = {}
    prompts: list[Prompt] = []
    verifies = replans = deviations = 0
    first_off = ""
    for i, spec in enumerate(specs):
        key = i if spec.key is None else spec.key
        blocks = row_blocks(spec.hash_ids, spec.input_length, block_tokens, key)
        text, planned = prompt_text(palette, nonce, blocks, opens_prompt=spec.opens_prompt, cache=cache)
        got = planned
        if verify is not None and spec.opens_prompt:
            got = verify(text)
            verifies += 1
            if got != planned and blocks:  # not additive here: re-cut the last block, once
                last_id, last_n = blocks[-1]
                again = list(blocks[:-1]) + [(last_id, last_n - (got - spec.input_length))]
                text2, _ = prompt_text(palette, nonce, again, opens_prompt=True, cache=cache)
                got2 = verify(text2)
                verifies += 1
                replans += 1
                if abs(got2 - spec.input_length) < abs(got - spec.input_length):
                    text, got = text2, got2
        if got != spec.input_length:
            deviations += 1
            if not first_off:
                unverified = "planned" if verify is None or not spec.opens_prompt else "counted"
                first_off = f"row {key!r}: {unverified} {got} tokens for input_length {spec.input_length}"
        prompts.append(Prompt(system="", user=text, expected_tokens=spec.input_length, counted_tokens=got,
                              output_tokens=spec.output_length, key=key))
    return prompts, verifies, replans, deviations, first_off
