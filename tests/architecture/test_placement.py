"""Where requests run is one axis (``client/placement``): outside it no module of the client reads a
workload's Ray address or sizes its workers to choose a placement, and the deal and the warm-up cut
are written once.  The walks are checked on small synthetic sources so that they can fail."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_llm_latency"
CLIENT = PACKAGE / "client"
#: the placement's arithmetic: called only inside client/placement
SIZING = {"worker_count", "planned_workers", "sizing_for", "worker_streams"}



def placement_tests(source: str) -> list[str]:
    """What in ``source`` chooses a placement: a workload's ``.ray`` read (attribute or getattr),
    a call of the sizing arithmetic, a slice with a step (``items[k::n]``: a deal of its own)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "ray" and isinstance(node.value, ast.Name) \
                and node.value.id in ("workload", "w", "wl"):
            found.append(f"line {node.lineno}: {node.value.id}.ray")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "ray":
            found.append(f"line {node.lineno}: getattr(..., 'ray')")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in SIZING:
            found.append(f"line {node.lineno}: {getattr(node.func, 'id', getattr(node.func, 'attr', ''))}()")
        elif isinstance(node, ast.Slice) and node.step is not None and node.lower is not None:
            found.append(f"line {node.lineno}: a [k::n] deal")
    return found



def client_modules():
    for f in sorted(CLIENT.rglob("*.py")):
        rel = f.relative_to(PACKAGE.parent / PACKAGE.name).as_posix()
        if not rel.startswith("client/placement/"):
            yield rel, f.read_text("utf-8")


def test_the_walk_finds_each_way_of_choosing():
    src = ("def f(workload, w, items, k, n):\n"
           "    a = workload.ray\n    b = getattr(w, 'ray', None)\n    c = planned_workers(w)\n"
           "    d = items[k::n]\n    e = self.ray\n    return items[::-1]\n")
    assert [x.split(": ")[1] for x in placement_tests(src)] == [
        "workload.ray", "getattr(..., 'ray')", "planned_workers()", "a [k::n] deal"]


def test_the_old_class_name_lookup_would_be_found(tmp_path, monkeypatch):
    src = 'API = {("OpenAIClient", "chat"): "openai-chat"}\ndef of(c):\n    return API.get((type(c).__name__, c.api))\n'
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "m.py").write_text(src)
    monkeypatch.setattr(sys.modules[__name__], "CLIENT", tmp_path / "client")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    try:
        test_no_shard_kind_is_told_apart_by_its_fields()
    except AssertionError as exc:
        assert "type(...).__name__" in str(exc)
    else:
        raise AssertionError("the walk missed a class-name lookup")


def test_no_client_module_outside_placement_chooses_a_placement():
    found = {rel: hits for rel, src in client_modules() if (hits := placement_tests(src))}
    assert found == {}


def test_one_deal_and_one_warmup_cut():
    defs: dict[str, list[str]] = {}
    for f in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in ("deal", "warmup_cut", "warm_share"):
                defs.setdefault(node.name, []).append(f.relative_to(PACKAGE).as_posix())
    assert defs == {name: ["client/placement/deal.py"] for name in ("deal", "warmup_cut", "warm_share")}


def test_no_shard_kind_is_told_apart_by_its_fields():
    """One frozen dataclass per kind, each with its runner (``Shard.run``): nothing reads a shard's
    kind back from optional fields (``shard.closed``, ``.trace``, ``.agent``) or from class names."""
    for rel, src in [*client_modules(), *((f.relative_to(PACKAGE).as_posix(), f.read_text("utf-8"))
                                          for f in (CLIENT / "placement").rglob("*.py"))]:
        tree = ast.parse(src)
        # a class name used to choose: compared, looked up, or part of a key (an error message naming
        # an exception's class is not a dispatch)
        keys = [j for j in ast.walk(tree) if isinstance(j, ast.Compare)]
        keys += [j.slice for j in ast.walk(tree) if isinstance(j, ast.Subscript)]
        keys += [a for j in ast.walk(tree) if isinstance(j, ast.Call) and getattr(j.func, "attr", "") == "get"
                 for a in j.args]
        choosing = {id(x) for k in keys for x in ast.walk(k)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr in ("closed", "trace", "agent") and \
                    isinstance(n.value, ast.Name) and n.value.id in ("shard", "s"):
                raise AssertionError(f"{rel}:{n.lineno}: {n.value.id}.{n.attr}")
            if isinstance(n, ast.Attribute) and n.attr == "__name__" and isinstance(n.value, ast.Call) \
                    and getattr(n.value.func, "id", "") == "type" and id(n) in choosing:
                raise AssertionError(f"{rel}:{n.lineno}: type(...).__name__")


def test_placement_imports_no_driver():
    for f in (CLIENT / "placement").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert "drivers" not in node.module.split("."), f"{f.name} imports {node.module}"


def _classes(root: Path):
    for f in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = {getattr(t, "id", getattr(t, "attr", None)) for b in node.body
                         for t in ([b.target] if isinstance(b, ast.AnnAssign) else getattr(b, "targets", []))}
                names |= {b.name for b in node.body if isinstance(b, ast.FunctionDef)}
                names |= {t.attr for b in ast.walk(node) if isinstance(b, (ast.Assign, ast.AnnAssign))
                          for t in (b.targets if isinstance(b, ast.Assign) else [b.target])
                          if isinstance(t, ast.Attribute)}
                protocol = any(getattr(b, "id", "") == "Protocol" for b in node.bases)
                yield f.relative_to(PACKAGE).as_posix(), node.name, protocol, names


def test_one_books_protocol_and_one_pool_protocol():
    """A closed loop's books (``t_stop``, ``ramp_end``, ...) have one protocol, ``Books``, and the
    shards held for rounds (``send_round``) one, ``RoundPool``; every class that keeps books or
    sends rounds is one of their implementations, which mypy checks where the placements make them."""
    books = [(rel, name, proto) for rel, name, proto, names in _classes(CLIENT) if {"t_stop", "ramp_end"} <= names]
    pools = [(rel, name, proto) for rel, name, proto, names in _classes(CLIENT) if "send_round" in names]
    assert [(r, n) for r, n, p in books if p] == [("client/load/engine.py", "Books")]
    assert [(r, n) for r, n, p in pools if p] == [("client/placement/base.py", "RoundPool")]
    assert sorted(n for _, n, p in books if not p) == ["LoopBooks", "LoopState", "NodeLoopState", "SharedLoopState"]
    assert sorted(n for _, n, p in pools if not p) == ["RayPool", "WorkerPool"]
