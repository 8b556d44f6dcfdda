"""What one decode step reads of the KV cache and recurrent state, layer kind by layer kind (full,
sliding, chunked, latent, state: the table in docs/roofline.md#bytes-per-step-layer-by-layer-tensor-by-tensor).

``KVLayout`` is the sum over its ``LayerKV`` groups; ``KVLayout.full(bytes_per_token)`` is the
plain case (every layer full attention), so ``bytes_at(c) == bytes_per_token × c``.  A chunked
layer's reads are exact per step; a request's mean context (``core.roofline.ceiling.mean_context``)
approximates its decode, as for every kind not linear in ``c``.

Pure: no I/O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError

#: the attention (or state) kinds a layer can have
KINDS = ("full", "sliding", "chunked", "latent", "state")
_LABEL = {"full": "full", "sliding": "windowed", "chunked": "chunked", "latent": "latent (MLA)",
          "state": "linear-attention"}


def format_bytes(b: float) -> str:
    """Readable decimal size: ``16.06 GB``, ``12.6 MB``, ``4.1 KB``, ``512 B`` (the one definition;
    ``core.roofline.modelbytes`` re-exports it)."""
    for unit, scale, fmt in (("GB", 1e9, ".2f"), ("MB", 1e6, ".1f"), ("KB", 1e3, ".1f")):
        if abs(b) >= scale:
            return f"{b / scale:{fmt}} {unit}"
    return f"{b:.0f} B"


def _tokens(n: float) -> str:
    """``32 768`` (thin-space-free, readable thousands)."""
    return f"{n:,.0f}".replace(",", " ")


def _positive_int(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 1 or int(v) != v:
        raise ConfigError(f"{what} must be a positive integer, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class LayerKV:
    """``layers`` layers of one kind.  ``bytes_per_token``: per layer, what one cached token costs
    (K and V; a latent layer its one compressed vector).  ``window``: a sliding layer's window or a
    chunked layer's chunk, in tokens.  ``sinks``: tokens a sliding layer always keeps (StreamingLLM
    sink tokens; gpt-oss's learned sinks are per-head logits and cache nothing).  ``state_bytes``:
    per layer, a linear-attention / SSM layer's recurrent state (read and written every step)."""

    kind: str
    layers: int
    bytes_per_token: float = 0.0
    window: int | None = None
    sinks: int = 0
    state_bytes: float = 0.0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ConfigError(f"KV layout: unknown layer kind {self.kind!r}; one of {', '.join(KINDS)}")
        _positive_int(self.layers, f"KV layout: {self.kind} layers")
        if self.kind in ("sliding", "chunked"):
            _positive_int(self.window, f"KV layout: the {self.kind} layers' "
                                       f"{'window' if self.kind == 'sliding' else 'chunk size'}")
        if self.kind == "state":
            if not (self.state_bytes > 0 and math.isfinite(self.state_bytes)):
                raise ConfigError(f"KV layout: a state layer needs its state bytes > 0, got {self.state_bytes!r}")
        elif not (self.bytes_per_token > 0 and math.isfinite(self.bytes_per_token)):
            raise ConfigError(f"KV layout: {self.kind} layers need their bytes per token > 0, "
                              f"got {self.bytes_per_token!r}")

    def tokens_read(self, context: float) -> float:
        """Cached tokens one layer of this kind reads at ``context`` (0 for a state layer)."""
        if self.kind in ("full", "latent"):
            return context
        if self.kind == "sliding":
            assert self.window is not None
            return min(context, float(self.window)) + (self.sinks if context > self.window else 0)
        if self.kind == "chunked":
            assert self.window is not None
            return context % self.window
        return 0.0

    def bytes_at(self, context: float) -> float:
        """Bytes all these layers read in one step at ``context``."""
        if self.kind == "state":
            return 2.0 * self.layers * self.state_bytes
        return self.layers * self.bytes_per_token * self.tokens_read(context)

    def describe(self, context: float) -> str:
        """``12 full layers × 98.3 KB/token × 32 768``, ``36 windowed layers × 1 024 tokens × 4.1 KB``,
        ``36 linear-attention layers × 2.1 MB state (read + written)``."""
        label = _LABEL[self.kind]
        if self.kind == "state":
            return f"{self.layers} {label} layers × {format_bytes(self.state_bytes)} state (read + written)"
        per = f"{format_bytes(self.bytes_per_token)}/token"
        if self.kind in ("full", "latent"):
            return f"{self.layers} {label} layers × {per} × {_tokens(context)}"
        what = "window" if self.kind == "sliding" else "chunk"
        return (f"{self.layers} {label} layers × {per} × {_tokens(self.tokens_read(context))} "
                f"({what} {_tokens(self.window or 0)})")


@dataclass(frozen=True)
class KVLayout:
    """The whole model's KV cache and state, as groups of layers of one kind each."""

    groups: tuple[LayerKV, ...]
    source: str = ""

    def __post_init__(self):
        if not self.groups:
            raise ConfigError("KV layout: no layers")

    @classmethod
    def full(cls, bytes_per_token: float, *, layers: int = 1, source: str = "") -> "KVLayout":
        """Every layer full attention; ``bytes_per_token`` is the whole model's (all layers)."""
        return cls((LayerKV("full", layers, bytes_per_token / layers),), source=source)

    @property
    def layers(self) -> int:
        return sum(g.layers for g in self.groups)

    @property
    def uniform_full(self) -> bool:
        """Every layer full attention (the one-formula case, ``2 × layers × kv_heads × head_dim × bytes``)."""
        return all(g.kind == "full" for g in self.groups)

    @property
    def growth_per_token(self) -> float:
        """Bytes per step that each further context token adds, far past every window: the full and
        latent layers' bytes per token (what a plain ``kv_bytes_per_token`` figure means)."""
        return sum(g.layers * g.bytes_per_token for g in self.groups if g.kind in ("full", "latent"))

    def bytes_at(self, context: float) -> float:
        """KV (and state) bytes one sequence's decode step reads at ``context``."""
        if not (isinstance(context, (int, float)) and math.isfinite(context) and context >= 0):
            raise ConfigError(f"KV layout: context must be a number of tokens >= 0, got {context!r}")
        return sum(g.bytes_at(context) for g in self.groups)

    def describe(self, context: float) -> str:
        """``KV: 12 full layers × 98.3 KB/token × 32 768 + 36 windowed layers × … ; state 36 × 2.1 MB``."""
        kv = [g.describe(context) for g in self.groups if g.kind != "state"]
        state = [g.describe(context) for g in self.groups if g.kind == "state"]
        return "; ".join(f"{label}: {' + '.join(xs)}" for label, xs in (("KV", kv), ("state", state)) if xs)


def kv_layout_from_groups(groups: list[LayerKV], source: str = "") -> KVLayout:
    """Merge groups of one kind and shape (``layer_types`` lists give one group per layer)."""
    merged: dict[tuple, int] = {}
    for g in groups:
        key = (g.kind, g.bytes_per_token, g.window, g.sinks, g.state_bytes)
        merged[key] = merged.get(key, 0) + g.layers
    return KVLayout(tuple(LayerKV(kind, n, bpt, window, sinks, state)
                          for (kind, bpt, window, sinks, state), n in merged.items()), source=source)
