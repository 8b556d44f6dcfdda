"""A run's decode on run totals, and a TPOT (or E2E) regression explained by them: TPOT (run totals) =
Σ decode time ÷ Σ decode tokens = step time ÷ tokens per step (``core.measure.spec_decode``), so a
change splits exactly into the engine's step time and the tokens each step emitted; a TPOT
*percentile* does not, so the explanation says it used run totals
(docs/roofline.md#regressions-explained).

``DecodeTotals`` is what a baseline stores (``files.baseline``, key ``decode_totals``); its field
names are the result parts' (``spec_decode``, ``roofline``).  Pure.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Sequence

from . import spec_decode

#: a ratio within this of 1 reads "unchanged" (named so the sentence can be checked)
UNCHANGED = 0.05
#: roofline statuses whose efficiency is a measured fraction of the ceiling
_RAN = ("pass", "fail", "report")


@dataclass(frozen=True)
class DecodeTotals:
    decode_tokens: int                       # Σ (output tokens − 1)
    decode_ms: float                         # Σ (t_last − t_first)
    tokens_per_step: float | None = None     # core.measure.spec_decode; None: no source said the server speculates
    acceptance_rate: float | None = None
    step_ms: float | None = None             # decode_ms ÷ decode steps (speculating runs)
    step_efficiency: float | None = None     # roofline, per engine step on run totals (speculating runs)
    decode_efficiency: float | None = None   # per token on run totals: (decode tokens ÷ decode time) ÷ ceiling
    source: str | None = None                # core.measure.spec_decode.SOURCE_*

    @property
    def tpot_ms(self) -> float:
        return self.decode_ms / self.decode_tokens

    @property
    def speculates(self) -> bool:
        # totals_of keeps tokens per step only for a run that speculated (core.measure.spec_decode.speculating,
        # which needs the drafted tokens a baseline does not store): 1.0 with drafts is speculating
        return self.tokens_per_step is not None and self.step_ms is not None

    @property
    def ceiling_fraction(self) -> float | None:
        """The engine steps' fraction of the roofline ceiling: per step when speculating, else per token."""
        return self.step_efficiency if self.speculates else self.decode_efficiency

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "DecodeTotals | None":
        """None when ``data`` lacks the totals or they are not positive (nothing to divide by)."""
        names = {f.name for f in fields(cls)}
        got = {k: v for k, v in data.items() if k in names}
        tokens, ms = got.get("decode_tokens"), got.get("decode_ms")
        if not (_pos(tokens) and _pos(ms)):
            return None
        for k in ("tokens_per_step", "step_ms", "step_efficiency", "decode_efficiency", "acceptance_rate"):
            if k in got and not (_pos(got[k]) or (k == "acceptance_rate" and got[k] == 0)):
                got[k] = None  # a hand-edited or broken figure: nothing to divide by, not a crash
        if got.get("tokens_per_step") is not None and got["tokens_per_step"] < 1:
            got["tokens_per_step"] = None
        return cls(**got)


