"""``pytest-llm-latency ceiling``: print the decode bandwidth ceiling and the prefill compute ceiling
with their arithmetic.

The model description is read by ``roofline.resolve`` (shared with the pytest gate).

Examples::

    pytest-llm-latency ceiling --hardware h100-sxm --params 8e9 --dtype fp16
    pytest-llm-latency ceiling --hardware all --model llama-3.1-8b --context 8000 --batch 8
    pytest-llm-latency ceiling --hardware auto --tp 2 --config config.json --kv-dtype fp8 --json
    pytest-llm-latency ceiling --hardware h100-sxm --model llama-3.1-8b --prompt-tokens 4096
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..core.errors import ConfigError
from ..core.roofline.ceiling import Ceiling, decode_ceiling, prefill_ceiling_tok_s
from ..core.roofline.roofline_text import format_ceiling
from ..roofline import catalog
from ..roofline.resolve import FLAGS, resolve_model_bytes

# ---------------------------------------------------------------------------- argparse

def _checked(parse, ok, expected: str):
    """An argparse type: ``parse(text)`` if it is finite and ``ok``, else "expected {expected}, got 'text'"."""
    def check(text: str):
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not ok(value) or value == float("inf"):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return check


def _scaled(text: str) -> float:
    """``8e9``, ``8000000000``, ``8B``, ``70b``, ``350M``."""
    s = text.strip().replace("_", "").replace(",", "")
    mult = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}.get(s[-1:].lower(), 1.0)
    return float(s[:-1] if mult != 1.0 else s) * mult


_count = _checked(_scaled, lambda v: v > 0, "a positive number like 8e9 or 8B")
_non_negative = _checked(float, lambda v: v >= 0, "a number of tokens >= 0")


def _positive(kind):
    return _checked(kind, lambda v: v > 0, f"a positive {kind.__name__}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    hw = parser.add_argument_group("hardware (one of)")
    hw.add_argument("--hardware", help="catalog name (h100-sxm, l40s, 'NVIDIA H100 80GB HBM3', ...), 'all' for a "
                                       "table of every device, 'auto' (nvidia-smi), 'local-cpu' (measured) or "
                                       "'local-gpu' (the datasheet figure with the GPU's measured read "
                                       "figure beside it: needs PyTorch or CuPy)")
    hw.add_argument("--bandwidth", "--mem-bandwidth-gb-s", dest="bandwidth", type=_positive(float), metavar="GB/S",
                    help="explicit memory bandwidth in GB/s instead of a catalog name")
    hw.add_argument("--tp", type=_positive(int), default=1, help="tensor-parallel size: bandwidth = tp x per-device")
    hw.add_argument("--refresh", action="store_true",
                    help="local-cpu, local-gpu: measure again instead of using the cache")
    m = parser.add_argument_group("model (one of)")
    m.add_argument("--model", help="catalog model name (llama-3.1-8b, mixtral-8x7b, ...)")
    m.add_argument("--model-bytes", type=_count, help="weight bytes read per token, e.g. 16.06e9 or 4.9G")
    m.add_argument("--params", type=_count, help="parameters read per token (8e9, 8B; MoE: active)")
    m.add_argument("--config", help="model directory (exact bytes from its *.safetensors headers) or HF "
                                    "config.json (config arithmetic)")
    m.add_argument("--gguf", help="GGUF file: bytes from its tensor table (needs the 'gguf' package)")
    m.add_argument("--dtype", help="weight dtype: fp32, bf16, fp16, fp8, int8, int4 or GGUF Q8_0, Q4_K_M, ...")
    m.add_argument("--bits", type=_positive(float), help="bits per weight instead of --dtype (e.g. 4.5)")
    kv = parser.add_argument_group("KV cache")
    kv.add_argument("--layers", type=_positive(int), help="number of layers (num_hidden_layers)")
    kv.add_argument("--kv-heads", type=_positive(int), help="KV heads (num_key_value_heads)")
    kv.add_argument("--head-dim", type=_positive(int), help="head dimension (hidden_size / num_attention_heads)")
    kv.add_argument("--kv-dtype", help="KV cache dtype (fp16, bf16, fp8); default: the weights' 16-bit dtype")
    kv.add_argument("--kv-bytes-per-token", type=_count, metavar="BYTES",
                    help="KV bytes of one cached token, all layers together, for a model no file describes "
                         "(instead of --layers/--kv-heads/--head-dim)")
    kv.add_argument("--window", type=_positive(int), metavar="TOKENS",
                    help="with --kv-bytes-per-token: a sliding window (a step reads min(context, window) tokens)")
    w = parser.add_argument_group("workload")
    w.add_argument("--context", type=_non_negative, default=0.0,
                   help="mean context in tokens (prompt + half the output); default 0: weights only")
    w.add_argument("--batch", type=_positive(int), default=1, help="concurrent sequences per decode step")
    p = parser.add_argument_group("prefill (compute ceiling)")
    p.add_argument("--prompt-tokens", type=_positive(int), default=1024,
                   help="prompt length for the prefill ceiling's tok/s and ms (default 1024)")
    p.add_argument("--peak-tflops", type=_positive(float), metavar="TFLOPS",
                   help="peak dense TFLOPS instead of the catalog's (local-cpu: instead of the matmul probe)")
    p.add_argument("--hidden-size", type=_positive(int),
                   help="attention width for the attention FLOPs (with --layers); default: config / estimate")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _ceiling_dict(c: Ceiling) -> dict:
    return {"hardware": c.hardware.name, "hardware_key": c.hardware.key,
            "mem_bandwidth_gb_s": c.hardware.mem_bandwidth_gb_s, "hardware_source": c.hardware.source,
            "hardware_note": c.hardware.note or None, "kv_not_counted": c.model.kv_not_counted or None,
            "model": c.model.name, "model_source": c.model.source, "weight_bytes": c.weight_bytes,
            "kv_bytes_per_token": c.model.kv_bytes_per_token, "kv_bytes_per_sequence": c.kv_bytes_per_sequence,
            "kv": c.model.describe_kv(c.context) if c.model.kv_known else None,
            "embedding": c.model.embedding or None, "context": c.context, "batch": c.batch,
            "step_bytes": c.step_bytes, "ceiling_tok_s": c.per_stream_tok_s, "aggregate_tok_s": c.aggregate_tok_s,
            "prefill_ceiling_tok_s": prefill_ceiling_tok_s(c.hardware, c.model.params or 0),
            **_measured_dict(c)}


def _measured_dict(c: Ceiling) -> dict:
    """local-gpu: the measured read figure and the ceiling it gives, beside the datasheet's."""
    if c.hardware.measured_gb_s is None:
        return {}
    return {"measured_gb_s": c.hardware.measured_gb_s, "measured_ceiling_tok_s": c.measured_tok_s,
            "measured_of_datasheet": c.hardware.measured_gb_s / c.hardware.mem_bandwidth_gb_s}


