"""Wire the roofline gate into a latency test.

Sources, highest first: marker (``min_decode_efficiency=``, ``hardware=``) >
CLI > env > ini (``--llm-latency-hardware``, ``--llm-latency-min-efficiency``)
> the YAML ``roofline:`` mapping.  The gate runs when any of them asks for it;
with no ``min_efficiency`` it only reports the efficiency.

Model bytes come from (first found): ``model_bytes``; ``config`` (an HF
config.json); ``gguf`` (a GGUF file); ``params`` + ``dtype``/``bits``;
``model`` (a catalog name); the reference target's own model; a llama.cpp
server's ``/v1/models`` meta.  Hardware: a catalog name, ``auto``,
``local-cpu``, ``mem_bandwidth_gb_s``, or the reference target's device.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .core.errors import ConfigError
from .core.result import WorkloadResult
from .core.workload import Workload, did_you_mean

ROOFLINE_KEYS = ("hardware", "mem_bandwidth_gb_s", "tensor_parallel", "min_efficiency", "model", "params", "dtype",
                 "bits", "layers", "kv_heads", "head_dim", "kv_dtype", "config", "gguf", "model_bytes", "batch")
LOCAL_HARDWARE = ("auto", "local-cpu", "localcpu", "local_cpu")


def validate_roofline_spec(spec: Mapping[str, Any], where: str) -> None:
    """Collection-time checks: unknown keys, unknown hardware, bad thresholds."""
    from . import catalog

    for key in spec:
        if key not in ROOFLINE_KEYS:
            raise ConfigError(f"{where}.{key}: unknown roofline key {key!r}{did_you_mean(key, ROOFLINE_KEYS)} -- "
                              f"allowed: {', '.join(ROOFLINE_KEYS)}")
    hw = spec.get("hardware")
    if hw is not None and str(hw).lower() not in LOCAL_HARDWARE:
        try:
            catalog.hardware(str(hw))
        except ConfigError as exc:
            raise ConfigError(f"{where}.hardware: {exc}; or use auto, local-cpu or mem_bandwidth_gb_s") from None
    me = spec.get("min_efficiency")
    if me is not None and (isinstance(me, bool) or not isinstance(me, (int, float)) or not 0 < me <= 1):
        raise ConfigError(f"{where}.min_efficiency: expected a fraction in (0, 1] such as 0.5, got {me!r}")
    for key in ("params", "mem_bandwidth_gb_s", "model_bytes", "bits"):
        v = spec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
            raise ConfigError(f"{where}.{key}: expected a positive number, got {v!r}")
    for key in ("tensor_parallel", "batch", "layers", "kv_heads", "head_dim"):
        v = spec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ConfigError(f"{where}.{key}: expected a positive integer, got {v!r}")


def _model_bytes(roof: Mapping[str, Any], sess, spec, base_dir: Path, client):
    from .core import modelbytes as mb

    kw = dict(dtype=roof.get("dtype"), bits=roof.get("bits"))
    shape = dict(layers=roof.get("layers"), kv_heads=roof.get("kv_heads"), head_dim=roof.get("head_dim"),
                 kv_dtype=roof.get("kv_dtype"))
    if roof.get("model_bytes"):
        kv = mb.kv_from_shape(shape["layers"], shape["kv_heads"], shape["head_dim"],
                              mb.kv_elem_bytes(shape["kv_dtype"], roof.get("dtype")))
        return mb.ModelBytes(weight_bytes=float(roof["model_bytes"]), kv_bytes_per_token=kv,
                             source="roofline.model_bytes")
    if roof.get("config"):
        path = base_dir / str(roof["config"])
        try:
            cfg = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"roofline.config: cannot read HF config {path}: {exc}") from None
        return mb.model_bytes_from_hf_config(cfg, kv_dtype=shape["kv_dtype"], where=str(path), **kw)
    if roof.get("gguf"):
        from .gguf_reader import model_bytes_from_gguf

        return model_bytes_from_gguf(base_dir / str(roof["gguf"]), kv_dtype=shape["kv_dtype"])
    if roof.get("params"):
        if kw["dtype"] is None and kw["bits"] is None:
            raise ConfigError("roofline.params: give dtype (fp16, bf16, fp8, int4, Q4_K_M, ...) or bits too")
        return mb.model_bytes_from_params(float(roof["params"]), where="roofline.params", **kw, **shape)
    if roof.get("model"):
        from . import catalog

        return catalog.model(str(roof["model"]))
    ref = _reference_config(spec)
    if ref is not None:
        from . import catalog

        return catalog.model(ref.model)
    if client is not None and hasattr(client, "models"):
        payload = {"data": client.models()}
        return mb.model_bytes_from_llamacpp_models(payload, kv_bytes_per_token=None, where=f"{spec.url} /v1/models")
    raise ConfigError("roofline: no model bytes -- give params + dtype, config, gguf or model in the roofline "
                      "mapping (or use a llama.cpp server, which reports them)")


def _reference_config(spec):
    if spec is None or not str(spec.url).startswith("reference://"):
        return None
    from .reference.launch import parse_reference_url

    return parse_reference_url(spec.url)


def gate_for(sess, spec, workload: Workload, res: WorkloadResult, overrides: Mapping[str, Any],
             base_dir: Path | None = None, client=None) -> None:
    from .core.roofline import evaluate_roofline, mean_context
    from .hwdetect import resolve_hardware

    roof = dict(workload.roofline or {})
    s = sess.settings
    asked = roof or overrides or s.get("hardware") is not None or s.get("min_efficiency") is not None
    if not asked or "tpot" not in res.summaries:
        return
    hw_name = s.pick("hardware", marker=overrides.get("hardware"), yaml=roof.get("hardware"))
    min_eff = s.pick("min_efficiency", marker=overrides.get("min_decode_efficiency"), yaml=roof.get("min_efficiency"),
                     marker_source="llm_slo(min_decode_efficiency=)", yaml_source="roofline.min_efficiency")
    try:
        ref = _reference_config(spec)
        name = hw_name.value or (ref.hardware if ref and not roof.get("mem_bandwidth_gb_s") else None)
        hardware = resolve_hardware(name, mem_bandwidth_gb_s=roof.get("mem_bandwidth_gb_s") if not hw_name.value
                                    else None, tp=int(roof.get("tensor_parallel", 1)), where=hw_name.source)
        model = _model_bytes(roof, sess, spec, base_dir or Path.cwd(), client)
        tpot = res.summaries["tpot"]
        result = evaluate_roofline(hardware, model, context=mean_context(workload.prompt_tokens, workload.output_tokens),
                                   tpot_p50_ms=tpot.p50, tpot_p95_ms=tpot.p95, min_efficiency=min_eff.value,
                                   batch=int(roof.get("batch", workload.concurrency)))
    except ConfigError as exc:
        if min_eff.value is None and not roof:
            res.notes.append(f"roofline not evaluated: {exc}")
            return
        res.errors.append(f"roofline gate configuration error: {exc}")
        return
    res.extra.update({k: v for k, v in result.as_properties().items() if v is not None})
    res.extra["roofline_status"] = result.status
    if result.status == "fail":
        res.failed_checks.append(result.message)
    elif result.status == "config_error":
        res.errors.append(result.message)
    else:
        res.notes.append(result.message)
