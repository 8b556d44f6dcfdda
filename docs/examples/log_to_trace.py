"""Turn a request log into a Mooncake-format trace for `trace:` replay (stdlib only).

    python log_to_trace.py requests.jsonl trace.jsonl            # one JSON object a line
    python log_to_trace.py --vllm vllm.log trace.jsonl           # vLLM's request log
    python log_to_trace.py --block-tokens 512 ...                # the trace_block_tokens to replay with

JSON lines input, one request each:

    {"time": 1767261600.25, "prompt_token_ids": [128000, 9906, ...], "output_tokens": 57}
    {"time": "2026-01-01T10:00:00.310", "prompt_tokens": 812, "output_tokens": 40}

``time``: arrival, epoch seconds or an ISO-8601 string (give milliseconds). With
``prompt_token_ids`` the prompt is cut into blocks of ``--block-tokens`` tokens (the last one
partial) and each block gets a prefix-chained hash: sha256 of the previous block's digest and
this block's ids, so a block's id names the block *and everything before it*, as a prefix cache
sees it. Digests are numbered 0, 1, 2, ... in order of first appearance. With only
``prompt_tokens`` (a count) the row's blocks get fresh ids: it shares nothing.

``--vllm`` reads `vllm serve --enable-log-requests --enable-log-outputs` logs: the arrival is the
time of the line with the request's ``prompt_token_ids`` ("Received request ..." up to vLLM
0.11, "Request ... details" at DEBUG level later), the output count is the length of its
``output_token_ids`` ("Generated response ..."; streaming deltas are summed). Each line must
carry a date and time with milliseconds (see docs/trace-replay.md for a logging config).

Rows come out sorted by arrival, ``timestamp`` in ms from the first one. Every row is an
independent timestamped row: a log does not say which requests were turns of one session, but a
later turn's prompt starts with the earlier one's, so the hashes share those blocks anyway.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

_WHEN = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)")
_PROMPT_IDS = re.compile(r"(?:Received request|Request) (\S+?):? .*?prompt_token_ids: \[([\d, ]*)\]")
_OUTPUT_IDS = re.compile(r"Generated response (\S+?)( \(streaming (?:delta|complete)\))?: "
                         r".*output_token_ids: \[([\d, ]*)\]")


class LogError(ValueError):
    """A log line this converter cannot read; the message names the file and line."""


def _seconds(value: object, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.replace(",", "."))
        except ValueError:
            raise LogError(f"{where}: time {value!r} is neither epoch seconds nor ISO-8601") from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        return t.timestamp()
    raise LogError(f"{where}: time must be epoch seconds or an ISO-8601 string, got {value!r}")


class BlockHasher:
    """Prefix-chained block ids, numbered in order of first appearance."""

    def __init__(self, block_tokens: int) -> None:
        if block_tokens < 1:
            raise ValueError("block_tokens must be >= 1")
        self.block_tokens = block_tokens
        self._ids: dict[bytes, int] = {}

    def _number(self, digest: bytes) -> int:
        return self._ids.setdefault(digest, len(self._ids))

    def hash_ids(self, token_ids: list[int]) -> list[int]:
        parent = b""
        out = []
        for start in range(0, len(token_ids), self.block_tokens):
            block = ",".join(str(t) for t in token_ids[start:start + self.block_tokens])
            parent = hashlib.sha256(parent + b"|" + block.encode()).digest()
            out.append(self._number(parent))
        return out

    def fresh_ids(self, n_tokens: int) -> list[int]:
        """Ids for a prompt known only by its length: unique blocks, shared with nothing."""
        return [self._number(hashlib.sha256(b"fresh|%d" % len(self._ids)).digest())
                for _ in range(math.ceil(n_tokens / self.block_tokens))]


def read_jsonl(path: Path) -> list[dict]:
    """Requests as ``{"time": s, "prompt_token_ids" | "prompt_tokens", "output_tokens"}``."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise LogError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise LogError(f"{where}: expected a JSON object")
        for key in ("time", "output_tokens"):
            if key not in rec:
                raise LogError(f"{where}: missing field {key!r}")
        if "prompt_token_ids" not in rec and "prompt_tokens" not in rec:
            raise LogError(f"{where}: needs prompt_token_ids (a list) or prompt_tokens (a count)")
        rec = dict(rec, time=_seconds(rec["time"], where), where=where)
        out.append(rec)
    return out


def read_vllm(path: Path) -> list[dict]:
    """Requests from a vLLM server log: arrival and prompt ids, plus the generated token count."""
    arrivals: dict[str, dict] = {}
    complete: dict[str, int] = {}
    deltas: dict[str, int] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path}:{n}"
        if m := _PROMPT_IDS.search(line):
            when = _WHEN.search(line)
            if when is None:
                raise LogError(f"{where}: no date and time on the line (give vLLM a logging config with them)")
            ids = [int(t) for t in m.group(2).replace(" ", "").split(",") if t]
            arrivals.setdefault(m.group(1), {"time": _seconds(when.group(1), where),
                                             "prompt_token_ids": ids, "where": where})
        elif m := _OUTPUT_IDS.search(line):
            count = len([t for t in m.group(3).replace(" ", "").split(",") if t])
            if m.group(2) and "delta" in m.group(2):
                deltas[m.group(1)] = deltas.get(m.group(1), 0) + count
            else:
                complete[m.group(1)] = count
    out = []
    for rid, rec in arrivals.items():
        if rid not in complete and rid not in deltas:
            continue  # no output line (failed, or --enable-log-outputs was off): not replayable
        out.append(dict(rec, output_tokens=complete.get(rid, deltas.get(rid, 0))))
    return out


def to_rows(requests: list[dict], block_tokens: int = 512) -> list[dict]:
    """Mooncake rows, sorted by arrival, timestamps in ms from the first request."""
    hasher = BlockHasher(block_tokens)
    requests = sorted(requests, key=lambda r: r["time"])
    t0 = requests[0]["time"] if requests else 0.0
    rows = []
    for rec in requests:
        ids = rec.get("prompt_token_ids")
        n_in = len(ids) if ids is not None else rec["prompt_tokens"]
        n_out = rec["output_tokens"]
        if not isinstance(n_in, int) or n_in < 1 or not isinstance(n_out, int) or n_out < 1:
            raise LogError(f"{rec['where']}: prompt and output need >= 1 token (got {n_in!r}, {n_out!r})")
        rows.append({
            "timestamp": round((rec["time"] - t0) * 1000),
            "input_length": n_in,
            "output_length": n_out,
            "hash_ids": hasher.hash_ids(ids) if ids is not None else hasher.fresh_ids(n_in),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--vllm", action="store_true", help="the input is a vLLM server log")
    ap.add_argument("--block-tokens", type=int, default=512, help="tokens per hash block (default 512)")
    args = ap.parse_args(argv)
    try:
        requests = read_vllm(args.log) if args.vllm else read_jsonl(args.log)
        rows = to_rows(requests, args.block_tokens)
    except LogError as e:
        print(f"log_to_trace: {e}", file=sys.stderr)
        return 2
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"log_to_trace: {len(rows)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
