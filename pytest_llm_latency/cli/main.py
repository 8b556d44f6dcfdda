"""The ``pytest-llm-latency`` command.

Subcommands are registered lazily: each lives in its own module exposing
``add_arguments(parser)`` and ``run(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    # name: (module, one-line help)
    "ceiling": ("pytest_llm_latency.cli.ceiling", "print the decode memory-bandwidth ceiling (tok/s)"),
    "serve-reference": ("pytest_llm_latency.cli.serve_reference", "run the embedded reference LLM server"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-llm-latency", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(sp)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = importlib.import_module(args._module)
    return int(module.run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
