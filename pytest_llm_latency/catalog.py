"""Load the packaged hardware/model catalog (``data/hardware.yaml``) into core types.

Lookups are case-insensitive and accept aliases (including the names
``nvidia-smi`` prints).  Unknown names raise ``ConfigError`` with close matches.
"""
from __future__ import annotations

import difflib
import functools
from importlib import resources

from .core.errors import ConfigError
from .core.hardware import Hardware, ModelSpec

DTYPE_BYTES = {"fp32": 4.0, "float32": 4.0, "f32": 4.0, "bf16": 2.0, "fp16": 2.0, "float16": 2.0,
               "f16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


@functools.lru_cache(maxsize=1)
def _raw() -> dict:
    import yaml

    text = resources.files("pytest_llm_latency").joinpath("data/hardware.yaml").read_text("utf-8")
    return yaml.safe_load(text)


@functools.lru_cache(maxsize=1)
def all_hardware() -> dict[str, Hardware]:
    out = {}
    for key, d in _raw()["devices"].items():
        out[key] = Hardware(
            key=key, name=d.get("name", key), mem_bandwidth_gb_s=float(d["mem_bandwidth_gb_s"]),
            peak_bf16_tflops=(float(d["peak_bf16_tflops"]) if d.get("peak_bf16_tflops") else None),
            memory_gb=d.get("memory_gb"), source=d["source"], aliases=tuple(d.get("aliases", ())))
    return out


def _lookup(kind: str, name: str, table: dict, aliases) -> object:
    wanted = _norm(name)
    for key, value in table.items():
        if _norm(key) == wanted or any(_norm(a) == wanted for a in aliases(value)):
            return value
    names = list(table)
    close = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"unknown {kind} {name!r}{hint} (known: {', '.join(names)})")


def hardware(name: str) -> Hardware:
    return _lookup("hardware", name, all_hardware(), lambda h: h.aliases)  # type: ignore[return-value]


@functools.lru_cache(maxsize=1)
def all_models() -> dict[str, ModelSpec]:
    out = {}
    for key, d in _raw()["models"].items():
        out[key] = ModelSpec(
            name=d.get("name", key), params=float(d["params"]),
            weight_bytes_per_param=DTYPE_BYTES[d.get("dtype", "fp16")], layers=int(d["layers"]),
            kv_heads=int(d["kv_heads"]), head_dim=int(d["head_dim"]),
            kv_bytes_per_elem=DTYPE_BYTES[d.get("kv_dtype", d.get("dtype", "fp16"))],
            max_model_len=int(d.get("max_model_len", 131072)))
    return out


def model(name: str) -> ModelSpec:
    table = all_models()
    return _lookup("model", name, table, lambda m: (m.name,))  # type: ignore[return-value]
