"""An ``Architecture`` and a ``WeightFormat`` as the ``ModelBytes`` the roofline reads.

    weight bytes per step = Σ over groups  charged params × bytes per param of the group's storage
    charged params        = params, except routed experts × k / E and an untied input embedding's
                            one row (``core.roofline.modelbytes.EMBEDDING_CONVENTION``)
    KV / state per step   = the layout of ``Architecture.kv`` at the context (``core.roofline.kv_layout``)

Pure: no I/O.
"""
from __future__ import annotations

from collections import defaultdict

from ..modelbytes import EMBEDDING_CONVENTION, ModelBytes, format_bytes
from .inventory import Architecture
from .quant import WeightFormat


def model_bytes(arch: Architecture, fmt: WeightFormat, *, kv_elem_bytes: float, name: str,
                where: str) -> ModelBytes:
    """Weights at each group's stored width (active experts only), the per-layer KV layout."""
    charged = total = routed = 0.0
    params_charged = 0.0
    by_label: dict[str, float] = defaultdict(float)
    for g in arch.groups:
        n = arch.charged(g)
        params_charged += n
        for share, bpp, label, _ in fmt.parts(g):  # a group partly left unconverted: share by share
            charged += share * n * bpp
            total += share * g.params * bpp
            by_label[label] += share * n * bpp
            if g.role == "routed_experts":
                routed += share * g.params * bpp
    layout = arch.kv_layout(kv_elem_bytes, source=f"{where}: {arch.model_type} layer kinds")
    storage = fmt.override or ", ".join(f"{label} {format_bytes(b)}"
                                        for label, b in sorted(by_label.items(), key=lambda kv: -kv[1]))
    moe = f", {arch.experts_per_token} of {arch.experts} experts" if arch.experts else ""
    defaults = f"; class defaults applied: {', '.join(arch.defaults)}" if arch.defaults else ""
    notes = f"; {'; '.join(arch.notes)}" if arch.notes else ""
    return ModelBytes(
        weight_bytes=charged, kv_bytes_per_token=layout.growth_per_token, name=name, params=params_charged,
        total_params=arch.total_params, bytes_per_param=charged / params_charged if params_charged else None,
        routed_weight_bytes=routed, experts=arch.experts, experts_per_token=arch.experts_per_token,
        kv_layout=layout, embedding=EMBEDDING_CONVENTION + (" (tied here: the one table is read whole as the "
                                                           "output head)" if arch.tied_embeddings else ""),
        source=(f"{where}: {arch.model_type} config arithmetic (fallback: a safetensors directory gives exact "
                f"bytes), {params_charged:.4g} read / {arch.total_params:.4g} params{moe}, read per step: "
                f"{storage}{defaults}{notes}"))