def _prefill(args, mb, hw):
    """The prefill ceiling for ``--prompt-tokens`` (``core.roofline.prefill``), or None without params."""
    from ..core.roofline.prefill import prefill_ceiling, prefill_model
    from ..roofline.flops_probe import resolve_peak

    if not mb.params:
        return None
    layers, hidden = args.layers, args.hidden_size
    if args.model:
        entry = catalog.model_entry(args.model)
        if isinstance(entry, catalog.ConfigModel):
            layers, hidden = _config_shape(entry.config(), layers, hidden)
        else:
            layers, hidden = layers or entry.layers, hidden or (entry.extra or {}).get("hidden_size")
    elif args.config:
        from ..roofline.resolve import _load_config

        cfg, _ = _load_config(args.config, "--config")
        layers, hidden = _config_shape(cfg, layers, hidden)
    peak = resolve_peak(hw, peak_tflops=args.peak_tflops, dtype=args.dtype, where="--peak-tflops",
                        **({"refresh": True} if args.refresh and hw.key == "local-cpu" else {}))  # the FLOPs probe
    assert peak is not None, "resolve_peak gives a peak for a catalog device or an explicit --peak-tflops"
    return prefill_ceiling(prefill_model(mb.name, mb.params, layers, hidden, mb.source), peak, args.prompt_tokens)


def _config_shape(cfg: dict, layers, hidden):
    """(layers, attention width) of a config's language model, the user's figures first: the
    layers whose attention spans the prompt (``core.roofline.archs.attention_shape``)."""
    from ..core.roofline.archs import attention_shape

    spanning, width, _ = attention_shape(cfg)
    return layers or spanning, hidden or width


def _prefill_dict(p) -> dict | None:
    if p is None:
        return None
    return {"prompt_tokens": p.prompt_tokens, "flops": p.flops, "peak_tflops": p.peak.tflops,
            "peak_source": p.peak.source, "tok_s": p.tok_s, "ms": p.ms,
            "attention": "counted" if p.model.has_attention else "not counted: layers and hidden size unknown"}


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
        mb = resolve_model_bytes(model=args.model, model_bytes=args.model_bytes, params=args.params, dtype=args.dtype,
                                 bits=args.bits, config=args.config, gguf=args.gguf, layers=args.layers,
                                 kv_heads=args.kv_heads, head_dim=args.head_dim, kv_dtype=args.kv_dtype,
                                 kv_bytes_per_token=args.kv_bytes_per_token, window=args.window, names=FLAGS)
        if args.context > 0 and not mb.kv_known:
            raise ConfigError(f"--context {args.context:g} needs the KV cache size: give --layers, --kv-heads and "
                              "--head-dim (or --config / --gguf / --model), or --context 0 for weights only")
        if (args.hardware or "").strip().lower() == "all":
            if args.bandwidth is not None:
                raise ConfigError("--hardware all and --bandwidth: give one of them")
            ceilings = [decode_ceiling(hw.tensor_parallel(args.tp), mb, args.context, args.batch)
                        for hw in catalog.all_hardware().values()]
            text = json.dumps([_ceiling_dict(c) for c in ceilings], indent=2) if args.json else _table(ceilings)
        else:
            from ..roofline.hwdetect import resolve_hardware
            probe: dict[str, Any] = {"refresh": True} if args.refresh else {}
            hw = resolve_hardware(args.hardware, mem_bandwidth_gb_s=args.bandwidth, tp=args.tp,
                                  where="--hardware", **probe)
            c = decode_ceiling(hw, mb, args.context, args.batch)
            pre = _prefill(args, mb, hw)
            if args.json:
                text = json.dumps({**_ceiling_dict(c), "prefill": _prefill_dict(pre)}, indent=2)
            else:
                from ..core.roofline.prefill import format_prefill_ceiling

                text = format_ceiling(c) + ("\n" + format_prefill_ceiling(pre) if pre is not None else "")
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
