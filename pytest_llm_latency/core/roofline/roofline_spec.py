"""Speculative decoding / multi-token prediction in the decode roofline: the gate judged per engine step.

A step verifies ``k`` drafted tokens with one read of the target's weights (MoE: the experts the
batch × (k + 1) positions touch) and KV cache, reads the drafter's bytes per drafted token k times,
and emits ``tokens per step``; step efficiency = steps/s ÷ (bandwidth ÷ step bytes), on run totals
(``core.measure.spec_decode``).  ``k`` comes from the counters when they count drafted tokens, else
from ``roofline.draft.spec_tokens``.  See docs/roofline.md#bytes-per-step-and-the-step-efficiency.

Pure: no I/O; the drafter's model bytes are resolved by ``roofline.resolve.resolve_draft``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError
from .modelbytes import ModelBytes, format_bytes
from ..result.result_parts import SpecDecodeInfo
from ..measure.spec_decode import speculating

#: what a drafter is: ``none`` (n-gram / prompt lookup), a draft ``model``, or EAGLE / MTP ``heads``
DRAFT_KINDS = ("none", "model", "heads")
#: the caveat when the counters say the server speculates but ``roofline.draft`` is not set
LOWER_BOUND = ("the ceiling is too high, so the step efficiency is a lower bound (the server reads more per step "
               "than counted)")
DRAFT_NOT_COUNTED = f"drafter bytes not counted: {LOWER_BOUND}; set roofline.draft (none for n-gram / prompt lookup)"


def finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Drafter:
    """What the drafter reads per drafted token (``roofline.draft``)."""
    kind: str                          # DRAFT_KINDS
    model: ModelBytes | None = None    # kind "model"
    head_bytes: float = 0.0            # kind "heads": the heads' layers and the LM head, in bytes
    spec_tokens: float | None = None   # k, drafted tokens per step, as configured
    source: str = ""

    def __post_init__(self):
        if self.kind not in DRAFT_KINDS:
            raise ConfigError(f"roofline.draft: kind must be one of {', '.join(DRAFT_KINDS)}, got {self.kind!r}")
        if self.kind == "model" and self.model is None:
            raise ConfigError("roofline.draft: a draft model needs its bytes (model, params, config or gguf)")
        if self.kind == "heads" and (not finite(self.head_bytes) or self.head_bytes <= 0):
            raise ConfigError(f"roofline.draft.head_bytes: expected the bytes the heads read per drafted token "
                              f"(their layers and the LM head, e.g. 1.2e9), got {self.head_bytes!r}")

    def bytes_per_token(self, context: float, batch: int) -> tuple[float, str]:
        """(bytes read per drafted token for a batch of ``batch`` streams, what they are)."""
        if self.kind == "none":
            return 0.0, "n-gram / prompt lookup: reads no weights"
        if self.kind == "heads":
            return self.head_bytes, f"heads {format_bytes(self.head_bytes)} (layers + LM head)"
        mb = self.model
        assert mb is not None  # __post_init__
        weights = mb.weight_bytes_at_batch(batch)
        if not mb.kv_known or mb.kv_not_counted:
            return weights, f"draft model {format_bytes(weights)} weights (its KV cache not counted: shape unknown)"
        kv = batch * mb.kv_bytes_at(context)
        return weights + kv, (f"draft model {format_bytes(weights)} weights + "
                              f"{'%d × ' % batch if batch > 1 else ''}{format_bytes(kv / batch)} KV @ {context:g} ctx")


NGRAM = Drafter("none", source="roofline.draft: none")


@dataclass(frozen=True)
class StepFigures:
    """The run's engine steps against the per-step ceiling (module docstring)."""
    tokens_per_step: float
    source: str                        # the acceptance source (core.measure.spec_decode.SOURCE_*)
    tok_s: float                       # decode tokens ÷ decode time (run totals)
    steps_per_s: float
    drafted_per_step: float | None     # k
    k_source: str                      # where k came from ("" when unknown)
    target_weight_bytes: float
    draft_bytes: float | None          # k × bytes per drafted token; None: not counted
    draft: str                         # what the drafter's bytes are, or "not counted: why"
    step_bytes: float
    ceiling_steps_s: float
    step_efficiency: float

    @property
    def draft_counted(self) -> bool:
        return self.draft_bytes is not None

    def as_properties(self) -> dict:
        return {"tokens_per_step": self.tokens_per_step, "step_efficiency": self.step_efficiency,
                "steps_per_s": self.steps_per_s, "draft_bytes": self.draft_bytes, "draft": self.draft}


def speculates(spec: SpecDecodeInfo) -> bool:
    """The gate judges engine steps: tokens per step is known and the server drafted during the
    run (drafted tokens, or more than 1 token per step).  A server that exports the counters but
    drafted nothing (llama.cpp without ``--model-draft`` exports zeros) is judged per token."""
    return speculating(spec.tokens_per_step, spec.draft_tokens, spec.drafts)


