"""Parse and validate ``*.slo.yaml`` files, with file:line in every error.

The JSON Schema in ``data/slo.schema.json`` describes the same format for
editors (``# yaml-language-server: $schema=...``); this module is the
validator the plugin runs, so its errors can say where and how to fix.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .core.errors import ConfigError
from .core.workload import Workload, did_you_mean, make_workload

TOP_KEYS = ("target", "workloads", "roofline")
TARGET_KEYS = ("url", "model", "api", "command", "ready", "startup_timeout", "env")


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
    p = tuple(path)
    while p and p not in lines:
        p = p[:-1]
    line = lines.get(p)
    keys = ".".join(str(k) for k in path) or "(top level)"
    return f"{filename}:{line} {keys}" if line else f"{filename} {keys}"


def _line_map(node, path=(), out=None) -> dict[tuple, int]:
    import yaml

    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[path + (key,)] = k.start_mark.line + 1
            _line_map(v, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _line_map(v, path + (i,), out)
    return out


def load_yaml(text: str, filename: str) -> tuple[Any, dict[tuple, int]]:
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{filename}:{mark.line + 1}:{mark.column + 1}" if mark else filename
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: YAML syntax error: {problem} -- check indentation and quoting "
                          f"near that line") from None
    return data, (_line_map(node) if node is not None else {})


def parse_slo_file(text: str, filename: str, default_samples: int | None = None) -> SloSpec:
    data, lines = load_yaml(text, filename)
    spec = SloSpec(path=filename, lines=lines)
    if not isinstance(data, dict):
        raise ConfigError(f"{filename}: an SLO file must be a mapping with a 'workloads:' key, "
                          f"got {type(data).__name__}")
    for key in data:
        if key not in TOP_KEYS:
            raise ConfigError(f"{spec.where((key,))}: unknown top-level key {key!r}{did_you_mean(key, TOP_KEYS)}"
                              f" -- allowed: {', '.join(TOP_KEYS)}")
    target = data.get("target") or {}
    if not isinstance(target, dict):
        raise ConfigError(f"{spec.where(('target',))}: expected a mapping like {{url: http://localhost:8000}}")
    for key in target:
        if key not in TARGET_KEYS:
            raise ConfigError(f"{spec.where(('target', key))}: unknown key {key!r}{did_you_mean(key, TARGET_KEYS)}"
                              f" -- allowed: {', '.join(TARGET_KEYS)}")
    spec.target = dict(target)
    workloads = data.get("workloads")
    if not isinstance(workloads, dict) or not workloads:
        raise ConfigError(f"{spec.where(('workloads',))}: expected a mapping of workload name to spec, e.g. "
                          f"'workloads: {{chat: {{class: chat}}}}'")
    file_roofline = data.get("roofline")
    if file_roofline is not None and not isinstance(file_roofline, dict):
        raise ConfigError(f"{spec.where(('roofline',))}: expected a mapping like {{min_efficiency: 0.5}}")
    for name, wspec in workloads.items():
        if wspec is None:
            wspec = {}
        if not isinstance(wspec, dict):
            raise ConfigError(f"{spec.where(('workloads', name))}: expected a mapping (class, prompt_tokens, "
                              f"output_tokens, samples, slo, ...), got {type(wspec).__name__}")
        if file_roofline and "roofline" not in wspec:
            wspec = {**wspec, "roofline": file_roofline}
        spec.workloads.append(make_workload(str(name), wspec, lambda p, n=name: spec.where(("workloads", n) + p),
                                            default_samples=default_samples))
    return spec
