"""Wire the roofline gate into a latency test.

Sources, highest first: marker (``min_decode_efficiency=``, ``hardware=``) >
CLI > env > ini (``--llm-latency-hardware``, ``--llm-latency-min-decode-efficiency``)
> the YAML ``roofline:`` mapping.  The gate runs when any of them asks for it;
with no ``min_decode_efficiency`` it only reports the efficiency.

Model bytes come from (first found): ``model_bytes``; ``config`` (an HF
config.json); ``gguf`` (a GGUF file); ``params`` + ``dtype``/``bits``;
``model`` (a catalog name); the reference target's own model; a llama.cpp
server's ``/v1/models`` meta.  Hardware: a catalog name, ``auto``,
``local-cpu``, ``mem_bandwidth_gb_s``, or the reference target's device.

A speculating server (``res.spec_decode`` gives tokens per step) is judged per engine step
(``core.roofline.roofline_spec``), the drafter's bytes from ``roofline.draft`` (``roofline.resolve.resolve_draft``;
not set: left out, with a caveat).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..core.errors import ConfigError
from ..core.roofline.roofline_requests import NO_SERVER_GAUGE
from ..core.result.result import WorkloadResult
from ..core.spec.workload import Workload, did_you_mean

ROOFLINE_KEYS = ("hardware", "mem_bandwidth_gb_s", "tensor_parallel", "min_decode_efficiency", "model", "params",
                 "dtype", "bits", "layers", "kv_heads", "head_dim", "kv_dtype", "kv_bytes_per_token", "window",
                 "config", "gguf", "model_bytes",
                 "batch", "min_prefill_efficiency", "peak_tflops", "hidden_size",  # these three: prefill (MFU)
                 "draft",  # speculative decoding / MTP: the drafter's bytes (roofline.resolve.validate_draft)
                 "efficiency_of")  # datasheet (default) | measured: which bandwidth the floor applies to
LOCAL_HARDWARE = ("auto", "local-cpu", "localcpu", "local_cpu", "local-gpu", "localgpu", "local_gpu")
EFFICIENCY_OF = ("datasheet", "measured")


def validate_roofline_spec(spec: Mapping[str, Any], where: str) -> None:
    """Collection-time checks: unknown keys, unknown hardware, bad thresholds, the drafter."""
    from ..roofline import catalog
    from ..roofline.resolve import validate_draft

    for key in spec:
        if key not in ROOFLINE_KEYS:
            raise ConfigError(f"{where}.{key}: unknown roofline key {key!r}{did_you_mean(key, ROOFLINE_KEYS)} -- "
                              f"allowed: {', '.join(ROOFLINE_KEYS)}")
    hw = spec.get("hardware")
    if hw is not None and str(hw).lower() not in LOCAL_HARDWARE:
        try:
            catalog.hardware(str(hw))
        except ConfigError as exc:
            raise ConfigError(f"{where}.hardware: {exc}; or use auto, local-cpu, local-gpu or mem_bandwidth_gb_s") \
                from None
    basis = spec.get("efficiency_of")
    if basis is not None and basis not in EFFICIENCY_OF:
        raise ConfigError(f"{where}.efficiency_of: expected datasheet or measured, got {basis!r}")
    for key in ("min_decode_efficiency", "min_prefill_efficiency"):
        me = spec.get(key)
        if me is not None and (isinstance(me, bool) or not isinstance(me, (int, float)) or not 0 < me <= 1):
            raise ConfigError(f"{where}.{key}: expected a fraction in (0, 1] such as 0.5, got {me!r}")
    for key in ("params", "mem_bandwidth_gb_s", "model_bytes", "bits", "peak_tflops", "kv_bytes_per_token"):
        v = spec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
            raise ConfigError(f"{where}.{key}: expected a positive number, got {v!r}")
    for key in ("tensor_parallel", "batch", "layers", "kv_heads", "head_dim", "hidden_size", "window"):
        v = spec.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ConfigError(f"{where}.{key}: expected a positive integer, got {v!r}")
    validate_draft(spec.get("draft"), f"{where}.draft")


SOURCE_KEYS = ("model", "model_bytes", "params", "config", "gguf")
SHAPE_KEYS = ("dtype", "bits", "layers", "kv_heads", "head_dim", "kv_dtype", "kv_bytes_per_token", "window")


def _model_bytes(roof: Mapping[str, Any], spec, base_dir: Path, client):
    """An explicit source in the mapping (see ``roofline.resolve.resolve_model_bytes``), else the
    reference target's catalog model, else a llama.cpp server's ``/v1/models`` meta."""
    if any(roof.get(k) is not None for k in SOURCE_KEYS):
        from ..roofline.resolve import resolve_model_bytes

        kw = {k: roof.get(k) for k in SOURCE_KEYS + SHAPE_KEYS}
        for k in ("config", "gguf"):
            if kw[k] is not None:
                kw[k] = str(base_dir / Path(str(kw[k])).expanduser())
        return resolve_model_bytes(**kw, names={k: f"roofline.{k}" for k in SOURCE_KEYS + SHAPE_KEYS})
    ref = _reference_config(spec)
    if ref is not None:
        from ..roofline import catalog

        return catalog.model(ref.model)
    if client is not None and hasattr(client, "models"):
        return _llamacpp_model_bytes(roof, spec, client)
    raise ConfigError("roofline: no model bytes -- give params + dtype, config, gguf or model in the roofline "
                      "mapping (or use a llama.cpp server, which reports them)")


LLAMACPP_KV_NOT_COUNTED = ("llama.cpp /v1/models meta gives weights only; set roofline.layers/kv_heads/head_dim "
                           "or roofline.kv_bytes_per_token (+ window) "
                           "or roofline.gguf to include it")


def _llamacpp_model_bytes(roof: Mapping[str, Any], spec, client):
    """Weights from llama.cpp ``/v1/models`` meta; the KV cache from ``layers``/``kv_heads``/``head_dim``
    when given, else left out of the ceiling and said so (``ModelBytes.kv_not_counted``)."""
    from dataclasses import replace

    from ..core.roofline.modelbytes import kv_elem_bytes, kv_from_shape, model_bytes_from_llamacpp_models

    mb = model_bytes_from_llamacpp_models({"data": client.models()}, where=f"{spec.url} /v1/models")
    if roof.get("kv_bytes_per_token") is not None:
        from ..roofline.resolve import explicit_kv_layout

        layout = explicit_kv_layout(roof.get("kv_bytes_per_token"), roof.get("window"),
                              tuple(roof.get(k) for k in ("layers", "kv_heads", "head_dim", "kv_dtype")),
                              {k: f"roofline.{k}" for k in ("kv_bytes_per_token", "window", "layers", "kv_heads",
                                                            "head_dim", "kv_dtype")})
        return mb.with_kv(layout.growth_per_token or None, layout=layout)
    kv = kv_from_shape(roof.get("layers"), roof.get("kv_heads"), roof.get("head_dim"),
                       kv_elem_bytes(roof.get("kv_dtype"), where="roofline.kv_dtype"),
                       where="roofline.layers/kv_heads/head_dim")
    if kv is not None:
        return mb.with_kv(kv)
    return replace(mb, kv_bytes_per_token=0.0, kv_not_counted=LLAMACPP_KV_NOT_COUNTED)


def measure_with_fresh_probe(hardware, evaluate, reprobe):
    """``evaluate(hardware)``; when a measured (``local-cpu``) figure puts decode above the ceiling
    (> 1.05), probe once more, bypassing the cache, before calling it a configuration error: a
    figure taken while other processes competed for the memory bus is not the machine's limit.
    A higher fresh figure is used (and cached by ``reprobe`` if it passes the caching rules)."""
    from dataclasses import replace

    result = evaluate(hardware)
    if result.status != "config_error" or hardware.key != "local-cpu":
        return result
    first = hardware.mem_bandwidth_gb_s
    try:
        fresh = reprobe()
    except ConfigError as exc:
        return evaluate(replace(hardware, note="; ".join(x for x in (hardware.note, f"probing again failed: {exc}")
                                                        if x)))
    said = (f"decode was {result.efficiency:.2f}x the ceiling at {first:.1f} GB/s"
            f"{' (cached)' if hardware.source.startswith('cached') else ''}, so the bandwidth was probed again: "
            f"{fresh.mem_bandwidth_gb_s:.1f} GB/s")
    if fresh.mem_bandwidth_gb_s <= first:
        return evaluate(replace(hardware, note="; ".join(x for x in (hardware.note, said + ", not higher") if x)))
    return evaluate(replace(fresh, note="; ".join(x for x in (said, fresh.note) if x)))


def preflight(workload: Workload, base_dir: Path) -> None:
    """Read the model bytes and the drafter a workload's ``roofline`` mapping names (a file, a
    catalog entry, a parameter count) before any request is sent, so that a refusal (an unmodelled
    ``model_type``, a missing file, a bad key) ends the test first, naming the file, the key and
    the way out, instead of after a measurement."""
    roof = dict(workload.roofline or {})
    if any(roof.get(k) is not None for k in SOURCE_KEYS):
        _model_bytes(roof, None, base_dir, None)
    _drafter(roof, base_dir)


def _drafter(roof: Mapping[str, Any], base_dir: Path):
    """``roofline.draft`` (YAML, or a marker's / fixture's ``roofline=`` mapping) as a Drafter; None unset."""
    if roof.get("draft") is None:
        return None
    from ..roofline.resolve import resolve_draft

    return resolve_draft(roof["draft"], where="roofline.draft", base_dir=base_dir)


def multi_token_chunks(records) -> tuple[str, ...]:
    """A hint for a configuration error: stream chunks that carried several tokens.  Never evidence
    of speculation by itself (a proxy, a client that fell behind or a stream interval group tokens)."""
    chunks = [c for r in records for c in getattr(r, "chunks", ())]
    multi = sum(1 for c in chunks if c.tokens > 1)
    if not multi:
        return ()
    return (f"{multi} of {len(chunks)} stream chunks carried more than one token: a speculating server's steps "
            "look like this, but so do a proxy, a client that fell behind or a server's stream interval, so "
            "they are not evidence (and never a pass)",)


def _reference_config(spec):
    if spec is None or not str(spec.url).startswith("reference://"):
        return None
    from ..targets.reference.launch import parse_reference_url

    return parse_reference_url(spec.url)


def _per_request(workload: Workload, res: WorkloadResult, roof: Mapping[str, Any]):
    """(per-request decodes or None, batch, where the batch came from) -- ``core.roofline.roofline_requests``:
    varied lengths get per-request ceilings; an open loop (without ``roofline.batch``) the batch the
    server reported running, else the client's mean in flight; otherwise the configured concurrency."""
    from ..core.roofline.roofline_requests import open_loop_batch, request_decodes, varied_lengths

    decodes = request_decodes(res.records, workload.prompt_tokens) if varied_lengths(workload) else None
    open_loop = (workload.load is not None and workload.load.open_loop) or workload.trace is not None
    if roof.get("batch") is None and open_loop:  # a trace replay is an open loop too
        batch, source = open_loop_batch(res.records, res.server.metrics_timeline)
        return decodes or None, batch, source
    return decodes or None, int(roof.get("batch", workload.concurrency)), ""


