"""``targets.flag_help.help_text``: the managed command run once with ``--help`` ({port} and {host} filled,
the env passed), its output returned; ``--help=all`` asked for when the first text points there (vLLM); a
command that cannot run is a reason, not an exception."""
from __future__ import annotations

import sys

from pytest_llm_latency.targets.flag_help import help_text

SCRIPT = r'''
import os, sys
if sys.argv[-1] == "--help=all":
    print("  --max-num-batched-tokens N\n  --enable-chunked-prefill")
else:
    print("usage: serve --port", sys.argv[1], "host", sys.argv[3], "env", os.environ.get("ARM"), "args", sys.argv[4:])
    print("Use `--help=all` to show all available flags" if os.environ.get("ARM") == "grouped" else "  --x  --y")
'''


def test_the_help_text_with_placeholders_filled_and_the_env_passed(tmp_path):
    (tmp_path / "serve.py").write_text(SCRIPT)
    text, why = help_text([sys.executable, str(tmp_path / "serve.py"), "{port}", "--host", "{host}"], {"ARM": "one"})
    assert why == "" and text is not None
    assert "usage: serve --port 0 host 127.0.0.1 env one args ['--help']" in text and "--max-num" not in text


def test_a_grouped_help_is_followed_by_help_all(tmp_path):
    (tmp_path / "serve.py").write_text(SCRIPT)
    text, _ = help_text([sys.executable, str(tmp_path / "serve.py"), "{port}", "--host", "{host}"], {"ARM": "grouped"})
    assert text is not None and "--help=all" in text and "--max-num-batched-tokens N" in text


def test_a_command_that_cannot_run_gives_the_reason(tmp_path):
    text, why = help_text([str(tmp_path / "no-such-server"), "--port", "{port}"])
    assert text is None and "no-such-server could not be run" in why
