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


def module_graph(pkg_dir: Path, annotations: bool = True) -> dict[str, set[str]]:
    """Map every module (dotted, relative to the package) to the package modules it imports.
    Imports inside functions count too: a lazy import is still a dependency; ``annotations``
    False leaves out those made only for annotations (``if TYPE_CHECKING:``)."""
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
        tree = ast.parse(f.read_text("utf-8"), str(f))
        skip = set() if annotations else _type_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
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
        "pytest_llm_latency." + ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        for p in (PACKAGE / "core").rglob("*.py")]
    code = (f"import sys, importlib\nfor m in {mods!r}: importlib.import_module(m)\n"
            f"bad = [m for m in {heavy!r} if m in sys.modules]\nprint(bad)\nsys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


# -- the stages inside a layer ----------------------------------------------------------------

#: inside ``core`` and ``client`` the folders are stages, in order: a stage may import the stages
#: before it and the layer's base modules (the vocabulary every stage uses), never one after it.
#: Each folder's ``__init__`` docstring says the same.
STAGES: dict[str, tuple[set[str], list[str]]] = {
    "core": ({"__init__", "errors", "statuses", "findings", "redact", "hosts"},
             ["measure", "prompts", "spec", "result", "roofline", "checks"]),
    "client": ({"__init__"},
               ["transport", "apis", "server", "prepare", "load", "placement", "agent", "drivers", "runner"]),
}


def _type_only(tree: ast.AST) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:``: annotations, not dependencies."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for b in node.body for n in ast.walk(b))
    return out


def stage_violations(graph: dict[str, set[str]], stages=STAGES) -> list[str]:
    out = []
    for mod, deps in sorted(graph.items()):
        parts = mod.split(".")
        if len(parts) < 2 or parts[1] not in stages:
            continue
        base, order = stages[parts[1]]
        src = parts[2] if len(parts) > 2 else "__init__"
        if src not in base and src not in order:
            out.append(f"{mod}: in no stage of {parts[1]} (stages: {', '.join(order)}; "
                       f"base: {', '.join(sorted(base))})")
            continue
        for dep in sorted(deps):
            dparts = dep.split(".")
            if dparts[:2] != parts[:2]:
                continue
            dst = dparts[2] if len(dparts) > 2 else "__init__"
            if dst == src or dst in base:
                continue
            if src in base or dst not in order or order.index(dst) > order.index(src):
                out.append(f"{mod} imports {dep}: stage '{src}' of {parts[1]} comes before '{dst}'")
    return out


def test_every_import_points_down_the_stages():
    assert stage_violations(module_graph(PACKAGE, annotations=False)) == []


def test_every_stage_folder_says_what_it_holds_and_may_import():
    missing = []
    for layer, (_, order) in STAGES.items():
        for stage in order:
            init = PACKAGE / layer / stage / "__init__.py"
            if not init.exists():
                assert (PACKAGE / layer / f"{stage}.py").exists(), f"{layer}/{stage}: neither a folder nor a module"
                continue
            doc = ast.get_docstring(ast.parse(init.read_text("utf-8"))) or ""
            if "May import" not in doc:
                missing.append(f"{layer}/{stage}/__init__.py")
    folders = {p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("__init__.py")}
    for folder in sorted(folders):
        doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text("utf-8"))) or ""
        if not doc.strip():
            missing.append(f"{folder}/__init__.py (no docstring)")
    assert missing == [], "each folder's __init__ docstring says what it holds and what it may import"


def test_stage_checker_flags_a_later_stage(tmp_path):
    pkg = _tree(tmp_path, {
        "core/measure/stats.py": "from ..spec.workload import W\n",
        "core/spec/workload.py": "from ..measure.stats import S\nW = 1\n",
        "core/errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .measure.stats import S\n",
        "core/redact.py": "from .spec import workload\n",
    })
    found = stage_violations(module_graph(pkg, annotations=False))
    assert any("core.measure.stats imports pytest_llm_latency.core.spec.workload" in v for v in found), found
    assert any(v.startswith("pytest_llm_latency.core.redact imports") for v in found), "a base module imports no stage"
    assert not any(v.startswith("pytest_llm_latency.core.spec.workload") for v in found), "a later stage may"
    assert not any(v.startswith("pytest_llm_latency.core.errors") for v in found), "annotations are not imports"


def test_unit_tests_mirror_the_package():
    """``tests/unit`` has the package's folders: a unit test sits beside the stage it tests."""
    unit = PACKAGE.parent / "tests" / "unit"
    loose = sorted(p.name for p in unit.glob("test_*.py"))
    strays = sorted(p.parent.relative_to(unit).as_posix() for p in unit.rglob("test_*.py")
                    if not (PACKAGE / p.parent.relative_to(unit)).is_dir())
    assert loose == [] and strays == [], f"unit tests outside a folder of the package: {loose + strays}"