def prefill_model_of(roof: Mapping[str, Any], spec, base_dir: Path, client, mb=None):
    """A ``PrefillModel`` (for the prefill gate and the decode diagnosis); the attention shape where the
    model's is known; ``mb``: the model bytes already resolved (``_model_bytes``)."""
    from ..core.roofline.prefill import prefill_model
    from ..roofline import catalog

    layers, hidden = roof.get("layers"), roof.get("hidden_size")
    ref = _reference_config(spec)
    name = roof.get("model") or (ref.model if ref is not None and not any(roof.get(k) for k in SOURCE_KEYS) else None)
    cfg = None
    if name:
        entry = catalog.model_entry(str(name))
        if isinstance(entry, catalog.ConfigModel):
            cfg = entry.config()
        else:
            layers, hidden = layers or entry.layers, hidden or (entry.extra or {}).get("hidden_size")
    elif roof.get("config"):
        from ..roofline.resolve import _load_config

        cfg, _ = _load_config(str(base_dir / Path(str(roof["config"])).expanduser()), "roofline.config")
    note = ""
    if cfg is not None:
        from ..core.roofline.archs import attention_shape

        spanning, width, note = attention_shape(cfg)
        layers, hidden = layers or spanning, hidden or width
    elif roof.get("gguf"):
        from ..roofline.gguf_reader import read_gguf

        layers = layers or read_gguf(base_dir / Path(str(roof["gguf"])).expanduser()).layers
    mb = mb or _model_bytes(roof, spec, base_dir, client)
    return prefill_model(mb.name, mb.params, layers, hidden, source=f"{mb.source}; {note}" if note else mb.source)


