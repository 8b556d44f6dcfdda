"""Parse and validate ``*.slo.yaml`` files, with file:line in every error.

The JSON Schema in ``data/slo.schema.json`` describes the same format for
editors (``# yaml-language-server: $schema=...``); this module is the
validator the plugin runs, so its errors can say where and how to fix.
Everything that can be checked without a server is checked here, at
collection time: keys, types, the ``target:`` section, duplicate keys (PyYAML
would silently keep the last), and whether ``samples`` can support every
percentile budget.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..core.errors import ConfigError
from ..core.spec.renamed_keys import upgrade_roofline, upgrade_workload
from ..core.result.sample_size import check_min_samples
from ..core.spec.workload import Workload, did_you_mean, make_workload, with_ray, with_statistics, with_workers
from .ab import check

TOP_KEYS = ("target", "workloads", "roofline")
TARGET_KEYS = ("url", "model", "api", "command", "ready", "startup_timeout", "env", "baseline_target", "ray",
               "prefill_metrics_url", "decode_metrics_url", "kv_link")  # the last three: a disaggregated target


@dataclass
class SloSpec:
    path: str
    target: dict[str, Any] = field(default_factory=dict)
    workloads: list[Workload] = field(default_factory=list)
    lines: dict[tuple, int] = field(default_factory=dict)

    def where(self, path: tuple) -> str:
        return locate(self.path, self.lines, path)


def locate(filename: str, lines: Mapping[tuple, int], path: tuple) -> str:
    """'file:LINE key.path' for the deepest known prefix of ``path``."""
    p = tuple(str(k) for k in path)  # the line map is keyed by the YAML text of each key
    while p and p not in lines:
        p = p[:-1]
    line = lines.get(p)
    keys = ".".join(str(k) for k in path) or "(top level)"
    return f"{filename}:{line} {keys}" if line else f"{filename} {keys}"


def _line_map(node, filename: str, path=(), out=None, seen_nodes=None) -> dict[tuple, int]:
    """Key path → line, and reject duplicate keys (PyYAML silently keeps the last).

    A node reached again through an alias is not walked twice: that keeps recursive
    anchors and "billion laughs" files from recursing forever or exploding."""
    import yaml

    out = {} if out is None else out
    seen_nodes = set() if seen_nodes is None else seen_nodes
    out.setdefault(path, node.start_mark.line + 1)
    if id(node) in seen_nodes:
        return out
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for k, v in node.value:
            key = str(k.value) if isinstance(k, yaml.ScalarNode) else f"<{k.id} key>"
            line = k.start_mark.line + 1
            if key in seen and key != "<<":
                keys = ".".join(path + (key,))
                raise ConfigError(f"{filename}:{line} {keys}: duplicate key {key!r} (first at line {seen[key]}); "
                                  f"YAML would silently keep only the last one -- remove or rename one of them")
            seen[key] = line
            out[path + (key,)] = line
            _line_map(v, filename, path + (key,), out, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _line_map(v, filename, path + (str(i),), out, seen_nodes)
    return out


def decode_text(raw: bytes, filename: str) -> str:
    """UTF-8 bytes → text; a bad byte is reported with its line and column."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"{filename}:{line}:{col}: not valid UTF-8 (byte 0x{raw[exc.start]:02x}: {exc.reason}) "
                          f"-- save the file as UTF-8") from None


