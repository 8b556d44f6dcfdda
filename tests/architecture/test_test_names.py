"""Test modules are imported by basename (rootdir-relative, no ``__init__.py`` packages), so two
test files with one name in different folders stop the whole suite at collection; the fast tier
(``tests/unit tests/architecture``) does not collect both, so it is checked here."""
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_its_own_basename():
    seen: dict[str, list[str]] = defaultdict(list)
    for p in TESTS.rglob("test_*.py"):
        seen[p.name].append(str(p.relative_to(TESTS)))
    assert {n: ps for n, ps in seen.items() if len(ps) > 1} == {}
