"""Bytes per parameter, tensor group by tensor group: a checkpoint's ``quantization_config`` read as
the engines read it.

A weight-only quantization converts the Linear (and fused expert) weights it targets and leaves
the rest (norms, biases, embeddings, the modules it lists as not converted) at the checkpoint's
dtype (``torch_dtype``); a user's ``dtype`` / ``bits`` overrides all of it for every tensor, and the
source says which won.  Each method's bytes per converted parameter, what is never converted and
what is not counted: docs/roofline.md#bytes-per-step-layer-by-layer-tensor-by-tensor.

Pure: no I/O.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache

from ...errors import ConfigError
from ..modelbytes import bytes_per_param
from .inventory import TensorGroup
from .quant_schemes import WAYS_OUT, bitsandbytes, compressed_tensors, fp8, int_groups, modelopt, mxfp4, not_converted

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

    def applies(self, role: str, spellings: tuple[str, ...]) -> bool:
        """Whether it converts the module spelt ``spellings`` (one instance of a ``role`` group)."""
        if self.roles and role not in self.roles:
            return False
        if role == "lm_head":  # only a target naming the head converts it, never "every Linear"
            return any(not _is_class(t) and _hit(spellings, t) for t in self.targets)
        return not self.targets or any(_is_class(t) or _hit(spellings, t) for t in self.targets)


#: one share of a group: (fraction of its parameters, bytes per parameter, label, converted)
Part = tuple[float, float, str, bool]


@dataclass(frozen=True)
class WeightFormat:
    """How a checkpoint stores its tensors: ``default`` bytes per parameter for what is not
    converted; ``schemes`` for the Linear weights a quantization method converts (the first that
    applies wins; none: no method); ``not_converted``: module patterns kept at the default
    (``modules_to_not_convert``, ``ignored_layers``, ``ignore``, ``exclude_modules``; ``re:``
    regexes, globs, prefixes), read from ``skip_key``; ``converts_lm_head``: the method converts
    the output head too; ``nn_linear``: the method replaces transformers' ``nn.Linear`` modules
    (bitsandbytes): MoE routers built as ``nn.Linear`` are converted, fused expert Parameters not.

    Patterns and targets are matched against every module instance a group covers (each layer,
    each member; ``TensorGroup.units``): a group partly matched is charged share by share."""

    default: float
    default_label: str
    schemes: tuple[Scheme, ...] = ()
    not_converted: tuple[str, ...] = ()
    override: str = ""                  # "dtype bf16 for every tensor (...)" when the user's dtype / bits won
    converts_lm_head: bool = False
    skip_key: str = "quantization_config.modules_to_not_convert"
    nn_linear: bool = False
    where: str = "config.json"
    skip_by_substring: bool = False     # AWQ: vLLM / SGLang skip a module whose path CONTAINS an entry

    def parts(self, g: TensorGroup) -> tuple[Part, ...]:
        """``g`` share by share: (fraction of its parameters, bytes per parameter, label, converted)."""
        return _parts(self, g)

    def bytes_per_param(self, g: TensorGroup) -> tuple[float, str]:
        """(bytes per parameter of ``g``, what they are; a partly converted group: each share)."""
        parts = self.parts(g)
        if len(parts) == 1:
            return parts[0][1], parts[0][2]
        return (sum(f * b for f, b, _, _ in parts),
                " + ".join(f"{label} ({f:.1%})" for f, _, label, _ in parts))

    def _eligible(self, g: TensorGroup) -> bool:
        if not self.schemes or not g.linear or g.role == "embedding":
            return False
        if self.nn_linear:  # bitsandbytes: every nn.Linear, routers too; never a fused Parameter
            return g.nn_linear
        return g.role != "router"  # vLLM builds MoE gates unquantized; checkpoints store them so

    def _decide(self, g: TensorGroup, eligible: bool, spellings: tuple[str, ...]) -> tuple[float, str, bool]:
        skipped = (any(p in m for p in self.not_converted for m in spellings) if self.skip_by_substring
                   else _hit_any(spellings, self.not_converted))
        if eligible and not skipped:
            if g.role == "lm_head" and self.converts_lm_head:
                s: Scheme | None = self.schemes[0]
            else:
                s = next((s for s in self.schemes if s.applies(g.role, spellings)), None)
            if s is not None:
                return s.bytes_per_param, s.label, True
        if any(_hit(spellings, name) for name in FP32_TENSORS):
            return 4.0, "fp32", False
        return self.default, self.default_label, False


@lru_cache(maxsize=4096)
def _parts(fmt: WeightFormat, g: TensorGroup) -> tuple[Part, ...]:
    if fmt.override:
        return ((1.0, fmt.default, fmt.default_label, False),)
    eligible = fmt._eligible(g)
    named = eligible and (fmt.not_converted or g.role == "lm_head"
                          or any(not _is_class(t) for s in fmt.schemes for t in s.targets))
    fp32 = any(name in f"{g.module}.{m}" for name in FP32_TENSORS for m, _ in (g.members or (("", 0),)))
    patterns = fmt.not_converted + tuple(t for sc in fmt.schemes for t in sc.targets if not _is_class(t))
    units = g.units(experts_alike=not any(_names_an_expert(p, fmt.skip_by_substring) for p in patterns))
    if not named and not fp32:  # nothing names modules: every instance is decided alike
        return ((1.0, *fmt._decide(g, eligible, next(units)[0])),)
    tally: dict[tuple[float, str, bool], float] = {}
    unknown = False
    for spellings, share in units:
        d = fmt._decide(g, eligible, spellings)
        tally[d] = tally.get(d, 0.0) + (share or 0.0)
        unknown = unknown or share is None
    if len(tally) == 1:
        return ((1.0, *next(iter(tally))),)
    if unknown:
        raise _partial(fmt, g)
    total = sum(tally.values())
    return tuple((w / total, *d) for d, w in sorted(tally.items(), key=lambda kv: -kv[1]))


def _partial(fmt: WeightFormat, g: TensorGroup) -> ConfigError:
    """A pattern that matches some of ``g``'s modules whose shares are not known here."""
    units = [sp for sp, _ in g.units()]
    named = [(fmt.skip_key, p) for p in fmt.not_converted] + [
        ("quantization_config.config_groups.*.targets", t) for s in fmt.schemes for t in s.targets if not _is_class(t)]
    culprits = [(k, p) for k, p in named if 0 < sum(_hit(sp, p) for sp in units) < len(units)] or named
    which = "; ".join(f"{k} pattern {p!r}" for k, p in culprits)
    return ConfigError(f"{fmt.where}: {which} matches only some of the modules of {g.name} ({g.module}), whose "
                       f"shares of its {g.params:.4g} parameters are not known here; {WAYS_OUT}")


