"""Each quantization method's bytes per converted parameter, scales and zero points included, read
from its ``quantization_config`` (``core.roofline.archs.quant`` applies them group by group).

Every reader returns ``(bytes per parameter, label)``; errors name the file, the key under
``quantization_config`` and the ways out.  Pure: no I/O.
"""
from __future__ import annotations

from ...errors import ConfigError

WAYS_OUT = ("give the model directory with its *.safetensors (exact bytes from the headers), a GGUF file, "
            "or dtype / bits")

#: MXFP4 (OCP microscaling): 4-bit e2m1 values, one e8m0 (8-bit) scale per 32
MXFP4_BYTES = (4 + 8 / 32) / 8
#: bitsandbytes 4-bit weights are quantized in blocks of 64 (``bnb_4bit`` absmax blocks); double
#: quantization stores those absmax at 8 bits with one fp32 second-level scale per 256 of them
BNB_BLOCK, BNB_DQ_BLOCK = 64, 256

_SCALE_BYTES = {"float8_e4m3fn": 1, "float8_e5m2": 1, "uint8": 1, "int8": 1, "float16": 2, "bfloat16": 2,
                "float32": 4}


def not_converted(quant: dict, *keys: str) -> tuple[str, ...]:
    """The module patterns a config lists as left unconverted under any of ``keys``."""
    out: list[str] = []
    for k in keys:
        v = quant.get(k)
        if v:
            out.extend(str(x) for x in (v if isinstance(v, (list, tuple)) else [v]))
    return tuple(out)


def _bad(where: str, key: str, expected: str, got) -> ConfigError:
    return ConfigError(f"{where}.{key}: expected {expected}, got {got!r}; {WAYS_OUT}")