def _evidence(workload: Workload, res: WorkloadResult, roof: Mapping[str, Any], model, hardware, where):
    """What the run saw besides TPOT, for the decode diagnosis (``core.roofline.decode_diagnosis``): the
    server's running gauge, the loop's shape, TTFT against the declared dtype's compute peak."""
    from ..core.roofline.decode_diagnosis import DecodeEvidence

    timeline = res.server.metrics_timeline or {}
    running = [v for name, pts in timeline.items() if "running" in name or "processing" in name
               for _, v in pts] if isinstance(timeline, dict) else []
    running_max = res.server.server_running_max if res.server.server_running_max is not None else \
        (max(running) if running else None)
    ttft = res.completed.get("ttft")
    flops = peak = None
    prompt = getattr(workload, "prompt_tokens", None)
    try:
        if prompt and getattr(model, "params", None):  # with attention where the shape is known
            spec, base_dir, client = where
            flops = prefill_model_of(roof, spec, base_dir, client, mb=model).flops(float(prompt))
            peak, _ = hardware.peak_tflops(roof.get("dtype"))
    except ConfigError:  # no parameter count: no prefill evidence, said as "possible"
        flops = None
    open_loop = (workload.load is not None and workload.load.open_loop) or workload.trace is not None
    base = res.facts.comparisons[0] if res.facts.comparisons else None  # A/B arm or deploy-gate baseline
    return DecodeEvidence(concurrency=int(workload.concurrency or 1), open_loop=open_loop, running_max=running_max,
                          running_samples=len(running) or (1 if running_max is not None else 0),
                          waiting_max=res.server.server_waiting_max, prompt_tokens=prompt,
                          ttft_ms=ttft.p50 if ttft is not None else None, prefill_flops=flops, peak_tflops=peak,
                          declared_dtype=roof.get("dtype"),
                          baseline_step_ms=base.base_median("tpot") if base else None,
                          baseline_ttft_ms=base.base_median("ttft") if base else None,
                          baseline_label=base.label if base else "")


