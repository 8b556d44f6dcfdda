"""Write the generated reference pages from the data they document, so they cannot drift.

    python docs/gen_reference.py           # rewrite docs/reference/{configuration,yaml,cli}.md
    python docs/gen_reference.py --check   # exit 1, naming the stale file, if a page is out of date

* ``docs/reference/configuration.md`` from ``pytest_llm_latency.plugin.options.OPTIONS`` (flag,
  env var, ini key, default, accepted values, help), the options module's precedence rule, the
  marker signature and the hook specs.
* ``docs/reference/yaml.md`` from ``pytest_llm_latency/data/slo.schema.json`` (every key, its
  type and allowed values, and the schema's description).
* ``docs/reference/cli.md`` from the ``pytest-llm-latency`` argparse parsers (``cli/main.py``).

Nothing here names an option or a YAML key: every row comes from the table or the schema.
``tests/architecture/test_docs.py`` fails when a committed page differs from a fresh generation.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, when imported by a test too
from reference_text import HEADER, _anchor, _cell, _code, _para  # noqa: E402
# -- configuration: the option table --------------------------------------------------------

def configuration_md() -> str:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from pytest_llm_latency.plugin import hookspecs, options

    try:
        from pytest_llm_latency.plugin.markers import MARKER_SIGNATURE
    except ImportError:  # pragma: no cover - the marker module moved
        MARKER_SIGNATURE = None

    opt_cls = type(options.OPTIONS[0])
    known = {"name", "help", "parse", "expect", "default", "flag"}
    try:  # any field the table grows (an old name, a deprecation) is shown, not dropped
        extra_fields = [f for f in dataclasses.fields(opt_cls) if f.name not in known]
    except TypeError:
        extra_fields = []

    lines = [HEADER.format(source="pytest_llm_latency.plugin.options.OPTIONS"),
             "# Configuration reference\n",
             "Every run-wide setting has one name, written three ways: a command-line flag, an "
             "environment variable and an ini key (`pytest.ini`, `pyproject.toml` "
             "`[tool.pytest.ini_options]`, `tox.ini`, `setup.cfg`). Per-test values come from the "
             "`llm_slo` marker and from YAML SLO files ([YAML reference](yaml.md)).\n",
             "## Precedence and validation\n",
             ]
    doc = " ".join((options.__doc__ or "").split())
    rule = re.search(r"Precedence[^:]*:\s*([^.]+)\.", doc)
    if rule:
        lines.append("Precedence for every setting (`pytest_llm_latency/plugin/options.py`): "
                     f"**{rule.group(1).strip()}**. The CLI, environment and ini are read once per run; "
                     "a marker (above them) and an SLO file (below them) add per-test values.\n")
    else:
        lines.append(_para(options.__doc__ or "") + "\n")
    example = _example_error(options)
    if example:
        lines.append("A value that does not parse is a usage error naming its source, e.g.:\n\n"
                     f"```text\n{example}\n```\n")
    lines.append(f"An empty environment variable or ini value (`{options.OPTIONS[0].env}=`) counts as "
                 "not set, so the next layer decides. An option marked \"a switch\" takes no value on the command "
                 "line; in the environment or ini it takes `true` or `false` (also 1/0, yes/no, on/off).\n")
    lines.append("| setting | CLI | env | ini | default |")
    lines.append("|---|---|---|---|---|")
    for opt in options.OPTIONS:
        lines.append(f"| [{opt.name}](#{_anchor(opt.name)}) | `{opt.cli}` | `{opt.env}` | `{opt.ini}` | "
                     f"{_default(opt)} |")
    lines.append("")
    lines.append("## Options\n")
    for opt in options.OPTIONS:
        lines.append(f"### `{opt.name}`\n")
        lines.append(_para(opt.help) + "\n")
        lines.append("| | |")
        lines.append("|---|---|")
        usage = f"`{opt.cli}`" if opt.flag else f"`{opt.cli} {opt.name.upper()}`"
        lines.append(f"| CLI | {usage}{' (a switch)' if opt.flag else ''} |")
        lines.append(f"| env | `{opt.env}` |")
        lines.append(f"| ini | `{opt.ini}` |")
        lines.append(f"| accepts | {_cell(opt.expect)} |")
        lines.append(f"| default | {_default(opt)} |")
        for f in extra_fields:
            value = getattr(opt, f.name)
            default = f.default if f.default is not dataclasses.MISSING else None
            if value not in (None, (), [], "", False) and value != default:
                lines.append(f"| {f.name.replace('_', ' ')} | {_cell(_show(value))} |")
        lines.append("")

    api_key_doc = getattr(options, "api_key_from_env", None)
    if api_key_doc is not None and api_key_doc.__doc__:
        lines.append("## The API key\n")
        lines.append(_para(api_key_doc.__doc__) + " It is sent as `Authorization: Bearer` and redacted "
                     "from every message, report and log.\n")
    if MARKER_SIGNATURE:
        lines.append("## The marker\n")
        lines.append("As `pytest --markers` lists it:\n")
        lines.append("```text\n@pytest.mark." + MARKER_SIGNATURE + "\n```\n")
    specs = [(name, fn) for name, fn in vars(hookspecs).items()
             if name.startswith("pytest_") and callable(fn)]
    if specs:
        lines.append("## Hooks\n")
        lines.append(_para(inspect.cleandoc(hookspecs.__doc__ or "")) + "\n")
        for name, fn in specs:
            sig = str(inspect.signature(fn)).replace("'", "")
            lines.append(f"- `{name}{sig}`: {_para(inspect.cleandoc(fn.__doc__ or ''))}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _example_error(options) -> str | None:
    """The error of the first option that refuses a nonsense value in the environment, as the
    plugin prints it (so the page shows the real wording)."""
    from pytest_llm_latency.core.errors import ConfigError

    for opt in options.OPTIONS:
        if opt.flag:
            continue
        try:
            options.Settings.resolve({}, {opt.env: "not-a-value"}, {})
        except ConfigError as exc:
            return str(exc)
    return None


def _show(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return ", ".join(f"`{v}`" for v in value)
    return f"`{value}`"


def _default(opt) -> str:
    if opt.default is None:
        return "not set"
    return _code(opt.default)


# -- YAML: the SLO file schema --------------------------------------------------------------

SCHEMA = ROOT / "pytest_llm_latency" / "data" / "slo.schema.json"


def yaml_md(schema: dict | None = None) -> str:
    schema = schema if schema is not None else json.loads(SCHEMA.read_text())
    defs = schema.get("$defs", {})
    sections: list[tuple[str, str, dict]] = []  # (title, path, object schema)
    refs_done: set[str] = set()

    def collect(title: str, path: str, node: dict) -> None:
        sections.append((title, path, node))
        for key, sub in node.get("properties", {}).items():
            _descend(f"{path}.{key}" if path else key, sub)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("properties"):
            _descend(f"{path}.<name>" if path else "<name>", extra)

    def _descend(path: str, node: dict) -> None:
        ref = _ref_name(node)
        if ref and ref not in refs_done and defs.get(ref, {}).get("properties"):
            refs_done.add(ref)
            collect(ref, f"$defs/{ref}", defs[ref])
            return
        if node.get("properties"):
            collect(path, path, node)
        else:
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) and extra.get("properties"):
                collect(f"{path}.<name>", f"{path}.<name>", extra)
        for alt in node.get("oneOf", []) + node.get("anyOf", []):
            if isinstance(alt, dict) and alt.get("properties"):
                collect(path, path, alt)

    collect("the file", "", schema)

    lines = [HEADER.format(source="pytest_llm_latency/data/slo.schema.json"),
             "# YAML reference\n",
             f"{schema.get('title', 'SLO file')}. pytest collects every `*.slo.yaml` and `*.slo.yml` file; "
             "each workload is one test item (`chat.slo.yaml::chat`). The schema "
             "(`pytest_llm_latency/data/slo.schema.json`) gives editors completion and checks: start a "
             "file with `# yaml-language-server: $schema=<path to slo.schema.json>`. How to write one: "
             "[Writing SLOs](../writing-slos.md).\n",
             "A **duration** is a number of milliseconds or a string with a unit "
             "(`500ms`, `1.5s`, `250us`, `2min`; units ms, s, us, ns, min). `null` drops a class default.\n"]
    for title, path, node in sections:
        heading = _section_title(title, path)
        lines.append(f"## {heading}\n")
        if node.get("description"):
            lines.append(_para(node["description"]) + "\n")
        required = set(node.get("required", []))
        rows = _rows(node, defs, required, path)
        if rows:
            lines.append("| key | type | meaning |")
            lines.append("|---|---|---|")
            lines += rows
            lines.append("")
        extra = node.get("additionalProperties")
        if extra is False:
            lines.append("Any other key is an error naming the file, line and key path.\n")
    return "\n".join(lines).rstrip() + "\n"


def _dotted(path: str) -> str:
    return path.replace("$defs/", "")


def _section_title(title: str, path: str) -> str:
    if not path:
        return "Top level"
    if path.startswith("$defs/"):
        return f"`{title}` mapping"
    return f"`{path}`"


def _ref_name(node: dict) -> str | None:
    ref = node.get("$ref", "")
    return ref.rsplit("/", 1)[-1] if ref.startswith("#/$defs/") else None


def _child(path: str, key: str, node: dict) -> str | None:
    """The section path of a key's value when it gets a section of its own (a mapping with keys)."""
    child = f"{path}.{key}" if path and not path.startswith("$defs/") else key
    if node.get("properties"):
        return child
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("properties"):
        return f"{child}.<name>"
    return None


