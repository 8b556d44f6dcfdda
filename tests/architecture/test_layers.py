"""The folders are the layers: imports point down only, and no module imports one that
imports it back.  The rules are checked on the real tree, and the checker itself is
checked on small synthetic trees so that it can fail."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_llm_latency"

#: what each folder may import (besides itself); docs/architecture.md's module map says the same
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "files": set(),
    "client": {"core"},
    "roofline": {"core", "files"},
    "targets": {"core", "files", "roofline"},
    "plugin": {"core", "files", "client", "roofline", "targets"},
    "cli": {"core", "files", "client", "roofline", "targets"},
}
#: modules directly in the package root and what they may import
# the public face: names from core and the fixture/hook types from plugin (lazily, PEP 562)
ROOT_MODULES = {"__init__": {"core", "plugin"}}


def module_graph(pkg_dir: Path) -> dict[str, set[str]]:
    """Map every module (dotted, relative to the package) to the package modules it imports.
    Imports inside functions count too: a lazy import is still a dependency."""
    pkg = pkg_dir.name
    mods: dict[str, Path] = {}
    for f in pkg_dir.rglob("*.py"):
        parts = list(f.relative_to(pkg_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, f in mods.items():
        is_pkg = f.name == "__init__.py"
        for node in ast.walk(ast.parse(f.read_text("utf-8"), str(f))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                targets = [origin] + [f"{origin}.{a.name}" for a in node.names]
            for t in targets:
                if t.split(".")[0] != pkg:
                    continue
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod and t != pkg and not mod.startswith(t + "."):
                    graph[mod].add(t)
    return graph


def layer_of(module: str) -> str:
    """``pytest_llm_latency.client.http`` -> ``client``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for mod, deps in sorted(graph.items()):
        src = layer_of(mod)
        for dep in sorted(deps):
            dst = layer_of(dep)
            if dst == src:
                continue
            allowed = ALLOWED.get(src, ROOT_MODULES.get(src))
            if allowed is None:
                out.append(f"{mod}: module outside every layer (folders: {', '.join(ALLOWED)})")
            elif dst not in allowed and dst != "__init__":
                out.append(f"{mod} imports {dep}: layer '{src}' may import only {sorted(allowed) or 'stdlib'}")
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_every_import_points_down_the_layers():
    graph = module_graph(PACKAGE)
    assert any(m.startswith("pytest_llm_latency.plugin.") for m in graph), "the walk found the package"
    assert violations(graph) == []


def test_no_import_cycles():
    assert cycles(module_graph(PACKAGE)) == []


def test_every_folder_is_a_known_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(ALLOWED), "a new folder needs a row in ALLOWED (and in docs/architecture.md's module map)"
    loose = {p.stem for p in PACKAGE.glob("*.py")}
    assert loose == set(ROOT_MODULES), f"modules must live in a layer folder, not the package root: {loose}"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "pytest_llm_latency"
    for rel, text in files.items():
        f = pkg / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    for d in [pkg, *[p for p in pkg.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    return pkg


def test_checker_flags_an_upward_import(tmp_path):
    pkg = _tree(tmp_path, {
        "core/metrics.py": "def f():\n    from ..plugin import hooks  # lazy, still upward\n",
        "plugin/hooks.py": "from ..core import metrics\n",
        "client/http.py": "from pytest_llm_latency.targets.managed import X\n",
        "targets/managed.py": "X = 1\n",
    })
    found = violations(module_graph(pkg))
    assert any("core.metrics imports pytest_llm_latency.plugin.hooks" in v for v in found), found
    assert any("client.http imports pytest_llm_latency.targets.managed" in v for v in found), found
    assert not any(v.startswith("pytest_llm_latency.plugin.hooks") for v in found), "downward is allowed"


def test_checker_flags_a_cycle(tmp_path):
    pkg = _tree(tmp_path, {
        "plugin/hooks.py": "from .fixtures import F\n",
        "plugin/fixtures.py": "def g():\n    from .collect import C\n",
        "plugin/collect.py": "from . import hooks\n",
        "plugin/stash.py": "",
    })
    assert cycles(module_graph(pkg)) == [["pytest_llm_latency.plugin.collect", "pytest_llm_latency.plugin.fixtures",
                                          "pytest_llm_latency.plugin.hooks"]]


@pytest.mark.parametrize("layer, heavy", [
    ("core", ("pytest", "httpx", "yaml", "numpy")),
    ("plugin.hooks", ("httpx", "numpy", "yaml", "jinja2")),
    ("plugin.report.page", ("httpx", "numpy", "yaml", "jinja2")),  # the charts: stdlib only
])
def test_light_imports(layer, heavy):
    """Importing ``core`` loads no third-party package; the plugin (loaded in every pytest
    run) loads nothing heavy until a latency test needs it."""
    mods = [f"pytest_llm_latency.{layer}"] if "." in layer else [
        f"pytest_llm_latency.core.{p.stem}" for p in (PACKAGE / "core").glob("*.py") if p.stem != "__init__"]
    code = (f"import sys, importlib\nfor m in {mods!r}: importlib.import_module(m)\n"
            f"bad = [m for m in {heavy!r} if m in sys.modules]\nprint(bad)\nsys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