def _with_served_dtype(result, client):
    """A failed floor's diagnosis with the dtype the server states (llama.cpp ``/props``, Ollama
    ``/api/show``: ``client.server.served_dtype``), asked now that the workload's requests are done."""
    from dataclasses import replace

    from ..client.apis.ollama import OllamaClient
    from ..client.server.served_dtype import served_dtype
    from ..core.roofline.roofline_text import format_roofline

    http, base = getattr(client, "http", None), getattr(client, "base_url", None)
    if result.evidence is None or http is None or not base:
        return result
    said = served_dtype(http, base, getattr(client, "model", None), ollama=isinstance(client, OllamaClient))
    if said is None:
        return result
    judged = replace(result, evidence=replace(result.evidence, server_dtype=said.dtype,
                                              server_dtype_source=said.source))
    return replace(judged, message=format_roofline(judged))


def gate_for(sess, spec, workload: Workload, res: WorkloadResult, overrides: Mapping[str, Any],
             base_dir: Path | None = None, client=None) -> None:
    from ..core.result.facts import GateOutcome
    from ..core.roofline.ceiling import apply_floor, mean_context, measure_roofline
    from ..roofline.hwdetect import resolve_hardware

    roof = dict(workload.roofline or {})
    s = sess.settings
    asked = roof or overrides or s.get("hardware") is not None or s.get("min_decode_efficiency") is not None
    if not asked or not res.records:
        return  # nothing asked, or no sample at all (already an error)
    if "tpot" not in res.completed:  # decode physics: completed requests only (failures are misses in SLOs)
        if any(layer.get("min_decode_efficiency") is not None for layer in (roof, overrides, s)):
            res.facts.gates.append(GateOutcome("roofline", "unjudged", "roofline gate: no decode timing (every "
                                               "request produced < 2 tokens or stopped short), so decode "
                                               "efficiency cannot be judged -- raise output_tokens"))
        return
    hw_name = s.pick("hardware", marker=overrides.get("hardware"), yaml=roof.get("hardware"))
    min_eff = s.pick("min_decode_efficiency", marker=overrides.get("min_decode_efficiency"),
                     yaml=roof.get("min_decode_efficiency"), marker_source="llm_slo(min_decode_efficiency=)",
                     yaml_source="roofline.min_decode_efficiency")
    try:
        ref = _reference_config(spec)
        name = hw_name.value or (ref.hardware if ref and not roof.get("mem_bandwidth_gb_s") else None)
        hardware = resolve_hardware(name, mem_bandwidth_gb_s=roof.get("mem_bandwidth_gb_s") if not hw_name.value
                                    else None, tp=int(roof.get("tensor_parallel", 1)), where=hw_name.source)
        model = _model_bytes(roof, spec, base_dir or Path.cwd(), client)
        tpot = res.completed["tpot"]
        from ..core.spec.lengths import mean_lengths

        # one context for the TPOT percentiles: with length distributions, the requests' mean lengths
        context = mean_context(*mean_lengths(workload, res.records))
        decodes, batch, batch_source = _per_request(workload, res, roof)
        drafter = _drafter(roof, base_dir or Path.cwd())
        from ..core.roofline.roofline_spec import speculates

        spec_decode = res.spec_decode if speculates(res.spec_decode) else None
        hints = () if spec_decode is not None else multi_token_chunks(res.records)

        evidence = _evidence(workload, res, roof, model, hardware, (spec, base_dir or Path.cwd(), client))

        def evaluate(hw):
            return measure_roofline(hw, model, context=context, tpot_p50_ms=tpot.p50, tpot_p95_ms=tpot.p95,
                                    min_efficiency=min_eff.value, batch=batch, spec=spec_decode, drafter=drafter,
                                    hints=hints, decodes=decodes, batch_source=batch_source, evidence=evidence)

        hardware = hardware.judged_on(str(roof.get("efficiency_of") or "datasheet"))
        result = measure_with_fresh_probe(hardware, evaluate, lambda: resolve_hardware(
            "local-cpu", refresh=True, only_if_higher=True, where=hw_name.source))
        if apply_floor(result).status == "fail":  # the floor fails: what the server says it serves
            result = _with_served_dtype(result, client)
    except ConfigError as exc:
        if min_eff.value is None and not roof:
            res.notes.append(f"roofline not evaluated: {exc}")
            return
        res.facts.gates.append(GateOutcome("roofline", "config_error", f"roofline gate configuration error: {exc}"))
        return
    res.roofline.set(**{k: v for k, v in result.as_properties().items() if v is not None}, status=result.status)
    # for the HTML report's roofline chart: the gate's minimum and the ceiling's arithmetic
    from ..core.roofline.roofline_text import format_arithmetic

    res.roofline.arithmetic = format_arithmetic(result.ceiling, result.steps)
    res.roofline.diagnosis = result.diagnosis()
    if min_eff.value is not None:
        res.roofline.min_decode_efficiency = min_eff.value
    # caveats that make the ceiling itself doubtful: notes (warnings) on every run the gate passes
    caveats = []
    if getattr(model, "kv_not_counted", ""):  # ModelBytes; a catalog ModelSpec always counts it
        caveats.append(f"roofline: KV cache not counted ({model.kv_not_counted}): the ceiling is too high")
    if result.ceiling.hardware.note:
        caveats.append(f"roofline hardware note: {result.ceiling.hardware.note}")
    if batch_source and NO_SERVER_GAUGE in batch_source:  # an open loop whose server reports no running gauge
        caveats.append(f"roofline: {batch_source}")
    if result.steps is not None and not result.steps.draft_counted:
        from ..core.roofline.roofline_spec import DRAFT_NOT_COUNTED

        caveats.append(f"roofline: {DRAFT_NOT_COUNTED}" if roof.get("draft") is None
                       else f"roofline: drafter bytes {result.steps.draft}")
    # measured, not judged: core.checks.gates applies the floor (core.roofline.ceiling.apply_floor)
    res.facts.gates.append(GateOutcome("roofline", result.status, result.message, result, tuple(caveats)))
