"""A model's tensors as groups, and its KV cache as layer kinds: what a config.json describes.

An ``Architecture`` is what one ``model_type``'s arithmetic (``core.roofline.archs.<family>``) reads out of
a config: the parameter groups (each with its role and the HF module path that quantization
configs match), the per-layer KV / state shapes, the experts, and the class defaults it applied
where the config was silent (said in the ceiling's source).

``core.roofline.archs.weights`` turns it into ``ModelBytes``: per group the bytes per parameter of its
storage (``core.roofline.archs.quant``), routed experts charged ``k / E``, and the input-embedding
convention of ``core.roofline.modelbytes.EMBEDDING_CONVENTION``.

Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ConfigError
from ..kv_layout import KVLayout, LayerKV, kv_layout_from_groups

#: what a group of tensors is; decides how a step charges it (``core.roofline.archs.weights``)
ROLES = ("embedding", "lm_head", "attention", "mlp", "routed_experts", "shared_experts", "router",
         "norm", "bias", "other")


#: a member sub-module of a group: (path suffix, its parameters in one layer; None: not known here)
Member = tuple[str, "float | None"]


@dataclass(frozen=True)
class TensorGroup:
    """``params`` parameters (all layers together) of one role.

    What it covers, as quantization configs name it (``modules_to_not_convert`` / ``ignore``
    patterns and compressed-tensors ``targets`` are matched against every instance):
    ``module`` the HF module path template, ``{i}`` standing for each of ``layers`` (the layer
    indices the group spans; empty: one module, no layer index); ``members`` the sub-modules of
    each instance with their parameters per layer (``("q_proj", hidden × q)``; a ``{e}`` in a
    member stands for each of ``experts``; empty: the module itself).  ``nested``: the module
    sits in a multimodal model's language model, spelt either ``language_model.model.layers...``
    or (transformers >= 4.52) ``model.language_model.layers...``.

    ``linear``: a Linear (or fused expert) weight that a weight-only quantization converts;
    norms, biases, embeddings, sinks are not.  ``nn_linear``: transformers builds it from
    ``nn.Linear`` modules (bitsandbytes replaces exactly those); False for fused expert
    Parameters (gpt-oss, Llama 4 experts) and Parameter routers (DeepSeek-V3, gpt-oss)."""

    name: str
    params: float
    role: str
    module: str = ""
    linear: bool = True
    layers: tuple[int, ...] = ()
    members: tuple[Member, ...] = ()
    experts: int = 0
    nn_linear: bool = True
    nested: bool = False

    def __post_init__(self):
        if self.role not in ROLES:
            raise ConfigError(f"internal: tensor group {self.name!r} has unknown role {self.role!r}")
        shares = [s for _, s in self.members]
        if self.layers and shares and all(s is not None for s in shares):
            total = sum(float(s) for s in shares if s is not None) * len(self.layers)
            if abs(total - self.params) > 1e-9 * max(self.params, 1.0):
                raise ConfigError(f"internal: tensor group {self.name!r}: members sum to {total:g} over "
                                  f"{len(self.layers)} layers, not its {self.params:g} parameters")

    def units(self, experts_alike: bool = False):
        """Every module instance the group covers: (its spellings, its parameters or None).
        ``experts_alike``: no pattern can tell one expert from another, so each layer's experts of
        one member are one unit (expert 0 spelt for all of them): the same tally, E times fewer
        matches (DeepSeek-V3: 256 experts × 58 layers × 3 members)."""
        members: tuple[Member, ...] = self.members or (("", None),)
        for i in self.layers or (None,):
            base = self.module if i is None else self.module.replace("{i}", str(i))
            for suffix, share in members:
                path = f"{base}.{suffix}" if suffix else base
                if not self.members:
                    share = self.params / max(len(self.layers), 1)
                if "{e}" in path and self.experts and experts_alike:
                    yield self.spellings(path.replace("{e}", "0")), share
                elif "{e}" in path and self.experts:
                    each = share / self.experts if share is not None else None
                    for e in range(self.experts):
                        yield self.spellings(path.replace("{e}", str(e))), each
                else:
                    yield self.spellings(path), share

    def spellings(self, path: str) -> tuple[str, ...]:
        if not self.nested:
            return (path,)
        if path.startswith("model."):
            return (f"language_model.{path}", f"model.language_model.{path[len('model.'):]}")
        return (f"language_model.{path}", path)


def layered(name: str, role: str, template: str, layers, members: list[Member], *, experts: int = 0,
            linear: bool = True, nn_linear: bool = True) -> TensorGroup:
    """A group over ``layers`` (indices) of ``template`` (``model.layers.{i}.mlp``) with ``members``
    (suffix, parameters per layer); its params the members' sum over the layers."""
    ids = tuple(layers)
    per_layer = sum(float(s) for _, s in members if s is not None)
    return TensorGroup(name, per_layer * len(ids), role, template, linear=linear, layers=ids,
                       members=tuple(members), experts=experts, nn_linear=nn_linear)


