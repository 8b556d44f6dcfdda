"""Bytes per parameter, tensor group by tensor group: a checkpoint's ``quantization_config`` read as
the engines read it.

A weight-only quantization converts the Linear (and fused expert) weights it targets and leaves
the rest (norms, biases, embeddings, the modules it lists as not converted) at the checkpoint's
dtype (``torch_dtype``).  Bytes per converted weight include the scales (and zero points) of its
blocks or groups:

=======================  =====================================================================
method                   bytes per converted parameter
=======================  =====================================================================
fp8 (per tensor)         1
fp8 block [a, b]         1 + 4 / (a × b)                     (an fp32 ``weight_scale_inv`` a block)
mxfp4                    (4 + 8 / 32) / 8 = 0.53125          (4.25 bits: an e8m0 scale per 32);
                         the MoE experts only, as vLLM and transformers convert them
modelopt NVFP4           (4 + 8 / 16) / 8 = 0.5625           (4.5 bits: an fp8 scale per 16)
compressed-tensors       bits / 8 + scale / group (+ zero point / group when not symmetric),
                         per ``config_groups`` entry; ``nvfp4`` = the NVFP4 figure
awq / gptq               bits / 8 + (2 + bits / 8) / group   (fp16 scale + packed zero a group)
bitsandbytes nf4 / fp4   0.5 + 4 / 64, double-quant 0.5 + 1 / 64 + 4 / (64 × 256)
bitsandbytes int8        1
=======================  =====================================================================

Not counted (each under 0.2 % of a tensor; a safetensors directory gives them exactly): one
scale per tensor (fp8, NVFP4's fp32 global scales ``weight_scale_2`` / ``input_scale``), one per
output row (per-channel strategies, LLM.int8's row scales), act-order indices, the zero padding
of a partial block.

Never converted, whatever the method: embeddings, norms, biases and other non-Linear tensors;
MoE routers (vLLM builds every MoE gate with ``quant_config=None``; checkpoints store them at
the model dtype); the output head unless the method says so.  Kept at fp32 whatever
``torch_dtype`` says: ``FP32_TENSORS`` (DeepSeek-V3's ``e_score_correction_bias``).

A user's ``dtype`` / ``bits`` overrides all of it for every tensor, and the source says which
won.  An unknown method is refused, naming the file, the key and the ways out.

Pure: no I/O.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from ..errors import ConfigError
from ..modelbytes import bytes_per_param
from .inventory import TensorGroup
from .quant_schemes import (WAYS_OUT, bitsandbytes, compressed_tensors, fp8, int_groups, modelopt, mxfp4,
                            not_converted)

#: tensors a checkpoint stores in fp32 whatever its torch_dtype (transformers'
#: ``_keep_in_fp32_modules_strict``; vLLM PR 23640 for DeepSeek-V3's router bias)
FP32_TENSORS = ("e_score_correction_bias",)

#: where the config has no torch_dtype: the dtype of the tensors a method leaves unconverted
#: (OpenAI's gpt-oss config.json has none; its attention, router, embeddings and biases are bf16)
REST_DTYPE = {"mxfp4": "bfloat16"}


@dataclass(frozen=True)
class Scheme:
    """One converted storage: ``bytes_per_param`` with its scales, ``label`` saying what it is,
    ``targets`` the modules it applies to (empty or a class name such as ``Linear``: every Linear),
    ``roles`` the tensor roles it is limited to (empty: any)."""

    bytes_per_param: float
    label: str
    targets: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    def applies(self, g: TensorGroup) -> bool:
        if self.roles and g.role not in self.roles:
            return False
        if g.role == "lm_head":  # only a target naming the head converts it, never "every Linear"
            return any(not _is_class(t) and _matches(g.module, t) for t in self.targets)
        return not self.targets or any(_is_class(t) or _matches(g.module, t) for t in self.targets)


@dataclass(frozen=True)
class WeightFormat:
    """How a checkpoint stores its tensors: ``default`` bytes per parameter for what is not
    converted; ``schemes`` for the Linear weights a quantization method converts (the first that
    applies wins; none: no method); ``not_converted``: module patterns kept at the default
    (``modules_to_not_convert``, ``ignored_layers``, ``ignore``, ``exclude_modules``; ``re:``
    regexes, globs, prefixes); ``converts_lm_head``: the method converts the output head too."""

    default: float
    default_label: str
    schemes: tuple[Scheme, ...] = ()
    not_converted: tuple[str, ...] = ()
    override: str = ""                  # "dtype bf16 for every tensor (...)" when the user's dtype / bits won
    converts_lm_head: bool = False

    @property
    def converted(self) -> float | None:
        """Bytes per parameter of the (first) converted storage; None without a method."""
        return self.schemes[0].bytes_per_param if self.schemes else None

    def scheme(self, g: TensorGroup) -> Scheme | None:
        """The storage that converts ``g``, or None when it stays at the default."""
        if not self.schemes or not g.linear or g.role in ("embedding", "router"):
            return None
        if any(_matches(g.module, pattern) for pattern in self.not_converted):
            return None
        if g.role == "lm_head" and self.converts_lm_head:
            return self.schemes[0]
        return next((s for s in self.schemes if s.applies(g)), None)

    def is_converted(self, g: TensorGroup) -> bool:
        return self.scheme(g) is not None

    def bytes_per_param(self, g: TensorGroup) -> tuple[float, str]:
        """(bytes per parameter of ``g``, what they are)."""
        if self.override:
            return self.default, self.default_label
        s = self.scheme(g)
        if s is not None:
            return s.bytes_per_param, s.label
        if any(_matches(g.module, name) for name in FP32_TENSORS):
            return 4.0, "fp32"
        return self.default, self.default_label


def _is_class(target: str) -> bool:
    """A compressed-tensors class target (``Linear``), as opposed to a module name or ``re:``."""
    return not target.startswith("re:") and "." not in target and target[:1].isupper()


def _matches(module: str, pattern: str) -> bool:
    """``modules_to_not_convert`` / ``ignore`` entries as transformers, vLLM and compressed-tensors
    read them: ``re:REGEX`` (matched from the start), a glob (``model.layers.*.self_attn``), a
    dotted prefix of the module path, or a name component (``lm_head``, ``self_attn``)."""
    if not pattern:
        return False
    if pattern.startswith("re:"):
        return re.match(pattern[3:], module) is not None
    if fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*"):
        return True
    return f".{pattern}." in f".{module}."


def _label(dtype: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(dtype).lower(), str(dtype))


def _configured(cfg: dict) -> str:
    """What the config itself says about storage, for the override's wording."""
    quant = cfg.get("quantization_config")
    if isinstance(quant, dict) and quant.get("quant_method"):
        algo = quant.get("quant_algo")
        return f"quantization_config {quant['quant_method']}{f' {algo}' if algo else ''}"
    dtype = cfg.get("torch_dtype") or cfg.get("dtype")
    return f"torch_dtype {dtype}" if dtype else "storage"


