"""Load the packaged hardware/model catalog (``data/hardware.yaml``) into core types.

Lookups are case-insensitive, ignore punctuation and accept aliases (including the names
``nvidia-smi`` prints).  Only an exact match (after that normalization) resolves a name: a name
close to one or several entries (``h20`` and ``h200``, ``gb200`` and ``gb300``) is never taken
for one of them.  Unknown names raise ``ConfigError`` naming every close entry.
"""
from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from importlib import resources

from ..core.errors import ConfigError
from ..core.roofline.hardware import Hardware, ModelSpec
from ..core.roofline.kv_transfer import Link, custom_link, parse_gb_s
from ..core.roofline.modelbytes import DTYPE_BYTES, bytes_per_param, kv_elem_bytes

__all__ = ["DTYPE_BYTES", "all_hardware", "hardware", "custom_hardware",
           "all_models", "model", "find_hardware", "ConfigModel", "config_models", "model_entry", "all_links", "link",
           "resolve_link"]

CATALOG_PATH = "pytest_llm_latency/roofline/hardware.yaml"


def _norm(name: str) -> str:
    return "".join(ch for ch in str(name).lower() if ch.isalnum())


@functools.lru_cache(maxsize=1)
def _raw() -> dict:
    import yaml

    text = resources.files("pytest_llm_latency.roofline").joinpath("hardware.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("devices"), dict):
        raise ConfigError(f"{CATALOG_PATH}: expected a 'devices:' mapping")
    return data


def _number(d: dict, key: str, where: str, required: bool = True) -> float | None:
    v = d.get(key)
    if v is None and not required:
        return None
    try:  # YAML 1.1 reads 8.03e9 (no sign in the exponent) as a string
        value = float(v) if v is not None and not isinstance(v, bool) else -1.0
    except (TypeError, ValueError):
        value = -1.0
    if not 0 < value < float("inf"):
        raise ConfigError(f"{CATALOG_PATH}: {where}.{key} must be a positive number, got {v!r}")
    return value


def _required(d: dict, key: str, where: str) -> float:
    value = _number(d, key, where)
    assert value is not None  # required: _number raised instead
    return value


def _hardware_from_entry(key: str, d: dict) -> Hardware:
    where = f"devices.{key}"
    if not isinstance(d, dict):
        raise ConfigError(f"{CATALOG_PATH}: {where} must be a mapping")
    if not str(d.get("source") or "").strip():
        raise ConfigError(f"{CATALOG_PATH}: {where} has no source; every figure must name its datasheet")
    return Hardware(
        key=key, name=str(d.get("name", key)), mem_bandwidth_gb_s=_required(d, "mem_bandwidth_gb_s", where),
        peak_bf16_tflops=_number(d, "peak_bf16_tflops", where, required=False),
        memory_gb=_number(d, "memory_gb", where, required=False), source=str(d["source"]),
        aliases=tuple(str(a) for a in d.get("aliases") or ()),
        peak_tflops_by_dtype=_by_dtype(d, where))


def _by_dtype(d: dict, where: str) -> tuple[tuple[str, float], ...]:
    table = d.get("peak_tflops_by_dtype") or {}
    if not isinstance(table, dict):
        raise ConfigError(f"{CATALOG_PATH}: {where}.peak_tflops_by_dtype must be a mapping like {{fp8: 1979}}")
    return tuple((str(k).lower(), _required(table, k, f"{where}.peak_tflops_by_dtype")) for k in table)


@functools.lru_cache(maxsize=1)
def all_hardware() -> dict[str, Hardware]:
    return {key: _hardware_from_entry(key, d) for key, d in _raw()["devices"].items()}


def _names(item) -> list[str]:
    key = getattr(item, "key", None)
    return [n for n in (key, item.name, *item.aliases) if n]


def _find(name: str, table: dict) -> object | None:
    """The entry whose key, display name or an alias equals ``name`` once normalized; else None.
    Never a near match: ``h20`` is not ``h200``, whatever else the table holds."""
    wanted = _norm(name)
    return next((value for key, value in table.items() if any(_norm(n) == wanted for n in (key, *_names(value)))),
                None)


# Leading vendor words, set aside when scoring suggestions: every nvidia-smi name starts with
# "NVIDIA", which made "NVIDIA H800" look like every NVIDIA entry at once.
_VENDOR_WORDS = ("nvidia", "geforce", "tesla", "amd", "instinct", "intel", "apple")


def _stem(norm: str) -> str:
    word = next((w for w in _VENDOR_WORDS if norm.startswith(w) and len(norm) > len(w)), None)
    return norm if word is None else _stem(norm[len(word):])


def close_matches(name: str, table: dict, n: int | None = None, cutoff: float = 0.6) -> list[str]:
    """Catalog keys whose key, display name or an alias look like ``name``, the closest first:
    every key scoring at least ``cutoff`` (difflib's ratio, vendor words aside), so near-twins
    (``gb20``: gb200 and gb300; ``mi35x``: mi350x, mi355x and mi325x) are all named, none
    dropped for another; at most ``n`` when given.  Suggestions only: lookups never use them."""
    wanted = _stem(_norm(name))
    scored: list[tuple[float, int, str]] = []
    for i, (key, value) in enumerate(table.items()):
        score = max(difflib.SequenceMatcher(None, wanted, _stem(_norm(alias))).ratio()
                    for alias in (key, *_names(value)))
        if score >= cutoff:
            scored.append((-score, i, key))
    keys = [key for _, _, key in sorted(scored)]
    return keys if n is None else keys[:n]


def _lookup(kind: str, name: str, table: dict) -> object:
    found = _find(name, table)
    if found is not None:
        return found
    close = close_matches(name, table)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"unknown {kind} {name!r}{hint} (known: {', '.join(table)})")


