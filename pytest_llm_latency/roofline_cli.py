"""``pytest-llm-latency ceiling``: print the decode bandwidth ceiling with its arithmetic.

Also home of ``resolve_model_bytes``, which turns the user's model description (catalog name,
params + dtype/bits, HF config.json, GGUF file, KV shape overrides) into ``ModelBytes``; the
pytest plugin uses it for the YAML ``roofline:`` block with ``names`` mapping keys to its own.

Examples::

    pytest-llm-latency ceiling --hardware h100-sxm --params 8e9 --dtype fp16
    pytest-llm-latency ceiling --hardware all --model llama-3.1-8b --context 8000 --batch 8
    pytest-llm-latency ceiling --hardware auto --tp 2 --config config.json --kv-dtype fp8 --json
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from . import catalog
from .core.errors import ConfigError
from .core.hardware import Hardware
from .core.modelbytes import (ModelBytes, bytes_per_param, kv_elem_bytes, kv_from_shape,
                              model_bytes_from_hf_config, model_bytes_from_params)
from .core.roofline import Ceiling, decode_ceiling, format_ceiling, prefill_ceiling_tok_s

FLAGS = {"model": "--model", "model_bytes": "--model-bytes", "params": "--params", "dtype": "--dtype", "bits": "--bits", "config": "--config",
         "gguf": "--gguf", "layers": "--layers", "kv_heads": "--kv-heads", "head_dim": "--head-dim",
         "kv_dtype": "--kv-dtype"}


def resolve_model_bytes(*, model: str | None = None, model_bytes: float | None = None,
                        params: float | None = None, dtype: str | None = None,
                        bits: float | None = None, config: str | Path | dict | None = None,
                        gguf: str | Path | None = None, layers: int | None = None, kv_heads: int | None = None,
                        head_dim: int | None = None, kv_dtype: str | None = None,
                        names: dict | None = None) -> ModelBytes:
    """One weights source (``model``, ``model_bytes``, ``params``, ``config``, ``gguf``) plus KV overrides.

    ``names`` maps these keyword names to how the user wrote them (``--kv-heads``,
    ``roofline.kv_heads``) so that errors name the right flag or key.
    """
    n = {**{k: k for k in FLAGS}, **(names or {})}
    sources = {k: v for k, v in (("model", model), ("model_bytes", model_bytes), ("params", params),
                                  ("config", config), ("gguf", gguf)) if v is not None}
    if len(sources) != 1:
        given = ", ".join(n[k] for k in sources) or "none"
        raise ConfigError(f"model bytes: give exactly one of {n['model']} (catalog name), {n['params']} "
                          f"(+ {n['dtype']}/{n['bits']}), {n['config']} (config.json), {n['gguf']} (file) or "
                          f"{n['model_bytes']} (weight bytes per token); given: {given}")
    if dtype is not None and bits is not None:
        raise ConfigError(f"{n['dtype']} and {n['bits']}: give one of them, not both")
    if model_bytes is not None:
        if isinstance(model_bytes, bool) or not isinstance(model_bytes, (int, float)) or not 0 < model_bytes < 1e15:
            raise ConfigError(f"{n['model_bytes']}: expected the weight bytes read per token (e.g. 16.06e9), "
                              f"got {model_bytes!r}")
        if dtype is not None or bits is not None:
            raise ConfigError(f"{n['model_bytes']} is already in bytes; drop {n['dtype']}/{n['bits']}")
        mb = ModelBytes(weight_bytes=float(model_bytes), kv_bytes_per_token=None,
                        source=f"explicit {n['model_bytes']} {model_bytes / 1e9:.2f} GB")
    elif params is not None:
        if dtype is None and bits is None:
            raise ConfigError(f"{n['params']} needs {n['dtype']} (fp16, bf16, fp8, int4, Q4_K_M, ...) or {n['bits']}")
        mb = model_bytes_from_params(params, dtype=dtype, bits=bits, where=n["params"],
                                    dtype_where=n["dtype"] if dtype is not None else n["bits"])
    elif config is not None:
        cfg, where = _load_config(config, n["config"])
        mb = model_bytes_from_hf_config(cfg, dtype=dtype, bits=bits, kv_dtype=kv_dtype, where=where)
    elif gguf is not None:
        if dtype is not None or bits is not None:
            raise ConfigError(f"{n['gguf']}: the file's tensor table gives the bytes; drop {n['dtype']}/{n['bits']}")
        from .gguf_reader import model_bytes_from_gguf
        mb = model_bytes_from_gguf(gguf, kv_dtype=kv_dtype)
    else:
        spec = catalog.model(str(model))
        if kv_dtype is not None:
            spec = replace(spec, kv_bytes_per_elem=kv_elem_bytes(kv_dtype, where=n["kv_dtype"]))
        if dtype is not None or bits is not None:
            bpp = bytes_per_param(dtype, bits, where=n["dtype"] if dtype is not None else n["bits"])
            spec = replace(spec, weight_bytes_per_param=bpp,
                           source=f"{spec.name}: {spec.params:.4g} params x {bpp:.4g} B ({dtype or f'{bits:g}-bit'})")
        mb = spec.model_bytes()
    if any(v is not None for v in (layers, kv_heads, head_dim)):
        where = f"{n['layers']}/{n['kv_heads']}/{n['head_dim']}"
        elem = kv_elem_bytes(kv_dtype, dtype, where=n["kv_dtype"])
        mb = replace(mb, kv_bytes_per_token=kv_from_shape(layers, kv_heads, head_dim, elem, where=where))
    elif kv_dtype is not None and (params is not None or model_bytes is not None):
        raise ConfigError(f"{n['kv_dtype']} needs the KV shape: {n['layers']}, {n['kv_heads']}, {n['head_dim']}")
    return mb


HARDWARE_KEYS = ("hardware", "mem_bandwidth_gb_s", "tensor_parallel")
MODEL_KEYS = tuple(FLAGS)
GATE_KEYS = ("min_efficiency", "batch")  # read by the gate itself, accepted here


def roofline_inputs(mapping: dict, *, where: str = "roofline", base_dir: str | Path | None = None,
                    runner=None, **probe) -> tuple[Hardware, ModelBytes]:
    """(Hardware, ModelBytes) from a YAML ``roofline:`` mapping; errors name ``{where}.{key}``.

    Keys: hardware | mem_bandwidth_gb_s, tensor_parallel; model | model_bytes | params (+ dtype |
    bits) | config | gguf; layers, kv_heads, head_dim, kv_dtype.  ``min_efficiency`` and ``batch``
    are accepted and left to the caller.  Relative ``config``/``gguf`` paths are taken from
    ``base_dir`` (the SLO file's folder).  ``runner``/``probe`` go to ``resolve_hardware``.
    """
    import difflib

    from .hwdetect import resolve_hardware
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where}: expected a mapping like {{hardware: h100-sxm, model: llama-3.1-8b}}")
    known = HARDWARE_KEYS + MODEL_KEYS + GATE_KEYS
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(known)})"
            raise ConfigError(f"{where}.{key}: unknown key{hint}")
    kw = {k: mapping.get(k) for k in MODEL_KEYS}
    for k in ("config", "gguf"):
        if kw[k] is not None and base_dir is not None and not isinstance(kw[k], dict):
            kw[k] = str(Path(base_dir) / Path(str(kw[k])).expanduser())
    mb = resolve_model_bytes(**kw, names={k: f"{where}.{k}" for k in MODEL_KEYS})
    hw = resolve_hardware(mapping.get("hardware"), mem_bandwidth_gb_s=mapping.get("mem_bandwidth_gb_s"),
                          tp=mapping.get("tensor_parallel") or 1, runner=runner, where=f"{where}.hardware", **probe)
    return hw, mb


def _load_config(config, flag: str) -> tuple[dict, str]:
    if isinstance(config, dict):
        return config, flag
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    try:
        return json.loads(path.read_text("utf-8")), str(path)
    except FileNotFoundError:
        raise ConfigError(f"{flag}: no such file {str(path)!r}; give the model's config.json") from None
    except ValueError as exc:
        raise ConfigError(f"{flag}: {str(path)!r} is not valid JSON ({exc})") from None


# ---------------------------------------------------------------------------- argparse

def _count(text: str) -> float:
    """``8e9``, ``8000000000``, ``8B``, ``70b``, ``350M``."""
    s = text.strip().replace("_", "").replace(",", "")
    mult = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}.get(s[-1:].lower(), 1.0)
    try:
        value = float(s[:-1] if mult != 1.0 else s) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number like 8e9 or 8B, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number like 8e9 or 8B, got {text!r}")
    return value


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}") from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}")
        return value
    return parse


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens >= 0, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of tokens >= 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    hw = parser.add_argument_group("hardware (one of)")
    hw.add_argument("--hardware", help="catalog name (h100-sxm, l40s, 'NVIDIA H100 80GB HBM3', ...), 'all' for a "
                                       "table of every device, 'auto' (nvidia-smi) or 'local-cpu' (measured)")
    hw.add_argument("--bandwidth", "--mem-bandwidth-gb-s", dest="bandwidth", type=_positive(float), metavar="GB/S",
                    help="explicit memory bandwidth in GB/s instead of a catalog name")
    hw.add_argument("--tp", type=_positive(int), default=1, help="tensor-parallel size: bandwidth = tp x per-device")
    hw.add_argument("--refresh", action="store_true", help="local-cpu: measure again instead of using the cache")
    m = parser.add_argument_group("model (one of)")
    m.add_argument("--model", help="catalog model name (llama-3.1-8b, mixtral-8x7b, ...)")
    m.add_argument("--model-bytes", type=_count, help="weight bytes read per token, e.g. 16.06e9 or 4.9G")
    m.add_argument("--params", type=_count, help="parameters read per token (8e9, 8B; MoE: active)")
    m.add_argument("--config", help="HF config.json (file or model directory): params from the architecture")
    m.add_argument("--gguf", help="GGUF file: bytes from its tensor table (needs the 'gguf' package)")
    m.add_argument("--dtype", help="weight dtype: fp32, bf16, fp16, fp8, int8, int4 or GGUF Q8_0, Q4_K_M, ...")
    m.add_argument("--bits", type=_positive(float), help="bits per weight instead of --dtype (e.g. 4.5)")
    kv = parser.add_argument_group("KV cache")
    kv.add_argument("--layers", type=_positive(int), help="number of layers (num_hidden_layers)")
    kv.add_argument("--kv-heads", type=_positive(int), help="KV heads (num_key_value_heads)")
    kv.add_argument("--head-dim", type=_positive(int), help="head dimension (hidden_size / num_attention_heads)")
    kv.add_argument("--kv-dtype", help="KV cache dtype (fp16, bf16, fp8); default: the weights' 16-bit dtype")
    w = parser.add_argument_group("workload")
    w.add_argument("--context", type=_non_negative, default=0.0,
                   help="mean context in tokens (prompt + half the output); default 0: weights only")
    w.add_argument("--batch", type=_positive(int), default=1, help="concurrent sequences per decode step")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _ceiling_dict(c: Ceiling) -> dict:
    return {"hardware": c.hardware.name, "hardware_key": c.hardware.key,
            "mem_bandwidth_gb_s": c.hardware.mem_bandwidth_gb_s, "hardware_source": c.hardware.source,
            "model": c.model.name, "model_source": c.model.source, "weight_bytes": c.weight_bytes,
            "kv_bytes_per_token": c.model.kv_bytes_per_token, "context": c.context, "batch": c.batch,
            "step_bytes": c.step_bytes, "ceiling_tok_s": c.per_stream_tok_s, "aggregate_tok_s": c.aggregate_tok_s,
            "prefill_ceiling_tok_s": prefill_ceiling_tok_s(c.hardware, c.model.params or 0)}


def _table(ceilings: list[Ceiling]) -> str:
    c0 = ceilings[0]
    ctx = f" @ {c0.context:g} ctx" if c0.context else ""
    head = [f"decode ceiling of {c0.model.name} ({c0.model.source}){ctx}, batch {c0.batch}",
            f"{'device':<28} {'GB/s':>7} {'tok/s':>8}" + (f" {'aggregate':>10}" if c0.batch > 1 else "")]
    rows = [f"{c.hardware.key:<28} {c.hardware.mem_bandwidth_gb_s:>7g} {c.per_stream_tok_s:>8.1f}"
            + (f" {c.aggregate_tok_s:>10.1f}" if c.batch > 1 else "") for c in ceilings]
    return "\n".join(head + rows)


def run(args: argparse.Namespace, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        mb = resolve_model_bytes(model=args.model, model_bytes=args.model_bytes, params=args.params, dtype=args.dtype, bits=args.bits,
                                 config=args.config, gguf=args.gguf, layers=args.layers, kv_heads=args.kv_heads,
                                 head_dim=args.head_dim, kv_dtype=args.kv_dtype, names=FLAGS)
        if args.context > 0 and mb.kv_bytes_per_token is None:
            raise ConfigError(f"--context {args.context:g} needs the KV cache size: give --layers, --kv-heads and "
                              "--head-dim (or --config / --gguf / --model), or --context 0 for weights only")
        if (args.hardware or "").strip().lower() == "all":
            if args.bandwidth is not None:
                raise ConfigError("--hardware all and --bandwidth: give one of them")
            ceilings = [decode_ceiling(hw.tensor_parallel(args.tp), mb, args.context, args.batch)
                        for hw in catalog.all_hardware().values()]
            text = json.dumps([_ceiling_dict(c) for c in ceilings], indent=2) if args.json else _table(ceilings)
        else:
            from .hwdetect import resolve_hardware
            probe = {"refresh": True} if args.refresh else {}
            hw = resolve_hardware(args.hardware, mem_bandwidth_gb_s=args.bandwidth, tp=args.tp,
                                  where="--hardware", **probe)
            c = decode_ceiling(hw, mb, args.context, args.batch)
            text = json.dumps(_ceiling_dict(c), indent=2) if args.json else format_ceiling(c)
    except ConfigError as exc:
        print(f"pytest-llm-latency ceiling: error: {exc}", file=err)
        return 2
    print(text, file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytest-llm-latency ceiling", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