@dataclass(frozen=True)
class KVShape:
    """``layers`` layers of one attention kind (``core.roofline.kv_layout.KINDS``), in elements:
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
        one row (``core.roofline.modelbytes.EMBEDDING_CONVENTION``)."""
        return sum(self.charged(g) for g in self.groups)

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

    def listed_kinds(self, types, layers: int, kinds: dict[str, str]) -> list[str]:
        """``layer_types`` (one entry per layer) mapped through ``kinds``."""
        if not isinstance(types, list) or len(types) != layers:
            raise ConfigError(f"{self.where}: layer_types must list one entry per layer ({layers}, "
                              f"num_hidden_layers), got {types!r:.80}")
        for i, t in enumerate(types):
            if t not in kinds:
                raise ConfigError(f"{self.where}: layer_types[{i}] is {t!r}; {self.model_type} layers are "
                                  f"{' or '.join(kinds)}")
        return [kinds[t] for t in types]

    def int(self, *keys: str, default: int | None = None) -> int:
        """An integer key; ``default`` is the transformers class default, applied and recorded when
        the config omits the key."""
        for k in keys:
            v = self.cfg.get(k)
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v or v < 0:
                    raise ConfigError(f"{self.where}: {k} must be a non-negative integer, got {v!r}; correct "
                                      "it, or give a safetensors model directory, a GGUF file, or params with "
                                      "the KV keys (layers, kv_heads, head_dim or kv_bytes_per_token)")
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
                     prefix: str = "model.layers.{i}.self_attn", layer_ids=None,
                     fused_qkv: bool = False) -> list[TensorGroup]:
    """Grouped-query attention: q, k, v, o projections (+ biases, + per-head q/k norms) of
    ``layer_ids`` (default: all ``layers``); ``fused_qkv``: one ``qkv_proj`` (phi3)."""
    ids = list(range(layers) if layer_ids is None else layer_ids)
    q, kv = heads * head_dim, kv_heads * head_dim
    proj: list[Member] = ([("qkv_proj", hidden * (q + 2 * kv))] if fused_qkv else
                          [("q_proj", hidden * q), ("k_proj", hidden * kv), ("v_proj", hidden * kv)])
    groups = [layered("attention q/k/v/o", "attention", prefix, ids, [*proj, ("o_proj", q * hidden)])]
    bias = (q + 2 * kv if qkv_bias else 0) + (hidden if o_bias else 0)
    if bias:
        groups.append(layered("attention biases", "bias", prefix, ids, [("q_proj.bias", bias)], linear=False))
    if qk_norm:
        groups.append(layered("q/k norms", "norm", prefix, ids, [("q_norm", 2 * head_dim)], linear=False))
    return groups


def gated_members(hidden: int, inter: int, names=("gate_proj", "up_proj", "down_proj"),
                  copies: int = 1, prefix: str = "") -> list[Member]:
    """gate, up, down of one gated MLP, each name after ``prefix`` (``copies``: that many experts,
    ``{e}`` in the prefix)."""
    return [(prefix + n, copies * hidden * inter) for n in names]


def embedding_groups(vocab: int, hidden: int, tied: bool) -> list[TensorGroup]:
    groups = [TensorGroup("input embedding", vocab * hidden, "embedding", "model.embed_tokens", linear=False)]
    if not tied:
        groups.append(TensorGroup("output head", vocab * hidden, "lm_head", "lm_head"))
    return groups


def full_kv(layers: int, kv_heads: int, head_dim: int) -> KVShape:
    return KVShape("full", layers, elems_per_token=2 * kv_heads * head_dim)


def kv_by_kind(kinds: list[str], kv_heads: int, head_dim: int, window: int | None) -> tuple[KVShape, ...]:
    """One KVShape per kind from a per-layer list of ``full`` / ``sliding`` / ``chunked`` (``window``:
    the sliding window or the chunk)."""
    return tuple(KVShape(kind, n, elems_per_token=2 * kv_heads * head_dim, window=None if kind == "full" else window)
                 for kind in ("full", "sliding", "chunked") if (n := kinds.count(kind)))