def find_hardware(name: str) -> Hardware | None:
    """The catalog entry for ``name`` (key, display name or alias), or None."""
    return _find(name, all_hardware())  # type: ignore[return-value]


def hardware(name: str) -> Hardware:
    return _lookup("hardware", name, all_hardware())  # type: ignore[return-value]


def custom_hardware(mem_bandwidth_gb_s: float, name: str | None = None,
                    peak_bf16_tflops: float | None = None) -> Hardware:
    """Hardware given by an explicit bandwidth figure instead of a catalog name."""
    if isinstance(mem_bandwidth_gb_s, bool) or not isinstance(mem_bandwidth_gb_s, (int, float)) \
            or not mem_bandwidth_gb_s > 0 or mem_bandwidth_gb_s == float("inf"):
        raise ConfigError(f"mem_bandwidth_gb_s must be a positive number of GB/s, got {mem_bandwidth_gb_s!r}")
    label = name or f"custom {mem_bandwidth_gb_s:g} GB/s"
    return Hardware(key="custom", name=label, mem_bandwidth_gb_s=float(mem_bandwidth_gb_s),
                    peak_bf16_tflops=peak_bf16_tflops, source="explicit mem_bandwidth_gb_s")


def _model_from_entry(key: str, d: dict) -> ModelSpec:
    where = f"models.{key}"
    dtype = d.get("dtype", "fp16")
    try:
        return ModelSpec(
            name=str(d.get("name", key)), params=_required(d, "params", where),
            weight_bytes_per_param=bytes_per_param(dtype, where=f"{CATALOG_PATH}: {where}.dtype"),
            layers=int(d["layers"]), kv_heads=int(d["kv_heads"]), head_dim=int(d["head_dim"]),
            kv_bytes_per_elem=kv_elem_bytes(d.get("kv_dtype"), dtype, where=f"{CATALOG_PATH}: {where}.kv_dtype"),
            total_params=_number(d, "total_params", where, required=False),
            max_model_len=int(d.get("max_model_len", 131072)), source=str(d.get("source", "")),
            aliases=tuple(str(a) for a in d.get("aliases") or ()),
            experts=int(d.get("experts", 0)), experts_per_token=int(d.get("experts_per_token", 0)))
    except KeyError as exc:
        raise ConfigError(f"{CATALOG_PATH}: {where} is missing {exc.args[0]}") from None


