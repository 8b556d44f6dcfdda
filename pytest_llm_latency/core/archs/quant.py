"""Bytes per parameter, tensor group by tensor group: a checkpoint's ``quantization_config`` read as
the engines read it.

A weight-only quantization converts the Linear (and fused expert) weights it targets and leaves
the rest (norms, biases, embeddings, the modules it lists as not converted) at the checkpoint's
dtype (``torch_dtype``).  Bytes per converted weight include the scales (and zero points) of its
blocks or groups:

=================  ===========================================================================
method             bytes per converted parameter
=================  ===========================================================================
fp8 (per tensor)   1
fp8 block [a, b]   1 + 4 / (a × b)                       (one fp32 ``weight_scale_inv`` per block)
awq / gptq         bits / 8 + (2 + bits / 8) / group     (fp16 scale + packed zero per group)
=================  ===========================================================================

A user's ``dtype`` / ``bits`` overrides all of it for every tensor, and the source says which won.

Pure: no I/O.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from ..errors import ConfigError
from ..modelbytes import bytes_per_param
from .inventory import TensorGroup


@dataclass(frozen=True)
class WeightFormat:
    """How a checkpoint stores its tensors: ``default`` bytes per parameter for what is not
    converted; ``converted`` for the Linear weights a quantization method converts (None: no
    method); ``not_converted``: module patterns kept at the default (``modules_to_not_convert``,
    ``ignored_layers``, ``ignore``, with ``re:`` regexes); ``targets``: module-name substrings the
    method converts (empty: every Linear)."""

    default: float
    default_label: str
    converted: float | None = None
    converted_label: str = ""
    not_converted: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    override: str = ""                  # "dtype bf16" when the user's dtype / bits won
    converts_lm_head: bool = False      # most methods keep the output head at the checkpoint dtype
    converts_embedding: bool = False

    def is_converted(self, g: TensorGroup) -> bool:
        if self.converted is None:
            return False
        if g.role == "lm_head" and not self.converts_lm_head and not self.targets:
            return False
        if g.role == "embedding":
            return self.converts_embedding
        if not g.linear:
            return False
        if any(_matches(g.module, pattern) for pattern in self.not_converted):
            return False
        return not self.targets or any(t in g.module or _matches(g.module, t) for t in self.targets)

    def bytes_per_param(self, g: TensorGroup) -> tuple[float, str]:
        """(bytes per parameter of ``g``, what they are)."""
        if self.override:
            return self.default, self.default_label
        if self.is_converted(g):
            assert self.converted is not None
            return self.converted, self.converted_label
        return self.default, self.default_label


def _matches(module: str, pattern: str) -> bool:
    """``modules_to_not_convert`` / ``ignore`` entries as transformers, vLLM and compressed-tensors
    read them: ``re:REGEX``, a glob (``model.layers.*.self_attn``), a dotted prefix of the module
    path, or a name component (``lm_head``, ``self_attn``)."""
    if not pattern:
        return False
    if pattern.startswith("re:"):
        return re.match(pattern[3:], module) is not None
    if fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*"):
        return True
    return f".{pattern}." in f".{module}."


def _label(dtype: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(dtype).lower(), str(dtype))


def weight_format(cfg: dict, *, dtype: str | None = None, bits: float | None = None,
                  where: str = "config.json", names: tuple[str, str] = ("dtype", "bits")) -> WeightFormat:
    """The checkpoint's storage from its ``quantization_config`` and ``torch_dtype``, or the user's
    ``dtype`` / ``bits`` for every tensor (``names``: how the user wrote those two)."""
    if dtype is not None or bits is not None:
        bpp = bytes_per_param(dtype, bits, where=where)
        label = _label(dtype) if dtype is not None else f"{bits:g}-bit"
        given = f"{names[0]} {dtype}" if dtype is not None else f"{names[1]} {bits:g}"
        return WeightFormat(bpp, label, override=f"{given} for every tensor (the config's storage ignored)")
    torch_dtype = cfg.get("torch_dtype") or cfg.get("dtype")
    if torch_dtype is None:
        raise ConfigError(f"{where}: no torch_dtype in the config; give dtype (bf16, fp8, int4, ...) or bits")
    default = bytes_per_param(str(torch_dtype), where=f"{where}: torch_dtype")
    label = _label(str(torch_dtype))
    quant = cfg.get("quantization_config")
    if quant is None:
        return WeightFormat(default, label)
    if not isinstance(quant, dict):
        raise ConfigError(f"{where}: quantization_config must be a mapping, got {quant!r}")
    method = str(quant.get("quant_method", "")).lower()
    reader = METHODS.get(method)
    if reader is None:
        raise ConfigError(f"{where}: quantization_config.quant_method {method or '(missing)'!r} is not modelled "
                          f"(known: {', '.join(sorted(METHODS))}); give the model directory with its *.safetensors "
                          "(exact bytes from the headers), a GGUF file, or dtype / bits")
    return reader(quant, default, label, f"{where}: quantization_config")


def _not_converted(quant: dict, *keys: str) -> tuple[str, ...]:
    out: list[str] = []
    for k in keys:
        v = quant.get(k)
        if v:
            out.extend(str(x) for x in (v if isinstance(v, (list, tuple)) else [v]))
    return tuple(out)


def _fp8(quant: dict, default: float, label: str, where: str) -> WeightFormat:
    block = quant.get("weight_block_size")
    if block:
        if not (isinstance(block, (list, tuple)) and len(block) == 2 and all(isinstance(b, int) and b > 0
                                                                            for b in block)):
            raise ConfigError(f"{where}.weight_block_size: expected [rows, cols], got {block!r}")
        bpp = 1.0 + 4.0 / (block[0] * block[1])
        what = f"fp8 + fp32 scale per {block[0]}×{block[1]} block"
    else:
        bpp, what = 1.0, "fp8 (per-tensor scale)"
    return WeightFormat(default, label, bpp, what,
                        not_converted=_not_converted(quant, "ignored_layers", "modules_to_not_convert"))


def _int_groups(quant: dict, default: float, label: str, where: str) -> WeightFormat:
    b = quant.get("bits", quant.get("w_bit"))
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not 1 <= b <= 8:
        raise ConfigError(f"{where}.bits: expected the weight bits (e.g. 4), got {b!r}")
    group = quant.get("group_size", quant.get("q_group_size", 128))
    if isinstance(group, bool) or not isinstance(group, int) or group == 0 or group < -1:
        raise ConfigError(f"{where}.group_size: expected a positive group size or -1, got {group!r}")
    bpp = b / 8.0 + ((2.0 + b / 8.0) / group if group > 0 else 0.0)
    what = f"int{b:g} + fp16 scale and zero per {group}" if group > 0 else f"int{b:g} (per-channel scales)"
    return WeightFormat(default, label, bpp, what,
                        not_converted=_not_converted(quant, "modules_to_not_convert"),
                        converts_lm_head=bool(quant.get("lm_head", False)))


#: quant_method -> reader of its quantization_config
METHODS = {"fp8": _fp8, "fbgemm_fp8": _fp8, "awq": _int_groups, "gptq": _int_groups}
