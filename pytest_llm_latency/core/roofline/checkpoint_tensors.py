"""What each tensor of a safetensors checkpoint is, and what one decode step reads of it.

``roofline.safetensors_reader`` reads the files' headers (dtype, shape, byte span of every tensor)
and hands them here as ``Tensor`` rows; ``charge`` sums them the way a text decode step reads them
(routed experts k / E, an untied input embedding one row, towers and MTP layers left out: the table
in docs/roofline.md#bytes-per-step-layer-by-layer-tensor-by-tensor).

Pure: no I/O.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

from ..errors import ConfigError

#: bits per element of each safetensors dtype (the format's own list; F4/F6 pack several per byte)
DTYPE_BITS: dict[str, int] = {
    "F64": 64, "F32": 32, "F16": 16, "BF16": 16, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F6_E2M3": 6, "F6_E3M2": 6, "F4": 4,
    "I64": 64, "I32": 32, "I16": 16, "I8": 8, "U64": 64, "U32": 32, "U16": 16, "U8": 8, "BOOL": 8, "C64": 64,
}
#: dtypes whose stored elements are values (one parameter each); integer dtypes may pack several
FLOAT_DTYPES = frozenset(d for d in DTYPE_BITS if d.startswith(("F", "BF")))

#: name components of tensors a text decode step never reads, and what they are
EXCLUDED_MODULES: dict[str, str] = {
    "vision_tower": "vision tower", "vision_model": "vision tower", "visual": "vision tower",
    "multi_modal_projector": "multimodal projector", "embed_vision": "multimodal projector",
    "audio_tower": "audio tower", "embed_audio": "audio tower",
}
EMBEDDING_MODULES = ("embed_tokens", "wte", "tok_embeddings")
HEAD_MODULES = ("lm_head", "embed_out")
SHARED_EXPERT_MODULES = ("shared_expert", "shared_experts", "shared_expert_gate")
_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_EXPERT_INDEX = re.compile(r"(?:^|\.)experts\.(\d+)\.")
_AUXILIARY = re.compile(r"scale|zeros|g_idx")  # quantization scales / zero points: stored, not parameters


@dataclass(frozen=True)
class Tensor:
    """One header entry: ``nbytes`` is the span of its ``data_offsets`` (checked against dtype × shape)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str = ""

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


def tensor_nbytes(dtype: str, shape: tuple[int, ...], *, where: str) -> int:
    """Bytes of a tensor from its dtype and shape; a ConfigError naming ``where`` (file and tensor)
    for an unknown dtype or a packed dtype that does not fill whole bytes."""
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        raise ConfigError(f"{where}: unknown safetensors dtype {dtype!r} (known: {', '.join(DTYPE_BITS)}); "
                          "give dtype / bits (config arithmetic) or model_bytes instead")
    n = math.prod(shape)
    if n * bits % 8:
        raise ConfigError(f"{where}: {n} elements of {dtype} do not fill whole bytes; is the header corrupt?")
    return n * bits // 8


def role(name: str, *, layers: int | None = None, has_mtp: bool = False) -> str:
    """``excluded:<what>``, ``routed_experts``, ``shared_experts``, ``embedding``, ``lm_head`` or ``other``."""
    parts = name.split(".")
    for p in parts:
        if p in EXCLUDED_MODULES:
            return f"excluded:{EXCLUDED_MODULES[p]}"
    if "mtp" in parts or "mtp_layers" in parts:
        return "excluded:MTP layers"
    if has_mtp and layers is not None:
        m = _LAYER_INDEX.search(name)
        if m and int(m.group(1)) >= layers:
            return "excluded:MTP layers"
    if "experts" in parts:
        return "routed_experts"
    if any(p in SHARED_EXPERT_MODULES for p in parts):
        return "shared_experts"
    module = parts[-2] if len(parts) >= 2 else ""
    if module in EMBEDDING_MODULES:
        return "embedding"
    if module in HEAD_MODULES or parts == ["output", "weight"]:
        return "lm_head"
    return "other"