def _hit(spellings: tuple[str, ...], pattern: str) -> bool:
    return any(_matches(m, pattern) for m in spellings)


def _hit_any(spellings: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    """Whether any of ``patterns`` matches: one alternation, compiled once (a checkpoint's ignore
    list can name hundreds of modules)."""
    if not patterns:
        return False
    rx = _compiled_any(patterns)
    return any(rx.match(m) is not None for m in spellings)


@lru_cache(maxsize=64)
def _compiled_any(patterns: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(f"(?:{_compiled(p).pattern})" for p in patterns if p), re.S)


def _names_an_expert(pattern: str, substring: bool = False) -> bool:
    """Whether ``pattern`` could single out one routed expert: it mentions experts, or it is a glob
    or regex with a digit (``*.7.*``, ``re:.*\\.\\d\\.``); otherwise every expert of a layer
    matches alike."""
    text = pattern[3:] if pattern.startswith("re:") else pattern
    wild = substring or pattern.startswith("re:") or any(c in text for c in "*?[")
    return "expert" in text.lower() or (wild and (any(c.isdigit() for c in text) or "\\d" in text))


def _is_class(target: str) -> bool:
    """A compressed-tensors class target (``Linear``), as opposed to a module name or ``re:``."""
    return not target.startswith("re:") and "." not in target and target[:1].isupper()


def _matches(module: str, pattern: str) -> bool:
    """``modules_to_not_convert`` / ``ignore`` entries as transformers, vLLM and compressed-tensors
    read them: ``re:REGEX`` (matched from the start), a glob (``model.layers.*.self_attn``), a
    dotted prefix of the module path, or a name component (``lm_head``, ``self_attn``)."""
    if not pattern:
        return False
    return _compiled(pattern).match(module) is not None


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern:
    if pattern.startswith("re:"):
        return re.compile(pattern[3:])
    glob = f"(?:{fnmatch.translate(pattern)})|(?:{fnmatch.translate(pattern + '.*')})"
    component = rf"(?:(?s:.*\.)?{re.escape(pattern)}(?:\..*)?\Z)"
    return re.compile(f"{glob}|{component}", re.S)


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
    return WeightFormat(default, label, where=where, **reader(quant, f"{where}: quantization_config"))


def _skip(quant: dict, *keys: str) -> dict:
    """The not-converted patterns under ``keys`` and the key(s) they came from."""
    present = [k for k in keys if quant.get(k)] or [keys[0]]
    return {"not_converted": not_converted(quant, *keys),
            "skip_key": " / ".join(f"quantization_config.{k}" for k in present)}


def _fp8(quant: dict, where: str) -> dict:
    return {"schemes": (Scheme(*fp8(quant, where)),),
            **_skip(quant, "ignored_layers", "modules_to_not_convert", "ignore")}


def _mxfp4(quant: dict, where: str) -> dict:
    return {"schemes": (Scheme(*mxfp4(), roles=("routed_experts",)),), **_skip(quant, "modules_to_not_convert")}


def _modelopt(quant: dict, where: str) -> dict:
    return {"schemes": (Scheme(*modelopt(quant, where)),),
            **_skip(quant, "exclude_modules", "ignore", "modules_to_not_convert")}


def _compressed(quant: dict, where: str) -> dict:
    groups = compressed_tensors(quant, where)
    schemes = [Scheme(bpp, label, targets) for targets, bpp, label in groups]
    # compressed-tensors: a name or regex target is more specific than a class target (``Linear``)
    schemes.sort(key=lambda s: all(_is_class(t) for t in s.targets) if s.targets else True)
    return {"schemes": tuple(schemes), **_skip(quant, "ignore")}


def _int_groups(quant: dict, where: str) -> dict:
    return {"schemes": (Scheme(*int_groups(quant, where)),), **_skip(quant, "modules_to_not_convert"),
            "converts_lm_head": bool(quant.get("lm_head", False)),
            "skip_by_substring": str(quant.get("quant_method", "")).lower() == "awq"}


def _bnb(quant: dict, where: str) -> dict:
    """transformers' bitsandbytes integration replaces every ``nn.Linear`` (MoE routers built as
    one included) not in ``llm_int8_skip_modules``; when that list is given it REPLACES the
    default skip list (the output head), so the head is converted unless the list names it."""
    return {"schemes": (Scheme(*bitsandbytes(quant, where)),), **_skip(quant, "llm_int8_skip_modules"),
            "converts_lm_head": quant.get("llm_int8_skip_modules") is not None, "nn_linear": True}


#: quant_method -> reader of its quantization_config: the WeightFormat fields it sets
METHODS = {"fp8": _fp8, "fbgemm_fp8": _fp8, "mxfp4": _mxfp4, "modelopt": _modelopt, "modelopt_fp4": _modelopt,
           "compressed-tensors": _compressed, "awq": _int_groups, "gptq": _int_groups, "bitsandbytes": _bnb}
