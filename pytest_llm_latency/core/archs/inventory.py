"""A model's tensors as groups, and its KV cache as layer kinds: what a config.json describes.

An ``Architecture`` is what one ``model_type``'s arithmetic (``core.archs.<family>``) reads out of
a config: the parameter groups (each with its role and the HF module path that quantization
configs match), the per-layer KV / state shapes, the experts, and the class defaults it applied
where the config was silent (said in the ceiling's source).

``core.archs.weights`` turns it into ``ModelBytes``: per group the bytes per parameter of its
storage (``core.archs.quant``), routed experts charged ``k / E``, and the input-embedding
convention of ``core.modelbytes.EMBEDDING_CONVENTION``.

Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError
from ..kv_layout import KVLayout, LayerKV, kv_layout_from_groups

#: what a group of tensors is; decides how a step charges it (``core.archs.weights``)
ROLES = ("embedding", "lm_head", "attention", "mlp", "routed_experts", "shared_experts", "router",
         "norm", "bias", "other")


@dataclass(frozen=True)
class TensorGroup:
    """``params`` parameters (all layers together) of one role.  ``module``: the HF module path of
    one instance (``model.layers.0.self_attn.q_proj``), which ``modules_to_not_convert`` /
    ``ignore`` lists match.  ``linear``: a Linear (or fused expert) weight that a weight-only
    quantization converts; norms, biases, embeddings, sinks are not."""

    name: str
    params: float
    role: str
    module: str = ""
    linear: bool = True

    def __post_init__(self):
        if self.role not in ROLES:
            raise ConfigError(f"internal: tensor group {self.name!r} has unknown role {self.role!r}")


@dataclass(frozen=True)
class KVShape:
    """``layers`` layers of one attention kind (``core.kv_layout.KINDS``), in elements:
    ``elems_per_token`` per layer per cached token (K and V together; latent: the one vector),
    ``state_elems`` per layer for a state layer, stored at ``state_elem_bytes`` (None: the KV dtype)."""

    kind: str
    layers: int
    elems_per_token: int = 0
    window: int | None = None
    sinks: int = 0
    state_elems: int = 0
    state_elem_bytes: float | None = None

    def layer_kv(self, kv_elem_bytes: float) -> LayerKV:
        state_b = self.state_elem_bytes if self.state_elem_bytes is not None else kv_elem_bytes
        return LayerKV(self.kind, self.layers, bytes_per_token=self.elems_per_token * kv_elem_bytes,
                       window=self.window, sinks=self.sinks, state_bytes=self.state_elems * state_b)


@dataclass(frozen=True)
class Architecture:
    model_type: str
    groups: tuple[TensorGroup, ...]
    kv: tuple[KVShape, ...]
    hidden_size: int
    vocab_size: int
    layers: int
    tied_embeddings: bool
    experts: int = 0                   # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    defaults: tuple[str, ...] = ()     # class defaults applied where the config was silent
    notes: tuple[str, ...] = ()        # other things the arithmetic assumed
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def total_params(self) -> float:
        return sum(g.params for g in self.groups)

    @property
    def active_params(self) -> float:
        """Parameters a decode step reads: routed experts at ``k / E``, an untied input embedding
        one row (``core.modelbytes.EMBEDDING_CONVENTION``)."""
        return sum(self.charged(g) for g in self.groups)

    @property
    def routed_params(self) -> float:
        return sum(g.params for g in self.groups if g.role == "routed_experts")

    def charged(self, g: TensorGroup) -> float:
        """The parameters of ``g`` one decode step of one sequence reads."""
        if g.role == "routed_experts":
            return g.params * self.experts_per_token / self.experts
        if g.role == "embedding" and not self.tied_embeddings:
            return float(self.hidden_size)
        return g.params

    def kv_layout(self, kv_elem_bytes: float, source: str = "") -> KVLayout:
        return kv_layout_from_groups([s.layer_kv(kv_elem_bytes) for s in self.kv], source=source)


# ------------------------------------------------------------------ config reading helpers

class Cfg:
    """A config mapping read with its file in every error, recording the defaults it applied."""

    def __init__(self, cfg: dict, where: str, model_type: str):
        if not isinstance(cfg, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
        self.cfg, self.where, self.model_type = cfg, where, model_type
        self.defaults: list[str] = []

    def get(self, key: str, default=None):
        return self.cfg.get(key, default)

    def need(self, *keys: str):
        """The first of ``keys`` present (not null); a ConfigError naming the file and keys if none."""
        for k in keys:
            if self.cfg.get(k) is not None:
                return self.cfg[k]
        raise ConfigError(f"{self.where}: missing {' / '.join(keys)} for model_type {self.model_type!r}; "
                          "give a complete config.json, a safetensors model directory, a GGUF file, or params "
                          "with the KV keys (layers, kv_heads, head_dim or kv_bytes_per_token)")

    def int(self, *keys: str, default: int | None = None) -> int:
        """An integer key; ``default`` is the transformers class default, applied and recorded when
        the config omits the key."""
        for k in keys:
            v = self.cfg.get(k)
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v or v < 0:
                    raise ConfigError(f"{self.where}: {k} must be a non-negative integer, got {v!r}")
                return int(v)
        if default is None:
            return int(self.need(*keys))
        self.defaults.append(f"{keys[0]}={default}")
        return default

    def flag(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            self.defaults.append(f"{key}={str(default).lower()}")
            return default
        return bool(v)


def attention_groups(layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, *,
                     qkv_bias: bool = False, o_bias: bool = False, qk_norm: bool = False,
                     prefix: str = "model.layers.0.self_attn", count_layers: int | None = None) -> list[TensorGroup]:
    """Grouped-query attention: q, k, v, o projections (+ biases, + per-head q/k norms)."""
    n = layers if count_layers is None else count_layers
    q, kv = heads * head_dim, kv_heads * head_dim
    groups = [TensorGroup("attention q/k/v/o", n * (hidden * q + 2 * hidden * kv + q * hidden), "attention",
                          f"{prefix}.q_proj")]
    bias = (q + 2 * kv if qkv_bias else 0) + (hidden if o_bias else 0)
    if bias:
        groups.append(TensorGroup("attention biases", n * bias, "bias", f"{prefix}.q_proj", linear=False))
    if qk_norm:
        groups.append(TensorGroup("q/k norms", n * 2 * head_dim, "norm", f"{prefix}.q_norm", linear=False))
    return groups


def gated_mlp(hidden: int, inter: int) -> int:
    """gate, up and down projections of one SwiGLU / GeGLU MLP."""
    return 3 * hidden * inter


def embedding_groups(vocab: int, hidden: int, tied: bool) -> list[TensorGroup]:
    groups = [TensorGroup("input embedding", vocab * hidden, "embedding", "model.embed_tokens", linear=False)]
    if not tied:
        groups.append(TensorGroup("output head", vocab * hidden, "lm_head", "lm_head"))
    return groups


def full_kv(layers: int, kv_heads: int, head_dim: int) -> KVShape:
    return KVShape("full", layers, elems_per_token=2 * kv_heads * head_dim)


def split_by_kind(kinds: list[str], kv_heads: int, head_dim: int, window: int | None,
                  sinks: int = 0) -> tuple[KVShape, ...]:
    """One KVShape per kind from a per-layer list of ``full`` / ``sliding`` / ``chunked``."""
    out = []
    for kind in ("full", "sliding", "chunked"):
        n = sum(1 for k in kinds if k == kind)
        if n:
            out.append(KVShape(kind, n, elems_per_token=2 * kv_heads * head_dim,
                               window=None if kind == "full" else window, sinks=sinks if kind == "sliding" else 0))
    return tuple(out)
