"""Which saved baseline entry a test is compared with when pytest's rootdir moved between runs.

A baseline entry is keyed ``<nodeid>::<workload>`` (``baseline.entry_key``), and a node id is
relative to pytest's rootdir.  The rootdir is not a property of the tests: without an ini file
it is the common ancestor of the invocation folder and the arguments, and an option's path
value that exists counts as an argument (``--llm-latency-baseline ../base.json``, with a
space).  So one suite saved as ``suite/chat.slo.yaml::chat::chat`` can be compared as
``a/suite/chat.slo.yaml::chat::chat``, and every test would be "new".

The rule (pure, no I/O):

* the same key matches (``exact``);
* else an entry matches by **file path suffix** (``suffix``) when everything after the file
  path (class, function, parameters, workload) is the same and one file path is a path
  suffix of the other, component by component (``..`` and ``.`` dropped: a node id outside
  the rootdir starts with ``..``) -- and only when that pairing is unique both ways: one
  saved entry fits the test, and no other test of the run fits that entry;
* two or more fits match nothing (``ambiguous``): a rootdir change is a guess, never a
  silent one; the caller says which keys fitted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

EXACT, SUFFIX, AMBIGUOUS, NONE = "exact", "suffix", "ambiguous", "none"


@dataclass(frozen=True)
class EntryMatch:
    """``key``: the saved entry to compare with (None: none); ``how``: exact, suffix,
    ambiguous or none; ``candidates``: the saved keys that fitted by suffix (ambiguous: all of
    them), or the other tests of this run that fit the same saved entry."""

    key: str | None
    how: str
    candidates: tuple[str, ...] = ()
    rivals: tuple[str, ...] = ()


def split_key(key: str) -> tuple[tuple[str, ...], str]:
    """``"../a/suite/t.py::test_g[x]::chat"`` -> ``(("a", "suite", "t.py"), "test_g[x]::chat")``."""
    path, _, rest = key.partition("::")
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    while parts and parts[0] == "..":
        parts.pop(0)
    return tuple(parts), rest


def nodeid_of(key: str) -> str:
    """The node id of a ``<nodeid>::<workload>`` key (its last ``::`` part is the workload)."""
    return key.rpartition("::")[0] or key


def fits(a: str, b: str) -> bool:
    """Keys ``a`` and ``b`` differ only by a rootdir: the same in-file part and workload, and
    one file path a (proper) component suffix of the other."""
    pa, ra = split_key(a)
    pb, rb = split_key(b)
    if ra != rb or not ra or not pa or not pb:
        return False
    short, long_ = (pa, pb) if len(pa) <= len(pb) else (pb, pa)
    return long_[len(long_) - len(short):] == short


def match_entry(saved: Iterable[str], key: str, *, current: Iterable[str] = ()) -> EntryMatch:
    """The saved entry for the test keyed ``key``; ``current``: the keys of the run's other tests
    (so a saved entry that two of them fit matches neither)."""
    saved = list(saved)
    if key in saved:
        return EntryMatch(key, EXACT)
    fitted = tuple(k for k in saved if fits(k, key))
    if len(fitted) > 1:
        return EntryMatch(None, AMBIGUOUS, fitted)
    if not fitted:
        return EntryMatch(None, NONE)
    (entry,) = fitted
    rivals = tuple(sorted({c for c in current if c != key and (c == entry or fits(entry, c))}))
    if rivals:
        return EntryMatch(None, AMBIGUOUS, fitted, rivals)
    return EntryMatch(entry, SUFFIX, fitted)


def match_all(saved: Iterable[str], current: Iterable[str]) -> dict[str, EntryMatch]:
    """Every current key's match (``compare``: both files' keys known): an exact key first;
    a suffix match only for an entry no exact match took, unique both ways."""
    saved, current = list(saved), list(current)
    taken = {k for k in current if k in saved}
    free, others = [k for k in saved if k not in taken], [c for c in current if c not in taken]
    return {key: EntryMatch(key, EXACT) if key in taken else match_entry(free, key, current=others) for key in current}


def describe(match: EntryMatch, key: str, label: str = "baseline") -> str | None:
    """The note for a match that is not exact (None for exact and none)."""
    now = nodeid_of(key)
    if match.how == SUFFIX and match.key is not None:
        return (f"compared with the {label} entry saved as {nodeid_of(match.key)!r}, this run's node id is "
                f"{now!r}: the same file path suffix and workload, pytest's rootdir differs between the runs "
                f"(an ini file, or --rootdir, keeps node ids stable)")
    if match.how == AMBIGUOUS:
        if match.rivals:
            what = (f"the {label} entry {nodeid_of(match.candidates[0])!r} fits this test and "
                    f"{', '.join(repr(nodeid_of(r)) for r in match.rivals)} by file path suffix")
        else:
            what = (f"{len(match.candidates)} {label} entries fit its file path suffix and workload ("
                    f"{', '.join(repr(nodeid_of(c)) for c in match.candidates)})")
        return (f"not matched across a rootdir change: {what}; only a unique match counts -- run both from "
                f"the same rootdir (an ini file, or --rootdir) so node ids match")
    return None