@dataclass(frozen=True)
class ConfigModel:
    """A catalog model described by its vendor's ``config.json`` (``roofline/configs/``): its bytes
    come from the same per-architecture arithmetic as ``config:`` (``core.roofline.archs``)."""

    key: str
    name: str
    config_file: str
    repo: str
    aliases: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return f"catalog {self.key}: {self.repo} config.json (roofline/configs/{self.config_file})"

    def config(self) -> dict:
        import json

        path = resources.files("pytest_llm_latency.roofline").joinpath("configs").joinpath(self.config_file)
        return json.loads(path.read_text("utf-8"))


def _config_model_from_entry(key: str, d: dict) -> ConfigModel:
    where = f"models.{key}"
    for k in ("config", "repo"):
        if not str(d.get(k) or "").strip():
            raise ConfigError(f"{CATALOG_PATH}: {where} is missing {k}")
    return ConfigModel(key=key, name=str(d.get("name", key)), config_file=str(d["config"]), repo=str(d["repo"]),
                       aliases=tuple(str(a) for a in d.get("aliases") or ()))


@functools.lru_cache(maxsize=1)
def all_models() -> dict[str, ModelSpec]:
    """The catalog's parameter-count models (``params`` entries; the reference target's models)."""
    return {key: _model_from_entry(key, d) for key, d in (_raw().get("models") or {}).items() if "config" not in d}


@functools.lru_cache(maxsize=1)
def config_models() -> dict[str, ConfigModel]:
    """The catalog's models described by a vendor config.json."""
    return {key: _config_model_from_entry(key, d) for key, d in (_raw().get("models") or {}).items() if "config" in d}


def model_entry(name: str) -> ModelSpec | ConfigModel:
    """Any catalog model: a parameter-count entry or a vendor-config one."""
    return _lookup("model", name, {**all_models(), **config_models()})  # type: ignore[return-value]


def model(name: str) -> ModelSpec:
    """A parameter-count catalog model (what the reference target serves)."""
    entry = model_entry(name)
    if isinstance(entry, ConfigModel):
        raise ConfigError(f"model {name!r} is described by its vendor config ({entry.source}), not by a parameter "
                          f"count; here a parameter-count model is needed ({', '.join(all_models())})")
    return entry


def _link_from_entry(key: str, d: dict) -> Link:
    where = f"links.{key}"
    if not isinstance(d, dict):
        raise ConfigError(f"{CATALOG_PATH}: {where} must be a mapping")
    if not str(d.get("source") or "").strip():
        raise ConfigError(f"{CATALOG_PATH}: {where} has no source; every figure must name its specification")
    return Link(key=key, name=str(d.get("name", key)), gb_s=_required(d, "gb_s", where), source=str(d["source"]),
                aliases=tuple(str(a) for a in d.get("aliases") or ()))


@functools.lru_cache(maxsize=1)
def all_links() -> dict[str, Link]:
    """The interconnects a disaggregated deployment ships KV over (``links:``; issue 37's transfer floor)."""
    return {key: _link_from_entry(key, d) for key, d in (_raw().get("links") or {}).items()}


def link(name: str) -> Link:
    return _lookup("link", name, all_links())  # type: ignore[return-value]


def resolve_link(value, where: str) -> Link:
    """``kv_link`` / ``pd_link``: a catalog key (``ib-ndr``, ``nvlink-4``...) or a bandwidth in GB/s
    (``25``); an unknown key names the close ones, a bandwidth <= 0 is refused (``where`` says where)."""
    gb_s = parse_gb_s(value, where)
    if gb_s is not None:
        return custom_link(gb_s)
    try:
        return link(str(value))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}; or give the link's bandwidth in GB/s (one direction), e.g. 25") \
            from None