def _loader():
    """SafeLoader that also reads YAML 1.2 floats: PyYAML (YAML 1.1) takes ``8.03e9`` and
    ``16.06e9`` -- no dot-digit or sign in the exponent -- for strings."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))
    return Loader


def load_yaml(text: str | bytes, filename: str) -> tuple[Any, dict[tuple, int]]:
    import yaml

    if isinstance(text, bytes):
        text = decode_text(text, filename)
    try:
        loader = _loader()
        node = yaml.compose(text, Loader=loader)
        data = yaml.load(text, Loader=loader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{filename}:{mark.line + 1}:{mark.column + 1}" if mark else filename
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: YAML syntax error: {problem} -- check indentation and quoting "
                          f"near that line") from None
    except RecursionError:
        raise ConfigError(f"{filename}: YAML nested too deeply -- an SLO file is a few levels of mappings") from None
    return data, (_line_map(node, filename) if node is not None else {})


def _check_target(target: Mapping[str, Any], where) -> None:
    """Collection-time checks of ``target:``; precedence is resolved later (session.target_from)."""
    from .options import APIS, BY_NAME

    url = target.get("url")
    if url is not None:
        try:
            BY_NAME["url"].parse(url)  # not a string: a TypeError
        except (TypeError, ValueError):
            from ..core.redact import redact_url

            raise ConfigError(f"{where(('url',))}: {redact_url(repr(url))} is not a server URL: "
                              f"expected {BY_NAME['url'].expect}, e.g. 'url: http://localhost:8000'") from None
    for key in ("prefill_metrics_url", "decode_metrics_url", "kv_link"):  # a disaggregated target (issue 37)
        v = target.get(key)
        if v is None:
            continue
        try:
            BY_NAME[key].parse(v)
        except ConfigError as exc:  # kv_link: did you mean ...
            raise ConfigError(f"{where((key,))}: {exc}") from None
        except (TypeError, ValueError):
            from ..core.redact import redact_url

            raise ConfigError(f"{where((key,))}: {redact_url(repr(v))} is not valid: expected "
                              f"{BY_NAME[key].expect}") from None
    for key in ("model", "ready"):
        v = target.get(key)
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise ConfigError(f"{where((key,))}: expected a non-empty string, got {v!r}")
    ready = target.get("ready")
    if ready is not None and not ready.startswith("/"):
        raise ConfigError(f"{where(('ready',))}: expected a path on the server such as '/health', got {ready!r}")
    api = target.get("api")
    if api is not None and api not in APIS:
        raise ConfigError(f"{where(('api',))}: unknown api {api!r}{did_you_mean(api, APIS)} -- use one of "
                          f"{', '.join(APIS)}")
    cmd = target.get("command")
    if cmd is not None and (not isinstance(cmd, list) or not cmd
                            or not all(isinstance(c, str) and c for c in cmd)):
        raise ConfigError(f"{where(('command',))}: expected a list of strings like "
                          f"['llama-server', '--port', '{{port}}'], got {type(cmd).__name__} {cmd!r}"
                          + (" -- split the command into its arguments" if isinstance(cmd, str) else ""))
    st = target.get("startup_timeout")
    if st is not None and (isinstance(st, bool) or not isinstance(st, (int, float)) or not 0 < st < float("inf")):
        raise ConfigError(f"{where(('startup_timeout',))}: expected seconds > 0 such as 120, got {st!r}")
    env = target.get("env")
    if env is not None and (not isinstance(env, dict) or
                            not all(isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in env.items())):
        got = (f"a mapping with keys {sorted(map(str, env))}" if isinstance(env, dict)  # values may be tokens
               else type(env).__name__)
        raise ConfigError(f"{where(('env',))}: expected a mapping of variable name to value (a string or number) like "
                          f"{{CUDA_VISIBLE_DEVICES: '0'}}, got {got}")


def parse_slo_file(text: str | bytes, filename: str,
                   samples_override: int | str | None = None, samples_source: str = "--llm-latency-samples",
                   confidence_override: float | str | None = None, workers_override: int | str | None = None,
                   workers_source: str = "--llm-latency-workers", ray_override: str | None = None,
                   ray_source: str = "--llm-latency-ray") -> SloSpec:
    """Parse one SLO file.  ``samples_override`` (``--llm-latency-samples`` and friends: a number
    or ``auto``) and ``confidence_override`` (``--llm-latency-confidence``...) replace every
    workload's own, before the check that its samples can support each budget; ``workers_override``
    (``--llm-latency-workers``...) every open or closed loop's worker processes; ``ray_override``
    (``--llm-latency-ray``...) the Ray cluster of every workload workers can spread, over the workload's
    and the target's ``ray:`` (the target's applies to those of the file's workloads that name none)."""
    data, lines = load_yaml(text, filename)
    spec = SloSpec(path=filename, lines=lines)
    if not isinstance(data, dict):
        raise ConfigError(f"{spec.where(())}: an SLO file must be a mapping with a 'workloads:' key, "
                          f"got {type(data).__name__ if data is not None else 'an empty file'} -- start from "
                          f"'workloads: {{chat: {{class: chat}}}}'")
    for key in data:
        if key not in TOP_KEYS:
            raise ConfigError(f"{spec.where((key,))}: unknown top-level key {key!r}{did_you_mean(key, TOP_KEYS)}"
                              f" -- allowed: {', '.join(TOP_KEYS)}")
    target = data.get("target") or {}
    if not isinstance(target, dict):
        raise ConfigError(f"{spec.where(('target',))}: expected a mapping like {{url: http://localhost:8000}}, "
                          f"got {type(target).__name__}")
    for key in target:
        if key not in TARGET_KEYS:
            raise ConfigError(f"{spec.where(('target', key))}: unknown key {key!r}{did_you_mean(key, TARGET_KEYS)}"
                              f" -- allowed: {', '.join(TARGET_KEYS)}")
    _check_target(target, lambda p: spec.where(("target",) + p))
    # the file's A/B baseline (README "Deploy gate"): every workload's, unless it names its own
    file_baseline = target.get("baseline_target")
    if file_baseline is not None:
        check(file_baseline, spec.where(("target",)))
    spec.target = {k: v for k, v in target.items() if k not in ("baseline_target", "ray")}
    file_ray = target.get("ray")
    workloads = data.get("workloads")
    if not isinstance(workloads, dict) or not workloads:
        got = "nothing" if not workloads else type(workloads).__name__
        raise ConfigError(f"{spec.where(('workloads',))}: expected a mapping of workload name to spec, e.g. "
                          f"'workloads: {{chat: {{class: chat}}}}', got {got}")
    file_roofline = data.get("roofline")
    if file_roofline is not None and not isinstance(file_roofline, dict):
        raise ConfigError(f"{spec.where(('roofline',))}: expected a mapping like {{min_decode_efficiency: 0.5}}")
    file_roofline = upgrade_roofline(file_roofline, spec.where)  # old keys warned about once, for the file
    for name, wspec in workloads.items():
        if wspec is None:
            wspec = {}
        if not isinstance(wspec, dict):
            raise ConfigError(f"{spec.where(('workloads', name))}: expected a mapping (class, prompt_tokens, "
                              f"output_tokens, samples, slo, ...), got {type(wspec).__name__}")
        where = lambda p, n=name: spec.where(("workloads", n) + p)  # noqa: E731
        own_roofline = "roofline" in wspec
        wspec = upgrade_workload(wspec, where)  # old keys in their new places (a moved slo key may add roofline)
        if file_roofline and not own_roofline:  # the file's, under what the workload moved there
            shared = {k: v for k, v in file_roofline.items()  # a prefill floor: for the prompt sweeps only
                      if k != "min_prefill_efficiency" or "prompt_sweep" in wspec}
            wspec = {**wspec, "roofline": {**shared, **(wspec.get("roofline") or {})}}
        if file_baseline is not None and "baseline_target" not in wspec:  # workload > file; null opts out
            wspec = {**wspec, "baseline_target": file_baseline}
        w = make_workload(str(name), wspec, where)
        if (workloads[name] or {}).get("baseline_target") is not None:  # the file's was checked above
            check(w.baseline_target, where(()))
        if samples_override is not None or confidence_override is not None:
            conf = {} if confidence_override is None else {"confidence": confidence_override}
            w = with_statistics(w, conf, where, samples_override)
        # CLI > env > ini > file: the engine's loops (core.spec.load_spec.with_workers)
        if workers_override is not None:
            w = with_workers(w, workers_override, f"{where(())} (workers from {workers_source})", run_wide=True)
        if ray_override is not None or (file_ray is not None and w.ray is None):  # CLI > env > ini > workload > target
            ray_where = (f"{where(())} (ray from {ray_source})" if ray_override is not None
                         else spec.where(("target", "ray")))
            w = with_ray(w, ray_override if ray_override is not None else file_ray, ray_where, run_wide=True)
        if w.ray is not None:
            from ..client.placement.ray.cluster import require_ray

            require_ray(where(("ray",)) if ray_override is None and "ray" in wspec else
                        f"{where(())} (ray from {ray_source})" if ray_override is not None
                        else spec.where(("target", "ray")))
        samples_where = (where(("samples",)) if samples_override is None else
                         f"{where(())} (samples {samples_override} from {samples_source})")
        check_min_samples(w, samples_where)
        spec.workloads.append(w)
    return spec