def drafted_per_step(spec: SpecDecodeInfo, drafter: Drafter | None) -> tuple[float | None, str]:
    """k and where it came from: drafted ÷ steps from the counters when they count drafted tokens,
    else ``roofline.draft.spec_tokens``; (None, "") when neither gives it."""
    drafted, steps = spec.draft_tokens, spec.decode_steps
    if drafted is not None and steps is not None and finite(drafted) and finite(steps) and steps > 0:
        return drafted / steps, f"{spec.source}: drafted ÷ decode steps"
    if drafter is not None and drafter.spec_tokens is not None:
        return float(drafter.spec_tokens), "roofline.draft.spec_tokens"
    return None, ""


def step_figures(*, bandwidth_bytes_s: float, model: ModelBytes, kv_bytes: float, batch: int, context: float,
                 spec: SpecDecodeInfo, drafter: Drafter | None) -> StepFigures:
    """The step efficiency of a run whose ``spec`` (``res.spec_decode``) gives tokens per step.
    ``kv_bytes``: the target's KV read per step for the batch (``Ceiling.kv_bytes``)."""
    tps, decoded, decode_ms = spec.tokens_per_step, spec.decode_tokens, spec.decode_ms
    if tps is None or not finite(tps) or tps < 1:
        raise ConfigError(f"roofline: tokens per step must be a number >= 1 (1 + accepted), got {tps!r} "
                          f"from {spec.source}")
    if not isinstance(decoded, int) or decoded <= 0 or decode_ms is None or not finite(decode_ms) or decode_ms <= 0:
        raise ConfigError(f"roofline: the run's decode totals are empty ({decoded!r} decode tokens in "
                          f"{decode_ms!r} ms), so engine steps per second cannot be computed -- raise output_tokens")
    if not finite(bandwidth_bytes_s) or bandwidth_bytes_s <= 0:
        raise ConfigError(f"roofline: the bandwidth must be > 0 B/s, got {bandwidth_bytes_s!r}")
    k, k_source = drafted_per_step(spec, drafter)
    # without k at least the accepted positions were verified: fewer weights counted (MoE), said in draft
    positions = tps if k is None else 1.0 + k
    weights = model.weight_bytes_at_batch(batch * positions)  # type: ignore[arg-type]  # float batches: MoE share
    if drafter is None:
        draft_bytes, draft = None, "not counted: no roofline.draft (none for n-gram / prompt lookup)"
    elif drafter.kind == "none":
        draft_bytes, draft = 0.0, "none (n-gram / prompt lookup reads no weights)"
    elif k is None:
        draft_bytes, draft = None, (f"not counted: {spec.source} gives no drafted tokens per step; set "
                                    "roofline.draft.spec_tokens")
    else:
        per_token, what = drafter.bytes_per_token(context, batch)
        draft_bytes, draft = k * per_token, f"{k:.3g} drafted tokens per step × {what} ({drafter.source})"
    step = weights + kv_bytes + (draft_bytes or 0.0)
    tok_s = decoded / (decode_ms / 1000.0)
    steps_s = tok_s / tps
    ceiling = bandwidth_bytes_s / step
    return StepFigures(tokens_per_step=tps, source=str(spec.source), tok_s=tok_s, steps_per_s=steps_s,
                       drafted_per_step=k, k_source=k_source, target_weight_bytes=weights, draft_bytes=draft_bytes,
                       draft=draft, step_bytes=step, ceiling_steps_s=ceiling, step_efficiency=steps_s / ceiling)


# ---------------------------------------------------------------------------- wording

def headline(s: StepFigures) -> str:
    """``decode 240.0 tok/s = 3.0 tokens per step × 80.0 steps/s; steps at 0.80 of the ceiling ...``"""
    return (f"decode {s.tok_s:.1f} tok/s = {s.tokens_per_step:.2f} tokens per step × {s.steps_per_s:.1f} steps/s; "
            f"steps at {s.step_efficiency:.2f} of the ceiling {s.ceiling_steps_s:.1f} steps/s "
            f"(run totals; tokens per step from {s.source})")


def drafter_arithmetic(s: StepFigures) -> str:
    """The drafter's share of the step's bytes, inside the arithmetic's parentheses."""
    if s.draft_bytes is None:
        return ", drafter not counted"
    if s.draft_bytes == 0:
        return " + drafter 0 B (n-gram)"
    return f" + {format_bytes(s.draft_bytes)} drafter"


def detail_lines(s: StepFigures, per_token_tok_s: float, per_token_eff: float, ceiling_tok_s: float) -> list[str]:
    """What the step figures rest on, under the headline."""
    k = (f"  drafted tokens per step: {s.drafted_per_step:.2f} ({s.k_source})" if s.drafted_per_step is not None
         else "  drafted tokens per step: unknown (the counters give none and roofline.draft.spec_tokens is not set)")
    lower = f"; {LOWER_BOUND}" if s.draft_bytes is None else ""
    return [k, f"  drafter: {s.draft}{lower}",
            f"  per token: TPOT p50 → {per_token_tok_s:.1f} tok/s = {per_token_eff:.2f} of the single-token ceiling "
            f"{ceiling_tok_s:.1f} tok/s (not judged: each engine step emits {s.tokens_per_step:.2f} tokens)"]
