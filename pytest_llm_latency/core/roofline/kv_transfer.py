"""The KV-transfer floor of a disaggregated deployment, beside the decode and prefill rooflines.

A prefill pool computes a prompt's KV cache and ships it to the decode pool over an interconnect;
the transfer can take no less than the bytes of that cache divided by the link's bandwidth:

    floor = KV bytes of the prompt ÷ link bandwidth
    KV bytes of the prompt = Σ over layer groups of what the cache holds after ``prompt_tokens``
                             (full / latent layers: bytes per token × prompt tokens; a sliding layer
                             its window (+ sinks); a chunked layer its last chunk; a linear-attention
                             layer its state, once)

The per-layer bytes come from the roofline's model bytes (``core.roofline.modelbytes.ModelBytes``:
its ``kv_layout`` where known, else ``kv_bytes_per_token`` for every layer full attention).  The
link is one direction's line rate (``roofline/hardware.yaml`` ``links:``), so the floor is a lower
bound: a transfer's protocol, descriptors and contention only add to it.  Pure: no I/O.

A run's floor (``run_floor``) is each request's own prompt's floor, so like is compared with like: the
mean transfer with the mean of the requests' floors (``link_share``: the share of the link, one function),
a percentile or the max of the transfers with the same statistic of the floors (every transfer at least its
own floor, each order statistic of the transfers is at least the floors' one) -- never one prompt's floor
against another statistic, which a mix of 512- and 16,000-token prompts makes meaningless.

Llama-3.1-8B at fp16: 2 × 32 layers × 8 KV heads × 128 × 2 B = 131 072 B per token; 16 000
prompt tokens = 2.10 GB; over a 25 GB/s link (InfiniBand HDR) the floor is 83.9 ms.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError
from ..measure.stats import summarize
from .kv_layout import format_bytes


@dataclass(frozen=True)
class Link:
    """An interconnect: one direction's bandwidth in GB/s (1e9 bytes/s)."""

    key: str                  # catalog key ("ib-ndr"), or "custom"
    name: str                 # display name ("InfiniBand NDR 400G", "25 GB/s link")
    gb_s: float
    source: str = ""          # where the figure comes from
    aliases: tuple[str, ...] = ()

    def __post_init__(self):
        if isinstance(self.gb_s, bool) or not isinstance(self.gb_s, (int, float)) \
                or not (math.isfinite(self.gb_s) and self.gb_s > 0):
            raise ConfigError(f"link {self.name!r}: its bandwidth must be a positive number of GB/s, "
                              f"got {self.gb_s!r}")

    def describe(self) -> str:
        """``InfiniBand HDR 200G (25 GB/s)``; a custom link ``25 GB/s link``."""
        return self.name if self.key == "custom" else f"{self.name} ({self.gb_s:g} GB/s)"


def custom_link(gb_s: float) -> Link:
    """A link given by its bandwidth (``kv_link: 25``) instead of a catalog key."""
    return Link(key="custom", name=f"{gb_s:g} GB/s link", gb_s=float(gb_s), source="explicit kv_link GB/s")


