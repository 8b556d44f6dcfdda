"""The emitter's stamps file (``benchmarks/emitter.py``): writing it and reading it back.

Stamps file (JSON lines, written atomically):

* first line ``{"kind": "meta", "args": {...}, "lateness_ns": {"p50", "p99", "max"}, "cpu_s",
  "events", "requests", "dropped"}``;
* one ``{"kind": "request", "rid", "conn", "path", "recv_ns", "prompt_tokens", "max_tokens",
  "prompt_head", "prompt_sha1"}`` per request (``prompt_head``: the first 120 characters of the
  prompt or of the last message; ``prompt_sha1``: the first 16 hex digits of the SHA-1 of the
  whole prompt string (completions) or of ``json.dumps(messages, sort_keys=True)`` (chat), for
  matching a client's request), ``arrived_ns`` (the kernel's arrival stamp of the request's last
  byte, ``CLOCK_MONOTONIC``; null where the kernel gives none);
* one ``{"kind": "event", "rid", "i", "tok", "due_ns", "sent_ns", "wrote_ns", "text"}`` per
  written event: ``i`` counts the request's events from 0 (role chunk and tail included),
  ``tok`` is the tokens in it (0 for the role chunk and the tail), ``sent_ns`` is
  ``monotonic_ns()`` right before the socket write, ``wrote_ns`` right after it returned.
"""
from __future__ import annotations

import json
import os


def pct(xs: list[int], q: float) -> int | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def write_stamps(path: str, args: dict, summary: dict, requests: list[tuple], events: list[tuple],
                 texts: dict[int, list[str]]) -> None:
    """Atomically (a temporary file, then ``os.replace``)."""
    lines = [json.dumps({"kind": "meta", "args": args, **summary})]
    for rid, conn, p, recv, pt, mt, head, sha, arrived in requests:
        lines.append(json.dumps({"kind": "request", "rid": rid, "conn": conn, "path": p, "recv_ns": recv,
                                 "prompt_tokens": pt, "max_tokens": mt, "prompt_head": head, "prompt_sha1": sha,
                                 "arrived_ns": arrived}))
    for rid, i, tok, due, sent, wrote in events:
        text = texts.get(rid, [])
        lines.append(json.dumps({"kind": "event", "rid": rid, "i": i, "tok": tok, "due_ns": due, "sent_ns": sent,
                                 "wrote_ns": wrote, "text": text[i] if i < len(text) else ""}))
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def load_stamps(path: str) -> tuple[dict, dict[int, dict], dict[int, list[dict]]]:
    """A stamps file -> ``(meta, requests by rid, events by rid in send order)``."""
    meta: dict = {}
    requests: dict[int, dict] = {}
    events: dict[int, list[dict]] = {}
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d["kind"] == "meta":
                meta = d
            elif d["kind"] == "request":
                requests[d["rid"]] = d
            else:
                events.setdefault(d["rid"], []).append(d)
    for evs in events.values():
        evs.sort(key=lambda e: e["i"])
    return meta, requests, events
