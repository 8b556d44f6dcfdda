"""The renderers read typed documents (``plugin/report/entry.py``), not the result dict: no
``.get(`` in them, and every function annotated, so mypy checks what they read."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[2] / "pytest_llm_latency" / "plugin" / "report"
RENDERERS = ("terminal.py", "page.py", "step_summary.py", "properties.py", "html.py", "arms_view.py")


def dict_gets(source: str) -> list[int]:
    """Lines of every ``<anything>.get(...)`` call."""
    return [n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == "get"]


def unannotated(source: str) -> list[str]:
    """Functions mypy would skip: no annotation on a parameter (but self/cls) or the return."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [a for a in n.args.args + n.args.kwonlyargs if a.arg not in ("self", "cls")]
            if n.returns is None or any(a.annotation is None for a in args):
                out.append(n.name)
    return out


@pytest.mark.parametrize("name", RENDERERS)
def test_a_renderer_reads_attributes_not_the_dict(name):
    source = (REPORT / name).read_text(encoding="utf-8")
    assert dict_gets(source) == [], f"{name}: .get( on lines {dict_gets(source)}: read report.entry's typed values"


@pytest.mark.parametrize("name", RENDERERS)
def test_a_renderers_functions_are_annotated_so_mypy_checks_them(name):
    source = (REPORT / name).read_text(encoding="utf-8")
    assert unannotated(source) == [], f"{name}: unannotated {unannotated(source)}"


def test_the_checker_finds_a_get_and_a_missing_annotation():
    assert dict_gets("x = r.get('n')\ny = r['n']\n") == [1]
    assert unannotated("def f(r) -> int:\n    return 1\ndef g(r: int) -> int:\n    return r\n") == ["f"]