@dataclass(frozen=True)
class CheckpointBytes:
    """A checkpoint's tensors summed: all stored (``total_bytes``), what one step reads
    (``charged_bytes``: routed × k / E, an untied input embedding one row, excluded left out)."""

    total_bytes: int
    charged_bytes: float
    routed_bytes: int                    # all routed-expert tensors (unscaled)
    tensors: int
    by_dtype: dict[str, int]             # all stored tensors, bytes per dtype
    excluded: dict[str, tuple[int, int]]  # what -> (tensors, bytes)
    embedding: str                       # "one row" / "read whole (tied: no output head stored)" / ""
    charged_elements: float
    total_elements: int                  # text-model tensors (excluded left out)
    plain: bool                          # every text tensor a float value tensor: elements are params
    packed_dtypes: tuple[str, ...] = ()  # integer dtypes seen (their stored elements are not params)
    experts: int = 0
    experts_per_token: int = 0


def charge(tensors: list[Tensor], *, experts: int, experts_per_token: int, layers: int | None = None,
           has_mtp: bool = False, experts_where: str = "config.json") -> CheckpointBytes:
    """Sum ``tensors`` as one decode step reads them (the table in docs/roofline.md).

    ``experts`` / ``experts_per_token``: E and k of the config (0 for a dense model); routed tensors
    with E = 0, an expert index >= E, or E > 0 with no routed tensor recognized, are a ConfigError
    naming the tensor (its file) and ``experts_where``."""
    roles = [(t, role(t.name, layers=layers, has_mtp=has_mtp)) for t in tensors]
    has_head = any(r == "lm_head" for _, r in roles)
    total = routed = total_elems = 0
    charged = charged_elems = 0.0
    by_dtype: dict[str, int] = defaultdict(int)
    excluded: dict[str, list[int]] = {}
    packed: set[str] = set()
    plain = True
    embedding = ""
    for t, r in roles:
        total += t.nbytes
        by_dtype[t.dtype] += t.nbytes
        if r.startswith("excluded:"):
            what = excluded.setdefault(r.split(":", 1)[1], [0, 0])
            what[0] += 1
            what[1] += t.nbytes
            continue
        total_elems += t.elements
        if t.dtype not in FLOAT_DTYPES:
            packed.add(t.dtype)
            plain = False
        if _AUXILIARY.search(t.name.rsplit(".", 1)[-1]):
            plain = False
        share = 1.0
        if r == "routed_experts":
            _check_expert(t, experts, experts_per_token, experts_where)
            routed += t.nbytes
            share = experts_per_token / experts
        elif r == "embedding" and has_head:
            share = 1.0 / t.shape[0] if len(t.shape) >= 2 and t.shape[0] > 0 else 1.0
            embedding = "input embedding one row"
        elif r == "embedding":
            embedding = "input embedding read whole (tied: no output head stored)"
        charged += t.nbytes * share
        charged_elems += t.elements * share
    if experts and not routed:
        raise ConfigError(f"{experts_where} gives {experts} routed experts but no tensor name has an 'experts' "
                          "component (…mlp.experts.M.…, …experts.gate_up_proj…), so the routed experts are not "
                          "recognized and would be charged whole; give model_bytes, or params + dtype")
    return CheckpointBytes(
        total_bytes=total, charged_bytes=charged, routed_bytes=routed, tensors=len(tensors), by_dtype=dict(by_dtype),
        excluded={k: (v[0], v[1]) for k, v in excluded.items()}, embedding=embedding,
        charged_elements=charged_elems, total_elements=total_elems, plain=plain, packed_dtypes=tuple(sorted(packed)),
        experts=experts if routed else 0, experts_per_token=experts_per_token if routed else 0)


def _check_expert(t: Tensor, experts: int, k: int, where: str) -> None:
    at = f"{t.file}: {t.name}" if t.file else t.name
    if not experts or not 0 < k <= experts:
        raise ConfigError(f"{at} is a routed-expert tensor but {where} gives experts={experts}, "
                          f"experts_per_token={k}; the checkpoint and its config disagree (set num_local_experts / "
                          "num_experts and num_experts_per_tok), or give params + dtype, or model_bytes")
    m = _EXPERT_INDEX.search(t.name)
    if m and int(m.group(1)) >= experts:
        raise ConfigError(f"{at}: expert {m.group(1)} but {where} gives {experts} experts; "
                          "is config.json from another model?")
