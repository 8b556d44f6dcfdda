"""The docs cannot drift from the code, and no link in them is broken.

* the generated references (``docs/reference/*.md``) equal a fresh generation from
  ``plugin/options.OPTIONS``, ``data/slo.schema.json`` and the CLI's parsers;
* every relative link in README.md, CONTRIBUTING.md, docs/**/*.md, benchmarks/README.md and
  example_slos/README.md names a file that exists and, with ``#anchor``, a heading in it;
* every option, every YAML key of the schema and every CLI subcommand is in the docs;
* the README stays a front page (<= 300 lines) and every docs page is in the MkDocs nav.
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REGENERATE = "run python docs/gen_reference.py"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("page", ["configuration.md", "yaml.md", "cli.md"])
def test_generated_reference_is_fresh(page):
    gen = _gen()
    fresh = gen.PAGES[page]()
    committed = DOCS / "reference" / page
    assert committed.exists(), f"docs/reference/{page} is missing: {REGENERATE}"
    if page == "cli.md" and sys.version_info[:2] != gen.CLI_PYTHON:
        pytest.skip("argparse's help layout differs between Python versions; cli.md is made on "
                    + ".".join(map(str, gen.CLI_PYTHON)))
    assert committed.read_text(encoding="utf-8") == fresh, f"docs/reference/{page} is out of date: {REGENERATE}"


def test_generator_check_mode_names_a_stale_page(tmp_path, monkeypatch, capsys):
    """``--check`` fails and names the page when it differs (here: an empty copy)."""
    gen = _gen()
    monkeypatch.setattr(gen, "OUT", tmp_path)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    (tmp_path / "yaml.md").write_text("stale\n")
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "yaml.md is out of date: run python docs/gen_reference.py" in err


def test_every_option_is_in_the_configuration_reference():
    from pytest_llm_latency.plugin.options import OPTIONS

    text = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    for opt in OPTIONS:
        for name in (opt.cli, opt.env, opt.ini):
            assert f"`{name}`" in text, f"{name} is not in docs/reference/configuration.md: {REGENERATE}"


def _schema_keys(node: dict, defs: dict, seen: set[str]) -> set[str]:
    keys = set()
    ref = node.get("$ref", "")
    if ref.startswith("#/$defs/"):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            return keys
        seen.add(name)
        node = defs[name]
    for key, sub in node.get("properties", {}).items():
        keys.add(key)
        keys |= _schema_keys(sub, defs, seen)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        keys |= _schema_keys(extra, defs, seen)
    for alt in node.get("oneOf", []) + node.get("anyOf", []):
        if isinstance(alt, dict):
            keys |= _schema_keys(alt, defs, seen)
    return keys


def test_every_yaml_key_is_in_the_yaml_reference():
    schema = json.loads((ROOT / "pytest_llm_latency" / "data" / "slo.schema.json").read_text())
    text = (DOCS / "reference" / "yaml.md").read_text(encoding="utf-8")
    keys = _schema_keys(schema, schema.get("$defs", {}), set())
    assert len(keys) > 20
    for key in sorted(keys):
        stem, _, suffix = key.rpartition("_")
        grouped = re.search(re.escape(stem) + r"_\{[^}]*\b" + re.escape(suffix) + r"\b", text) if stem else None
        assert f"`{key}`" in text or grouped, f"YAML key {key!r} is not in docs/reference/yaml.md: {REGENERATE}"


def test_every_cli_subcommand_is_in_the_cli_reference():
    from pytest_llm_latency.cli.main import SUBCOMMANDS

    text = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    for name in SUBCOMMANDS:
        assert name in text, f"subcommand {name} is not in docs/reference/cli.md: {REGENERATE}"


def test_example_slo_files_match_the_shipped_schema():
    """The files the docs point newcomers at are valid against the schema their editor uses."""
    jsonschema = pytest.importorskip("jsonschema")
    yaml = pytest.importorskip("yaml")
    schema = json.loads((ROOT / "pytest_llm_latency" / "data" / "slo.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    files = sorted((ROOT / "example_slos").glob("*.y*ml"))
    assert files
    for path in files:
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, f"{path.relative_to(ROOT)} does not match slo.schema.json: {errors}"


# -- links ------------------------------------------------------------------------------------

def _markdown_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "README.md",
             ROOT / "example_slos" / "README.md"]
    files += sorted(p for p in DOCS.rglob("*.md") if not p.is_symlink())
    return [p for p in files if p.exists()]


def _slug_mkdocs(text: str) -> str:
    """Python-Markdown's toc slug (what MkDocs gives a heading)."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _slug_github(text: str) -> str:
    """GitHub's heading anchor: lowercased, punctuation but '-' and '_' dropped, spaces -> '-'."""
    text = re.sub(r"[^\w\- ]", "", text.strip().lower(), flags=re.UNICODE)
    return text.replace(" ", "-")


def _headings(path: Path) -> list[str]:
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m and not fenced:
            out.append(re.sub(r"`([^`]*)`", r"\1", m.group(2)))
    return out


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    for slug in (_slug_mkdocs, _slug_github):
        counts: dict[str, int] = {}
        for heading in _headings(path):
            base = slug(heading)
            n = counts.get(base, 0)
            counts[base] = n + 1
            anchors.add(base if n == 0 else f"{base}_{n}")  # MkDocs' duplicates
            anchors.add(base if n == 0 else f"{base}-{n}")  # GitHub's
    return anchors


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _links(path: Path):
    fenced = False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        line = re.sub(r"`[^`]*`", "", line)  # links inside code spans are not links
        for m in LINK.finditer(line):
            yield n, m.group(1) or m.group(2)


def test_markdown_files_exist():
    names = {p.relative_to(ROOT).as_posix() for p in _markdown_files()}
    assert {"README.md", "CONTRIBUTING.md", "docs/index.md", "benchmarks/README.md"} <= names


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(path):
    broken = []
    for line, target in _links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{line}: {target}"
        if not dest.exists():
            broken.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{where}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_checker_catches_a_broken_link_and_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A section\n\n[ok](#a-section) [bad](#nowhere) [gone](missing.md)\n"
                    "`[not a link](nowhere.md)`\n")
    links = list(_links(page))
    assert [t for _, t in links] == ["#a-section", "#nowhere", "missing.md"]
    assert "a-section" in _anchors(page) and "nowhere" not in _anchors(page)


# -- shape --------------------------------------------------------------------------------------

def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail into docs/ (limit 300)"


def test_every_docs_page_is_in_the_mkdocs_nav():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav):
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                yield from pages(value)
            else:
                yield value

    in_nav = set(pages(config["nav"]))
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert on_disk - in_nav == set(), f"docs pages missing from mkdocs.yml's nav: {sorted(on_disk - in_nav)}"
    assert in_nav - on_disk == set(), f"mkdocs.yml's nav names missing pages: {sorted(in_nav - on_disk)}"


def test_the_users_example_workflow_is_not_one_of_this_repositorys():
    """The example gate workflow is documentation for users; this repository runs only its own CI."""
    assert (DOCS / "examples" / "llm-slo-gate.yml").exists()
    assert not (ROOT / ".github" / "workflows" / "llm-slo-gate.yml").exists()