def weight_format(cfg: dict, *, dtype: str | None = None, bits: float | None = None,
                  where: str = "config.json", names: tuple[str, str] = ("dtype", "bits")) -> WeightFormat:
    """The checkpoint's storage from its ``quantization_config`` and ``torch_dtype``, or the user's
    ``dtype`` / ``bits`` for every tensor (``names``: how the user wrote those two)."""
    if dtype is not None or bits is not None:
        bpp = bytes_per_param(dtype, bits, where=where)
        label = _label(dtype) if dtype is not None else f"{bits:g}-bit"
        given = f"{names[0]} {dtype}" if dtype is not None else f"{names[1]} {bits:g}"
        return WeightFormat(bpp, label, override=f"{given} for every tensor (it overrides the config's "
                                                 f"{_configured(cfg)})")
    quant = cfg.get("quantization_config")
    if quant is not None and not isinstance(quant, dict):
        raise ConfigError(f"{where}: quantization_config must be a mapping, got {quant!r}")
    method = str(quant.get("quant_method", "")).lower() if quant is not None else ""
    reader = METHODS.get(method)
    if quant is not None and reader is None:
        raise ConfigError(f"{where}: quantization_config.quant_method {method or '(missing)'!r} is not modelled "
                          f"(known: {', '.join(sorted(METHODS))}); {WAYS_OUT}")
    torch_dtype = cfg.get("torch_dtype") or cfg.get("dtype")
    label_note = ""
    if torch_dtype is None and method in REST_DTYPE:
        torch_dtype, label_note = REST_DTYPE[method], f" (no torch_dtype: {method} leaves the rest bf16)"
    if torch_dtype is None:
        raise ConfigError(f"{where}: no torch_dtype in the config; give dtype (bf16, fp8, int4, ...) or bits")
    default = bytes_per_param(str(torch_dtype), where=f"{where}: torch_dtype")
    label = _label(str(torch_dtype)) + label_note
    if reader is None or quant is None:
        return WeightFormat(default, label)
    schemes, skip, head = reader(quant, f"{where}: quantization_config")
    return WeightFormat(default, label, schemes, not_converted=skip, converts_lm_head=head)


def _fp8(quant: dict, where: str):
    return (Scheme(*fp8(quant, where)),), not_converted(quant, "ignored_layers", "modules_to_not_convert",
                                                        "ignore"), False


def _mxfp4(quant: dict, where: str):
    return (Scheme(*mxfp4(), roles=("routed_experts",)),), not_converted(quant, "modules_to_not_convert"), False


def _modelopt(quant: dict, where: str):
    bpp, label = modelopt(quant, where)
    return (Scheme(bpp, label),), not_converted(quant, "exclude_modules", "ignore", "modules_to_not_convert"), False


def _compressed(quant: dict, where: str):
    groups = compressed_tensors(quant, where)
    schemes = [Scheme(bpp, label, targets) for targets, bpp, label in groups]
    # compressed-tensors: a name or regex target is more specific than a class target (``Linear``)
    schemes.sort(key=lambda s: all(_is_class(t) for t in s.targets) if s.targets else True)
    return tuple(schemes), not_converted(quant, "ignore"), False


def _int_groups(quant: dict, where: str):
    bpp, label = int_groups(quant, where)
    return (Scheme(bpp, label),), not_converted(quant, "modules_to_not_convert"), bool(quant.get("lm_head", False))


def _bnb(quant: dict, where: str):
    bpp, label = bitsandbytes(quant, where)
    return (Scheme(bpp, label),), not_converted(quant, "llm_int8_skip_modules"), False


#: quant_method -> reader of its quantization_config: (schemes, not-converted patterns, converts lm_head)
METHODS = {"fp8": _fp8, "fbgemm_fp8": _fp8, "mxfp4": _mxfp4, "modelopt": _modelopt, "modelopt_fp4": _modelopt,
           "compressed-tensors": _compressed, "awq": _int_groups, "gptq": _int_groups, "bitsandbytes": _bnb}