def _type(node: dict, defs: dict, section: str | None = None) -> str:
    if section is not None and not _ref_name(node):
        kind = "mapping of name → mapping" if section.endswith(".<name>") else "mapping"
        return f"{kind} ([keys](#{_anchor(_section_title(section, section))}))"
    ref = _ref_name(node)
    if ref:
        target = defs.get(ref, {})
        if target.get("properties"):
            return f"[{ref}](#{_anchor(_section_title(ref, '$defs/' + ref))})"
        return ref
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return " \\| ".join(f"`{v}`" if v is not None else "`null`" for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(_type(alt, defs) for alt in node[key])
    kind = node.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    out = " or ".join(_bounded(k, node) for k in kinds)
    if "array" in kinds and isinstance(node.get("items"), dict):
        out = out.replace("array", f"list of {_type(node['items'], defs)}")
    return out


def _bounded(kind: str, node: dict) -> str:
    if kind not in ("integer", "number"):
        return kind
    parts = []
    if "minimum" in node:
        parts.append(f"≥ {node['minimum']}")
    if "exclusiveMinimum" in node:
        parts.append(f"> {node['exclusiveMinimum']}")
    if "maximum" in node:
        parts.append(f"≤ {node['maximum']}")
    if "exclusiveMaximum" in node:
        parts.append(f"< {node['exclusiveMaximum']}")
    return kind + (" " + ", ".join(parts) if parts else "")


def _rows(node: dict, defs: dict, required: set[str], path: str = "") -> list[str]:
    """One row per key; a family of keys with one schema (``ttft_mean`` ... ``ttft_max``) is one row.
    A key whose value is a mapping with its own section links to it."""
    props = list(node.get("properties", {}).items())
    rows, i = [], 0
    while i < len(props):
        key, sub = props[i]
        stem, _, suffix = key.rpartition("_")
        j = i + 1
        if stem:
            while j < len(props):
                k2, s2 = props[j]
                if k2.rpartition("_")[0] != stem or s2 != sub:
                    break
                j += 1
        if j - i >= 3:
            names = "`" + stem + "_{" + ",".join(k.rpartition("_")[2] for k, _ in props[i:j]) + "}`"
        else:
            names, j = f"`{key}`", i + 1
        meaning = _cell(sub.get("description", "") or _ref_description(sub, defs))
        if key in required:
            meaning = ("**required.** " + meaning).strip()
        if sub.get("deprecated"):  # JSON Schema's own keyword for a key kept for compatibility
            meaning = ("**deprecated.** " + meaning).strip()
        rows.append(f"| {names} | {_type(sub, defs, _child(path, key, sub))} | {meaning} |")
        i = j
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and not extra.get("properties"):
        rows.append(f"| `<name>` | {_type(extra, defs)} | {_cell(extra.get('description', ''))} |")
    return rows


def _ref_description(node: dict, defs: dict) -> str:
    ref = _ref_name(node)
    return defs.get(ref, {}).get("description", "") if ref and defs.get(ref, {}).get("properties") else ""


# -- CLI: the argparse parsers ----------------------------------------------------------------

def cli_md() -> str:
    """``pytest-llm-latency --help`` and each subcommand's, as argparse prints them (80 columns)."""
    import os
    from unittest.mock import patch

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from pytest_llm_latency.cli import main as cli_main

    with patch.dict(os.environ, COLUMNS="80"):  # restored afterwards
        parser = cli_main.build_parser()
        lines = [HEADER.format(source="pytest_llm_latency.cli.main.build_parser()"),
                 "# CLI reference\n",
                 "`pytest-llm-latency` is installed with the package. " + _para(cli_main.__doc__ or "") + "\n",
                 "```text", parser.format_help().rstrip(), "```\n"]
        subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        seen = set()
        for name, sub in subs.choices.items():
            if id(sub) in seen:  # an alias of a subcommand already shown
                continue
            seen.add(id(sub))
            lines += [f"## `{name}`\n", "```text", sub.format_help().rstrip(), "```\n"]
    return "\n".join(lines).rstrip() + "\n"


# -- entry point ------------------------------------------------------------------------------

PAGES = {"configuration.md": configuration_md, "yaml.md": yaml_md, "cli.md": cli_md}


def generate() -> dict[Path, str]:
    return {OUT / name: make() for name, make in PAGES.items()}


#: argparse's help layout changes between Python versions (3.13 groups an option's spellings
#: differently), so ``cli.md`` is made, and checked, on this one (CI's).
CLI_PYTHON = (3, 11)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    pages = generate()
    if sys.version_info[:2] != CLI_PYTHON:
        pages.pop(OUT / "cli.md")
        print(f"docs/reference/cli.md left as it is: it is generated on Python "
              f"{'.'.join(map(str, CLI_PYTHON))} (argparse's layout differs by version)", file=sys.stderr)
    for path, text in pages.items():
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    for path in stale:
        print(f"{path.relative_to(ROOT)} is out of date: run python docs/gen_reference.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
