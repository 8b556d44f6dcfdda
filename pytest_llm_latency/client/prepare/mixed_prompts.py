"""The prompts of a mixed workload (``core.spec.mix_spec``): each request's class from the mix's
seeded sequence, its lengths drawn from its class, its prompt fitted as the server counts it and
tagged with the class (``Prompt.mix_class``: every sender carries it onto the request's record)."""
from __future__ import annotations

from dataclasses import replace

from ...core.prompts.synthesis import Prompt, build_prompts
from ...core.spec.lengths import draw_lengths
from ...core.spec.mix_spec import Mix, class_sequence


def mixed_prompts(counter, mix: Mix, *, n: int, warmup: int, cold: int, seed: int, nonce: str,
                  context: int | None) -> list[Prompt]:
    """``n`` prompts in send order: ``warmup`` warm-up prompts (classes of their own short sequence),
    the samples (the mix's window of its class sequence) and ``cold`` cold-start prompts last (the
    heaviest class).  ``context``: the model's context where known (lengths clipped to it)."""
    middle = n - warmup - cold
    heaviest = max(mix.classes, key=lambda c: c.weight).name
    names = class_sequence(mix, warmup, seed + 1, start=0, cycle=max(warmup, 1)) + \
        class_sequence(mix, middle, seed) + [heaviest] * cold
    out: list[Prompt | None] = [None] * n
    for c in mix.classes:
        idx = [i for i, name in enumerate(names) if name == c.name]
        if not idx:
            continue
        floor = 1 + c.system_prompt_tokens
        outputs = draw_lengths(c.output_tokens, len(idx), seed=seed, key=f"output_tokens|{c.name}",
                               clip_to=context - floor if context else None)
        lengths = draw_lengths(c.prompt_tokens, len(idx), seed=seed, key=f"prompt_tokens|{c.name}", floor=floor)
        if context:  # prompt + its own output within the context
            lengths = [max(floor, min(p, context - o)) for p, o in zip(lengths, outputs)]
        made = build_prompts(counter, n=len(idx), prompt_tokens=c.nominal_prompt, seed=seed,
                             nonce=f"{nonce}|mix|{c.name}", system_prompt_tokens=c.system_prompt_tokens,
                             lengths=lengths, output_lengths=outputs)
        for i, p in zip(idx, made):
            out[i] = replace(p, mix_class=c.name)
    assert all(p is not None for p in out)
    return [p for p in out if p is not None]
