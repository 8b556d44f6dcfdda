"""The ``pytest-llm-latency`` command.

Subcommands are registered lazily: each lives in its own module exposing
``add_arguments(parser)`` and ``run(args) -> int``.  A renamed subcommand keeps its old name for
this release (``RENAMED_SUBCOMMANDS``) and says on stderr what to type instead.

A reader that goes away early (``... | head -2``) ends the command quietly with exit
status 141 (128 + SIGPIPE), what a shell reports for any other command cut off by a
closed pipe, so ``set -o pipefail`` treats it the same way.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys

#: Exit status when stdout's reader has gone: 128 + SIGPIPE (13), as for ``yes | head -1``.
EXIT_BROKEN_PIPE = 141

SUBCOMMANDS = {
    # name: (module, one-line help)
    "ceiling": ("pytest_llm_latency.cli.ceiling", "print the decode memory-bandwidth ceiling (tok/s)"),
    "compare": ("pytest_llm_latency.cli.compare", "deploy gate: compare two baselines / results files with samples"),
    "serve-reference": ("pytest_llm_latency.cli.serve_reference", "run the embedded reference LLM server"),
    "rate-sweep": ("pytest_llm_latency.cli.rate_sweep", "find the highest request rate that meets the SLO"),
}
#: old subcommand name -> new; the old one still runs, with a deprecation line on stderr
RENAMED_SUBCOMMANDS = {"sweep": "rate-sweep"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-llm-latency", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in SUBCOMMANDS.items():
        old = [o for o, new in RENAMED_SUBCOMMANDS.items() if new == name]
        sp = sub.add_parser(name, help=help_text, description=help_text, aliases=old)
        sp.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(sp)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command in RENAMED_SUBCOMMANDS:
            new = RENAMED_SUBCOMMANDS[args.command]
            print(f"pytest-llm-latency: '{args.command}' is deprecated, use 'pytest-llm-latency {new}' instead "
                  f"(the old name works for this release)", file=sys.stderr)
        module = importlib.import_module(args._module)
        code = int(module.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at interpreter exit
        return code
    except BrokenPipeError:
        # Python's recipe: point stdout at /dev/null so the flush at exit does not fail again
        with contextlib.suppress(OSError, ValueError, AttributeError):  # stdout is not a file (replaced, closed)
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, sys.stdout.fileno())
            finally:
                os.close(devnull)
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
