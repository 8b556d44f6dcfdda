"""One judging layer: only ``core/checks`` decides.  No module outside it appends to (or assigns)
a result's verdict lists, and ``client/`` does not import the checks.  Checked on the real tree,
and the checker itself on small synthetic sources so that it can fail."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_llm_latency"
#: the lists that decide a verdict (``WorkloadResult`` views of the findings)
VERDICT_LISTS = {"errors", "failed_checks", "violations", "causes"}
MUTATORS = {"append", "extend", "insert", "clear", "remove", "pop", "__setitem__", "__iadd__"}
#: where they may be written: the checks and the one judging function (core/checks/judge.py)
JUDGING = ("core/checks/",)


def verdict_writes(source: str) -> list[tuple[int, str]]:
    """(line, what) for every write to ``<x>.errors``/``failed_checks``/``violations``/``causes``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            target = node.func.value
            if isinstance(target, ast.Attribute) and target.attr in VERDICT_LISTS:
                out.append((node.lineno, f".{target.attr}.{node.func.attr}()"))
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Subscript):
                    sub = sub.value
                if isinstance(sub, ast.Attribute) and sub.attr in VERDICT_LISTS:
                    out.append((node.lineno, f".{sub.attr} assigned"))
    return sorted(set(out))


def imports_checks(source: str, module: str) -> list[int]:
    """Lines where ``module`` (dotted, e.g. pytest_llm_latency.client.runner) imports core.checks."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")[:-node.level] if node.level else []
            origin = ".".join(base + ([node.module] if node.module else []))
            names = [origin] + [f"{origin}.{a.name}" for a in node.names]
        if any(n == "pytest_llm_latency.core.checks" or n.startswith("pytest_llm_latency.core.checks.")
               for n in names):
            out.append(node.lineno)
    return out


def _modules():
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(PACKAGE).as_posix()
        dotted = "pytest_llm_latency." + rel[:-3].replace("/", ".")
        yield rel, dotted.removesuffix(".__init__"), f.read_text("utf-8")


def test_only_the_checks_write_verdict_lists():
    bad = [f"{rel}:{line}: {what}" for rel, _, src in _modules() if not rel.startswith(JUDGING)
           for line, what in verdict_writes(src)]
    assert not bad, "verdicts are decided in core/checks only (record a fact in core.result.facts instead):\n" + \
        "\n".join(bad)


def test_client_does_not_import_the_checks():
    bad = [f"{rel}:{line}" for rel, dotted, src in _modules() if rel.startswith("client/")
           for line in imports_checks(src, dotted)]
    assert not bad, "measurement never judges: client/ must not import core.checks:\n" + "\n".join(bad)


def test_the_checks_do_no_io():
    heavy = {"httpx", "socket", "subprocess", "pytest", "yaml", "urllib", "requests"}
    bad = []
    for rel, _, src in _modules():
        if not rel.startswith("core/checks/"):
            continue
        for node in ast.walk(ast.parse(src)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bad += [f"{rel}: imports {m}" for m in mods if m.split(".")[0] in heavy]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                bad.append(f"{rel}:{node.lineno}: open()")
    assert not bad, bad


# ------------------------------------------------------------- the checker can fail
def test_checker_flags_appends_assignments_and_slices():
    src = ("res.errors.append('x')\nres.failed_checks += ['y']\nres.violations[:] = []\nr.causes = []\n"
           "res.notes.append('fine')\nerrors = []\nerrors.append(1)\n")
    assert [what for _, what in verdict_writes(src)] == [
        ".errors.append()", ".failed_checks assigned", ".violations assigned", ".causes assigned"]


def test_checker_flags_a_client_importing_the_checks():
    mod = "pytest_llm_latency.client.runner"
    assert imports_checks("from ..core.checks import judge\n", mod) == [1]
    assert imports_checks("import pytest_llm_latency.core.checks.budgets\n", mod) == [1]
    assert imports_checks("from ..core import checks\n", mod) == [1]
    assert imports_checks("from ..core.result import measured\n", mod) == []


def judge_definitions(source: str) -> list[str]:
    """Functions named ``judge`` or ``judge_*`` defined in ``source`` (nested ones too)."""
    return [n.name for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (n.name == "judge"
                                                                           or n.name.startswith("judge_"))]


def test_only_the_checks_define_a_judge():
    """One meaning per name: ``judge`` decides verdicts, so only ``core/checks`` defines one (a rule the
    checks apply is named for what it does: ``core.measure.verdict.budget_verdict``,
    ``core.roofline.ceiling.apply_floor``)."""
    found = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(PACKAGE).as_posix()
        if not rel.startswith(JUDGING) and (names := judge_definitions(f.read_text("utf-8"))):
            found[rel] = names
    assert found == {}
    synthetic = "def f():\n    def judge(pk):\n        pass\ndef judge_x(): pass\n"
    assert sorted(judge_definitions(synthetic)) == ["judge", "judge_x"]


def part_writes(source: str) -> list[str]:
    """Writes to a result part in ``source``: ``res.<part>.<field> = ...``, ``res.<part>.set(...)``,
    ``res.<part>.turn(...)`` (a check returns a ``part`` finding instead: ``core.findings.part_update``)."""
    from pytest_llm_latency.core.result.result_parts import PART_NAMES

    out = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute) and t.value.attr in PART_NAMES:
                out.append(f"line {node.lineno}: .{t.value.attr}.{t.attr} =")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("set", "turn") \
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr in PART_NAMES:
            out.append(f"line {node.lineno}: .{node.func.value.attr}.{node.func.attr}()")
    return out


def test_the_checks_return_their_parts_figures_instead_of_writing_them():
    found = {}
    for f in sorted((PACKAGE / "core" / "checks").glob("*.py")):
        if f.name != "judge.py" and (hits := part_writes(f.read_text("utf-8"))):
            found[f.name] = hits
    assert found == {}
    assert part_writes("res.roofline.status = s\nres.agent.turn(1)\nres.load.set(x=1)\nres.facts.y = 2\n") == [
        "line 1: .roofline.status =", "line 2: .agent.turn()", "line 3: .load.set()"]