def parse_gb_s(value, where: str) -> float | None:
    """``kv_link`` as a number of GB/s (``25``, ``"12.5"``, ``"25GB/s"``), else None (a catalog key).
    A number that is not a positive, finite bandwidth is an error naming ``where``."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a link (a catalog key such as ib-ndr, or GB/s such as 25), "
                          f"got {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        text = str(value).strip().lower().removesuffix("gb/s").removesuffix("gbps").strip()
        try:
            number = float(text)
        except ValueError:
            return None
    if not (math.isfinite(number) and number > 0):
        raise ConfigError(f"{where}: a link's bandwidth must be a positive number of GB/s (one direction), "
                          f"got {value!r}")
    return number


def kv_cache_bytes(model, prompt_tokens: float) -> float:
    """Bytes of the KV cache (and recurrent state) one sequence holds after ``prompt_tokens``: what a
    prefill pool ships.  ``model``: a ``ModelBytes`` (or anything with ``model_bytes()``)."""
    mb = model.model_bytes() if hasattr(model, "model_bytes") else model
    if not (isinstance(prompt_tokens, (int, float)) and math.isfinite(prompt_tokens) and prompt_tokens >= 0):
        raise ConfigError(f"KV transfer: prompt tokens must be a number >= 0, got {prompt_tokens!r}")
    if getattr(mb, "kv_not_counted", ""):
        raise ConfigError(f"KV transfer floor: the model's KV cache is not known ({mb.kv_not_counted})")
    layout = getattr(mb, "kv_layout", None)
    if layout is not None:
        return sum(g.layers * g.state_bytes if g.kind == "state" else g.bytes_at(prompt_tokens)
                   for g in layout.groups)
    if mb.kv_bytes_per_token is None:
        raise ConfigError("KV transfer floor: the model's KV shape is unknown -- give roofline.layers, kv_heads "
                          "and head_dim, or roofline.kv_bytes_per_token")
    return float(mb.kv_bytes_per_token) * prompt_tokens


@dataclass(frozen=True)
class TransferFloor:
    """The floor's arithmetic: the prompt's KV bytes over the link."""

    prompt_tokens: float
    bytes: float
    link: Link
    layout: str = ""          # the per-layer split where the layers are not all full attention

    @property
    def bytes_per_token(self) -> float:
        """The prompt's KV bytes ÷ its tokens (a model's ``kv_bytes_per_token`` when every layer is full)."""
        return self.bytes / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def floor_ms(self) -> float:
        return self.bytes / (self.link.gb_s * 1e9) * 1000.0

    def fraction(self, observed_ms: float | None) -> float | None:
        """The share of the link a transfer of ``observed_ms`` achieved (``link_share``)."""
        return link_share(self.floor_ms, observed_ms)

    def arithmetic(self) -> str:
        """``131,072 B/token × 16,000 tokens = 2.10 GB ÷ 25 GB/s (InfiniBand HDR 200G) = 83.9 ms``."""
        how = f" ({self.layout})" if self.layout else ""
        return (f"{self.bytes_per_token:,.0f} B/token × {self.prompt_tokens:,.0f} tokens = {format_bytes(self.bytes)}"
                f"{how} ÷ {self.link.gb_s:g} GB/s ({self.link.name}) = {self.floor_ms:.1f} ms")


def link_share(floor_ms: float | None, observed_ms: float | None) -> float | None:
    """The share of the link a transfer achieved: its floor ÷ its time (= achieved GB/s ÷ the link's),
    the floor and the time being the same statistic (the mean's with the mean's: ``RunFloor``); None
    without both, or for a time that is not positive and finite."""
    if floor_ms is None or observed_ms is None or not observed_ms > 0 or not math.isfinite(observed_ms):
        return None
    return floor_ms / observed_ms


def transfer_floor(model, prompt_tokens: float, link: Link) -> TransferFloor:
    """The floor of shipping ``prompt_tokens`` tokens' KV cache of ``model`` over ``link``."""
    mb = model.model_bytes() if hasattr(model, "model_bytes") else model
    nbytes = kv_cache_bytes(mb, prompt_tokens)
    layout = getattr(mb, "kv_layout", None)
    split = layout.describe(prompt_tokens) if layout is not None and not layout.uniform_full else ""
    return TransferFloor(prompt_tokens=float(prompt_tokens), bytes=nbytes, link=link, layout=split)


@dataclass(frozen=True)
class RunFloor:
    """A run's floor: each request's own prompt over the link (``floors``, in the requests' order)."""

    floors: tuple[TransferFloor, ...]

    @property
    def link(self) -> Link:
        return self.floors[0].link

    @property
    def prompt_tokens(self) -> float:
        """The requests' mean prompt tokens."""
        return sum(f.prompt_tokens for f in self.floors) / len(self.floors)

    @property
    def bytes(self) -> float:
        """The requests' mean KV bytes."""
        return sum(f.bytes for f in self.floors) / len(self.floors)

    @property
    def floor_ms(self) -> float:
        """The mean of the requests' floors (Σ floor ÷ requests): the mean transfer's floor."""
        return sum(f.floor_ms for f in self.floors) / len(self.floors)

    @property
    def longest(self) -> TransferFloor:
        return max(self.floors, key=lambda f: f.prompt_tokens)

    @property
    def uniform(self) -> bool:
        """Every request the same prompt length (one floor for every statistic)."""
        return min(f.prompt_tokens for f in self.floors) == self.longest.prompt_tokens

    def stats_ms(self) -> dict[str, float]:
        """The floors' p50, p90, p95, p99 and max (type-7, as the samples' statistics are)."""
        s = summarize([f.floor_ms for f in self.floors], "the requests' transfer floors")
        return {stat: s.get(stat) for stat in ("p50", "p90", "p95", "p99", "max")}

    def arithmetic(self) -> str:
        """One prompt length: ``TransferFloor.arithmetic``; a mix: the mean's and the longest prompt's."""
        if self.uniform:
            return self.floors[0].arithmetic()
        n, low, top = len(self.floors), min(f.prompt_tokens for f in self.floors), self.longest
        per_token = self.bytes / self.prompt_tokens if self.prompt_tokens else 0.0
        how = f" ({top.layout})" if top.layout else ""
        return (f"the mean of {n} requests' floors, each its own prompt ({low:,.0f}-{top.prompt_tokens:,.0f} tokens): "
                f"{per_token:,.0f} B/token × {self.prompt_tokens:,.0f} tokens (mean) = {format_bytes(self.bytes)} ÷ "
                f"{self.link.gb_s:g} GB/s ({self.link.name}) = {self.floor_ms:.1f} ms; the longest prompt, "
                f"{top.prompt_tokens:,.0f} tokens: {format_bytes(top.bytes)}{how} = {top.floor_ms:.1f} ms")


def run_floor(model, prompt_tokens, link: Link) -> RunFloor:
    """The floor of each request's prompt (``prompt_tokens``: one per request, at least one)."""
    mb = model.model_bytes() if hasattr(model, "model_bytes") else model
    tokens = list(prompt_tokens)
    if not tokens:
        raise ConfigError("KV transfer floor: no request's prompt length is known")
    cache: dict[float, TransferFloor] = {}   # a run's prompts repeat: each length's floor once
    for t in tokens:
        if t not in cache:
            cache[t] = transfer_floor(mb, t, link)
    return RunFloor(tuple(cache[t] for t in tokens))


def transfer_text(stat: str, observed_ms: float, *, floor_ms: float | None = None, floor_of: str = "",
                  link_name: str | None = None, link_gb_s: float | None = None, lower_bound: bool = False) -> str:
    """``KV transfer p95 180.0 ms for 2.10 GB = 0.47 of the 25 GB/s link (InfiniBand HDR 200G; floor 83.9 ms)``:
    ``floor_ms`` is the same statistic of the requests' floors (``RunFloor``; its bytes: floor × link),
    ``floor_of`` says which where the prompts differ (``core.result.disagg_parts.DisaggInfo.floor_for``);
    without the floor the link alone; without a link the figure alone.  ``lower_bound``: the statistic's
    rank is in the histogram's +Inf bucket, so ``observed_ms`` (the highest bound) is only a lower bound:
    ``KV transfer p95 > 1000.0 ms (above the highest bucket)``, the share of the link at most that."""
    head = f"KV transfer {stat} {'> ' if lower_bound else ''}{observed_ms:.1f} ms" \
        + (" (above the highest bucket)" if lower_bound else "")
    named = f"{link_name}; " if link_name else ""
    if floor_ms is not None and link_gb_s is not None:
        share = link_share(floor_ms, observed_ms)
        said = f" = {'at most ' if lower_bound else ''}{share:.2f} of the {link_gb_s:g} GB/s link" \
            if share is not None else ""
        which = f": {floor_of}" if floor_of else ""
        return f"{head} for {format_bytes(floor_ms * link_gb_s * 1e6)}{said} ({named}floor {floor_ms:.1f} ms{which})"
    if link_gb_s is not None:
        return f"{head} over the {link_gb_s:g} GB/s link ({named}no floor: the model's KV bytes are unknown)"
    return f"{head} (no link given: set kv_link for the floor)"