def _pos(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def totals_of(res) -> DecodeTotals | None:
    """A judged-or-not ``WorkloadResult``'s decode on run totals; None when it decoded nothing."""
    sd, roof = res.spec_decode, res.roofline
    tokens = spec_decode.decode_tokens(res.records)
    ms = spec_decode.decode_time_ms(res.records)
    if tokens <= 0 or ms <= 0:
        return None
    ran = roof.status in _RAN
    tps, rate, step, source = sd.tokens_per_step, sd.acceptance_rate, sd.step_ms, sd.source
    speculating = source is not None and step is not None and spec_decode.speculating(tps, sd.draft_tokens, sd.drafts)
    # per token on run totals, like the step efficiency (never TPOT p50 beside run-total step times)
    per_token = (tokens / ms * 1000.0) / roof.ceiling_tok_s if ran and roof.ceiling_tok_s else None
    return DecodeTotals(decode_tokens=tokens, decode_ms=ms,
                        tokens_per_step=tps if speculating else None,
                        acceptance_rate=rate if speculating else None,
                        step_ms=step if speculating else None,
                        step_efficiency=roof.step_efficiency if ran and speculating else None,
                        decode_efficiency=per_token, source=source)


def _pct(r: float) -> str:
    return f"{(r - 1) * 100:+.0f} %"


def _ceiling(b: float | None, c: float | None) -> str:
    if b is None or c is None:
        return ""
    if abs(c - b) < 0.005:
        return f"{c:.2f} of the ceiling"
    return f"{b:.2f} → {c:.2f} of the ceiling"


def _fingerprint(changes: Sequence[str] | None) -> str:
    if changes is None:
        return ""
    if not changes:
        return "; the fingerprint shows no change (same model, server and command)"
    shown = "; ".join(changes[:4]) + (f"; and {len(changes) - 4} more" if len(changes) > 4 else "")
    return f"; the fingerprint says what changed: {shown}"


def _steps(base: DecodeTotals, cand: DecodeTotals, what: str) -> str:
    """``what`` ("engine steps" / "step time"): the step time's change with the ceiling fractions."""
    assert base.step_ms is not None and cand.step_ms is not None
    ratio = cand.step_ms / base.step_ms
    ceiling = _ceiling(base.ceiling_fraction, cand.ceiling_fraction)
    if abs(ratio - 1) <= UNCHANGED:
        return f"{what} unchanged" + (f" ({ceiling})" if ceiling else f" ({base.step_ms:.3g} → {cand.step_ms:.3g} ms)")
    return f"{what} {_pct(ratio)}" + (f", {ceiling}" if ceiling else f" ({base.step_ms:.3g} → {cand.step_ms:.3g} ms)")


def _tokens_per_step(base: DecodeTotals, cand: DecodeTotals) -> str:
    b, c = base.tokens_per_step, cand.tokens_per_step
    assert b is not None and c is not None
    if abs(c / b - 1) <= UNCHANGED:
        return f"tokens per step unchanged ({c:.1f})"
    rates = ""
    if base.acceptance_rate is not None and cand.acceptance_rate is not None:
        rates = f" ({base.acceptance_rate:.0%} → {cand.acceptance_rate:.0%} of the drafted tokens accepted)"
    return f"tokens per step {b:.1f} → {c:.1f}: draft acceptance {'fell' if c < b else 'rose'}{rates}"


def explain(metric: str, base: DecodeTotals | None, cand: DecodeTotals | None,
            changes: Sequence[str] | None = None) -> str:
    """One sentence: the TPOT change on run totals split into engine step time and tokens per step.
    ``metric``: the regressed one (tpot, e2e: its decode part); ``changes``: the fingerprint's
    differences (``core.measure.compare.fingerprint_changes``; None: no fingerprint to compare)."""
    lead = "" if metric == "tpot" else f"{metric.upper()} regressed; its decode part: "
    if base is None:
        return (f"{lead}not split into engine step time and tokens per step: the baseline stores no decode "
                f"totals (saved by an older plugin version, or it decoded nothing); save it again to get the split"
                + _fingerprint(changes))
    if cand is None:
        return f"{lead}not split into engine step time and tokens per step: this run decoded no tokens"
    head = (f"{lead}TPOT {_pct(cand.tpot_ms / base.tpot_ms)} on run totals (Σ decode time ÷ Σ decode tokens, "
            f"{base.tpot_ms:.3g} → {cand.tpot_ms:.3g} ms; not a percentile): ")
    if base.speculates and cand.speculates:
        body = f"{_steps(base, cand, 'engine steps')}, {_tokens_per_step(base, cand)}"
    elif not base.speculates and not cand.speculates:
        per_b, per_c = (DecodeTotals(t.decode_tokens, t.decode_ms, step_ms=t.tpot_ms,
                                     decode_efficiency=t.decode_efficiency) for t in (base, cand))
        body = (f"{_steps(per_b, per_c, 'step time')} (neither run reports speculative decoding: one token per "
                f"engine step)")
    else:
        spec, which, other = (base, "the baseline", "this run") if base.speculates else (cand, "this run",
                                                                                          "the baseline")
        assert spec.tokens_per_step is not None
        body = (f"{which} emitted {spec.tokens_per_step:.1f} tokens per engine step ({spec.source}), {other} "
                f"reports no speculative decoding (switched off, or its counters not exported?), so the change "
                f"is not split into step time and tokens per step")
    return head + body + _fingerprint(changes)
