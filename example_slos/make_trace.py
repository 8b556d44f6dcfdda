"""Write the small synthetic Mooncake-format trace that ``trace.slo.yaml`` replays.

    python example_slos/make_trace.py            # rewrites example_slos/traces/example.jsonl
    python example_slos/make_trace.py OUT.jsonl  # somewhere else

Seeded and stdlib-only: the same script writes the same bytes on every machine
(``tests/unit/core/spec/test_example_trace.py`` checks the committed file against a fresh run).

The traffic it describes, about 9 s at speed 1:

* a support bot: one 512-token system prompt (one hash id) shared by its rows, then each
  user's own text;
* a RAG service: two shared 512-token blocks of instructions and retrieved context (two hash
  ids), then the question;
* one-off short requests that share nothing;
* two chat sessions of two turns: the second turn comes ``delay`` ms after the first one's
  answer and carries only its new tokens (the replay sends history + new tokens).

Prompts stay under ~2,100 tokens and outputs are 16-64 tokens, so the replay takes seconds on
the embedded reference target. Ids are consecutive integers in order of first use, as in the
Mooncake traces; every row has exactly ceil(input_length / 512) ids, the last block partial.
"""
from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

BLOCK = 512
SEED = 27
OUT = Path(__file__).resolve().parent / "traces" / "example.jsonl"


class _Ids:
    """Hands out hash ids in order of first use (0, 1, 2, ...), as the Mooncake traces number them."""

    def __init__(self) -> None:
        self.next = 0

    def fresh(self, n: int) -> list[int]:
        ids = list(range(self.next, self.next + n))
        self.next += n
        return ids


def _row(ids: _Ids, rng: random.Random, shared: list[int], own_tokens: int) -> dict:
    """A row whose prompt is the ``shared`` full blocks followed by ``own_tokens`` of its own text."""
    input_length = len(shared) * BLOCK + own_tokens
    own_blocks = math.ceil(input_length / BLOCK) - len(shared)
    return {
        "input_length": input_length,
        "output_length": rng.randint(16, 64),
        "hash_ids": shared + ids.fresh(own_blocks),
    }


def build(seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    ids = _Ids()
    support_system = ids.fresh(1)       # the support bot's system prompt: one block
    rag_context = ids.fresh(2)          # the RAG service's instructions and context: two blocks

    # the independent rows: 7 support, 6 RAG, 7 one-off, in a seeded order, then spread over ~9 s
    plan = ["support"] * 7 + ["rag"] * 6 + ["oneoff"] * 7
    rng.shuffle(plan)
    rows: list[dict] = []
    for kind in plan:
        if kind == "support":
            rows.append(_row(ids, rng, support_system, rng.randint(40, 700)))
        elif kind == "rag":
            rows.append(_row(ids, rng, rag_context, rng.randint(20, 300)))
        else:
            rows.append(_row(ids, rng, [], rng.randint(30, 400)))

    # arrival offsets: bursts and gaps, non-decreasing, the first at 0, the last at ~9 s
    t = 0
    for row in rows:
        row["timestamp"] = t
        t += rng.choice([0, 200, 400, 600, 800, 1000])

    # two sessions of two turns; each first turn is an ordinary timestamped row (support bot),
    # each second turn follows it in the file with a delay and its new tokens only
    out: list[dict] = []
    session_at = {4: "s1", 12: "s2"}
    for i, row in enumerate(rows):
        session = session_at.get(i)
        if session is None:
            out.append(_ordered(row))
            continue
        first = _row(ids, rng, support_system, rng.randint(100, 400))
        first["timestamp"] = row["timestamp"]
        first["session_id"] = session
        out.append(_ordered(row))
        out.append(_ordered(first))
        follow = _row(ids, rng, [], rng.randint(40, 200))
        follow["delay"] = rng.choice([400, 600, 800])
        follow["session_id"] = session
        out.append(_ordered(follow))
    return _renumber(out)


def _renumber(rows: list[dict]) -> list[dict]:
    """Number the ids 0, 1, 2, ... in order of first appearance in the file, as Mooncake does."""
    new: dict[int, int] = {}
    for row in rows:
        row["hash_ids"] = [new.setdefault(i, len(new)) for i in row["hash_ids"]]
    return rows


def _ordered(row: dict) -> dict:
    """Fields in the order the docs list them (timestamp or delay first)."""
    keys = ("timestamp", "delay", "input_length", "output_length", "hash_ids", "session_id")
    return {k: row[k] for k in keys if k in row}


def write(path: Path, seed: int = SEED) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row) + "\n" for row in build(seed))
    path.write_text(text, encoding="utf-8", newline="\n")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    write(target)
    print(f"wrote {target}")