def fp8(quant: dict, where: str) -> tuple[float, str]:
    """fp8 e4m3: one byte, plus an fp32 ``weight_scale_inv`` per ``weight_block_size`` block."""
    block = quant.get("weight_block_size")
    if not block:
        return 1.0, "fp8 (per-tensor scale)"
    if not (isinstance(block, (list, tuple)) and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise _bad(where, "weight_block_size", "[rows, cols]", block)
    return 1.0 + 4.0 / (block[0] * block[1]), f"fp8 + fp32 scale per {block[0]}×{block[1]} block"


def mxfp4() -> tuple[float, str]:
    return MXFP4_BYTES, "MXFP4 (4-bit + e8m0 scale per 32)"


def modelopt(quant: dict, where: str) -> tuple[float, str]:
    """NVIDIA ModelOpt: ``quant_algo`` NVFP4 (an fp8 scale per ``group_size``, 16) or FP8 (per tensor)."""
    nested = quant.get("quantization")
    inner: dict = nested if isinstance(nested, dict) else quant
    algo = str(inner.get("quant_algo") or "").upper()
    if algo == "NVFP4":
        group = inner.get("group_size", 16)
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise _bad(where, "group_size", "the NVFP4 block size (16)", group)
        return 0.5 + 1.0 / group, f"NVFP4 (4-bit + fp8 scale per {group})"
    if algo == "FP8":
        return 1.0, "fp8 (per-tensor scale)"
    raise ConfigError(f"{where}.quant_algo: {algo or '(missing)'!r} is not modelled for modelopt (known: NVFP4, "
                      f"FP8); {WAYS_OUT}")


def int_groups(quant: dict, where: str) -> tuple[float, str]:
    """AWQ / GPTQ: packed ``bits`` a weight, an fp16 scale and a packed zero point per ``group_size``."""
    b = quant.get("bits", quant.get("w_bit"))
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not 1 <= b <= 8:
        raise _bad(where, "bits", "the weight bits (e.g. 4)", b)
    group = quant.get("group_size", quant.get("q_group_size", 128))
    if isinstance(group, bool) or not isinstance(group, int) or group == 0 or group < -1:
        raise _bad(where, "group_size", "a positive group size or -1", group)
    bpp = b / 8.0 + ((2.0 + b / 8.0) / group if group > 0 else 0.0)
    what = f"int{b:g} + fp16 scale and zero per {group}" if group > 0 else f"int{b:g} (per-channel scales)"
    return bpp, what


def bitsandbytes(quant: dict, where: str) -> tuple[float, str]:
    """bitsandbytes: 4-bit nf4 / fp4 with an fp32 absmax per 64 (double-quant: an 8-bit absmax and
    an fp32 scale per 256 of them), or LLM.int8 (one byte; its fp32 row scales not counted)."""
    if quant.get("load_in_4bit") or quant.get("_load_in_4bit"):
        kind = str(quant.get("bnb_4bit_quant_type") or "fp4").lower()
        if kind not in ("nf4", "fp4"):
            raise _bad(where, "bnb_4bit_quant_type", "nf4 or fp4", kind)
        if quant.get("bnb_4bit_use_double_quant"):
            return (0.5 + 1.0 / BNB_BLOCK + 4.0 / (BNB_BLOCK * BNB_DQ_BLOCK),
                    f"{kind} + 8-bit absmax per {BNB_BLOCK} (double-quant)")
        return 0.5 + 4.0 / BNB_BLOCK, f"{kind} + fp32 absmax per {BNB_BLOCK}"
    if quant.get("load_in_8bit") or quant.get("_load_in_8bit"):
        return 1.0, "int8 (LLM.int8)"
    raise ConfigError(f"{where}: bitsandbytes with neither load_in_4bit nor load_in_8bit set; {WAYS_OUT}")


def _scale_bytes(w: dict, default: float, where: str) -> float:
    dtype = w.get("scale_dtype")
    if dtype is None:
        return default
    b = _SCALE_BYTES.get(str(dtype).removeprefix("torch.").lower())
    if b is None:
        raise _bad(where, "scale_dtype", f"one of {', '.join(_SCALE_BYTES)}", dtype)
    return float(b)


def ct_weights(w: dict, fmt: str, where: str) -> tuple[float, str]:
    """One compressed-tensors ``weights`` scheme: ``num_bits`` of ``type`` int / float, scales by
    ``strategy`` (tensor, channel, group / tensor_group of ``group_size``, block of
    ``block_structure``), zero points when not ``symmetric`` (packed at ``num_bits`` in the
    pack-quantized formats, else one byte)."""
    bits, kind = w.get("num_bits"), str(w.get("type") or "int").lower()
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 16:
        raise _bad(where, "num_bits", "the weight bits (4, 8)", bits)
    if kind not in ("int", "float"):
        raise _bad(where, "type", "int or float", kind)
    strategy = str(w.get("strategy") or "tensor").lower()
    name = f"{'fp' if kind == 'float' else 'int'}{bits}"
    base = bits / 8.0
    if strategy in ("tensor", "channel", "token"):
        return base, name + (" (per-channel scales not counted)" if strategy == "channel" else " (per-tensor scale)")
    if strategy in ("group", "tensor_group"):
        group = w.get("group_size")
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise _bad(where, "group_size", f"a positive group size for strategy {strategy}", group)
        fp4 = kind == "float" and bits == 4
        scale = _scale_bytes(w, 1.0 if fp4 else 2.0, where)
        zero = 0.0 if w.get("symmetric", True) or kind == "float" else (bits / 8.0 if "pack" in fmt else 1.0)
        label = {16: "NVFP4", 32: "MXFP4"}.get(group, name) if fp4 else name
        zp = " and zero point" if zero else ""
        return base + (scale + zero) / group, f"{label} + {scale:g}-byte scale{zp} per {group}"
    if strategy == "block":
        block = w.get("block_structure")
        if not (isinstance(block, (list, tuple)) and len(block) == 2
                and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
            raise _bad(where, "block_structure", "[rows, cols] for strategy block", block)
        scale = _scale_bytes(w, 2.0, where)
        return base + scale / (block[0] * block[1]), f"{name} + {scale:g}-byte scale per {block[0]}×{block[1]} block"
    raise _bad(where, "strategy", "tensor, channel, group, tensor_group or block", strategy)


#: compressed-tensors formats that store weights 2:4 sparse (half the values, plus metadata)
SPARSE_FORMATS = ("marlin-24", "sparse-24-bitmask", "sparse-bitmask")


def _dense_format(fmt, where: str) -> None:
    """Refuse a sparse packing (``marlin-24``: 2:4 sparse int4 for the Marlin kernel), which a
    dense bytes-per-parameter figure would overcharge."""
    if fmt is not None and str(fmt).lower() in SPARSE_FORMATS:
        raise ConfigError(f"{where}: {fmt!r} stores the weights 2:4 sparse (half the values plus their "
                          f"indices), which is not modelled; {WAYS_OUT}")


def compressed_tensors(quant: dict, where: str) -> list[tuple[tuple[str, ...], float, str]]:
    """``config_groups``: per group its ``targets`` and ``weights`` storage (a group without
    weights quantizes activations only and converts nothing)."""
    sparsity = quant.get("sparsity_config")
    if isinstance(sparsity, dict) and str(sparsity.get("format") or "dense").lower() != "dense":
        raise ConfigError(f"{where}.sparsity_config: sparse format {sparsity.get('format')!r} is not modelled; "
                          f"{WAYS_OUT}")
    _dense_format(quant.get("format"), f"{where}.format")
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise _bad(where, "config_groups", "a mapping of quantization groups", groups)
    out = []
    for name, group in groups.items():
        at = f"{where}.config_groups.{name}"
        if not isinstance(group, dict):
            raise ConfigError(f"{at}: expected a mapping with targets and weights, got {group!r}; {WAYS_OUT}")
        w = group.get("weights")
        if not w:
            continue
        if not isinstance(w, dict):
            raise _bad(at, "weights", "a mapping (num_bits, type, strategy, ...)", w)
        _dense_format(group.get("format"), f"{at}.format")
        fmt = str(group.get("format") or quant.get("format") or "").lower()
        bpp, label = ct_weights(w, fmt, f"{at}.weights")
        targets = group.get("targets") or []
        out.append((tuple(str(t) for t in (targets if isinstance(targets, list) else [targets])), bpp, label))
    return out
