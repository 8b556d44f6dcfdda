"""What the renderers read: the run's document parsed back into typed values.

A result crosses pytest-xdist (and lands in the JSON file) as its JSON object
(``document.result_entry``); ``ResultEntry.parse`` turns that object into typed values once,
here, so that the terminal table, the HTML page, JUnit properties and the step summary read
attributes, never the dict.  Parsing is lenient where the page must be (an older file, another
producer): a missing key is its default, an unknown key is ignored, and a value of the wrong
type is left out (None, or an empty part), so a malformed part draws nothing rather than failing.
``findings`` keeps each finding's check (``core.checks``) to the renderers.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Sequence, TypeVar, Union, get_args, get_type_hints

from ...core.result.result_parts import PARTS, Part, WithParts
# the lenient value readers and the rows of issue 37's parts live in their own modules; re-exported from here
from .values import Point, _dict, _list, count, num, points, text
from .traffic_rows import ArmClass, ArmRow, ClassRow, SplitRow, StallCause  # noqa: F401

P = TypeVar("P", bound=Part)


def _fits(value: Any, hint: Any) -> bool:
    """``value`` is of the annotated type (the parts' annotations: scalars, Literals, lists, dicts)."""
    if value is None:
        return True
    kinds = [a for a in (get_args(hint) if getattr(hint, "__origin__", None) is Union or type(hint).__name__ ==
                         "UnionType" else (hint,)) if a is not type(None)]
    for kind in kinds:
        origin = getattr(kind, "__origin__", kind)
        if origin is float and num(value) is not None or origin is int and count(value) is not None:
            return True
        if origin in (str, list, dict) and isinstance(value, origin) or str(origin) == "typing.Literal" and \
                value in get_args(kind):
            return True
    return False


def part(cls: type[P], raw: Any) -> P:
    """The part ``cls`` from its JSON object; a field of the wrong type (or unknown) left out."""
    hints = get_type_hints(cls)
    data = _dict(raw)
    return cls(**{f.name: data[f.name] for f in fields(cls)  # type: ignore[arg-type]
                  if f.name in data and _fits(data[f.name], hints[f.name])})


@dataclass(frozen=True)
class Stats:
    """One metric's statistics (ms; tok/s for ``output_tps``); a statistic that is a miss is None."""
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    min: float | None = None
    n: int = 0
    censored: int = 0
    given: frozenset[str] = frozenset()     # the statistics the JSON carried (a null one: a miss)

    def value(self, stat: str) -> float | None:
        return getattr(self, stat) if stat in self.given else None

    def is_miss(self, stat: str) -> bool:
        """The statistic is +inf: failed requests counted as misses reached its rank."""
        return stat in self.given and getattr(self, stat) is None and self.censored > 0

    @classmethod
    def parse(cls, raw: Any) -> "Stats | None":
        if not isinstance(raw, dict):
            return None
        names = {"mean", "p50", "p90", "p95", "p99", "max", "min"}
        return cls(**{k: num(raw[k]) for k in names if k in raw}, n=count(raw.get("n")) or 0,
                   censored=count(raw.get("censored")) or 0, given=frozenset(names & set(raw)))


@dataclass(frozen=True)
class Bound:
    """A budget judged at a confidence (``core.measure.verdict``)."""
    status: str | None = None
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    n: int | None = None
    confidence: float | None = None
    method: str | None = None
    would_decide: int | None = None
    stopped_by: str | None = None

    @classmethod
    def parse(cls, raw: dict) -> "Bound":
        return cls(text(raw.get("status")), num(raw.get("estimate")), num(raw.get("lower")), num(raw.get("upper")),
                   count(raw.get("n")), num(raw.get("confidence")), text(raw.get("method")),
                   count(raw.get("would_decide")), text(raw.get("stopped_by")))

    def items(self) -> list[tuple[str, Any]]:
        return [(f.name, getattr(self, f.name)) for f in fields(self) if getattr(self, f.name) is not None]


@dataclass(frozen=True)
class Cdf:
    points: tuple[Point, ...]
    n: int
    misses: int

    @classmethod
    def parse(cls, raw: Any) -> "Cdf | None":
        if not isinstance(raw, dict):
            return None
        pts = points(raw.get("points"))
        return cls(pts, count(raw.get("n")) or len(pts), count(raw.get("misses")) or 0)


@dataclass(frozen=True)
class RequestRow:
    """One measured request (``detail.request_rows``), the fields the page draws."""
    send_ms: float | None
    first_token_ms: float | None = None
    last_token_ms: float | None = None
    end_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    prompt_tokens: int | None = None
    status: str = "ok"

    @classmethod
    def parse(cls, raw: dict) -> "RequestRow":
        ms = [num(raw.get(k)) for k in ("send_ms", "first_token_ms", "last_token_ms", "end_ms", "ttft_ms", "tpot_ms",
                                        "e2e_ms")]
        return cls(ms[0], ms[1], ms[2], ms[3], ms[4], ms[5], ms[6], count(raw.get("prompt_tokens")),
                   text(raw.get("status")) or "ok")


@dataclass(frozen=True)
class BucketRow:
    """One prompt-length bucket of a ``ttft_<stat>_by_prompt`` budget (``core.checks.by_prompt``)."""
    key: str
    budget: str
    status: str | None
    n: int | None
    lo: float | None
    hi: float | None
    budget_ms: float | None
    estimate_ms: float | None
    judged: bool                    # an estimate was made (None then: a miss)
    longest: int | None
    requests: str | None
    scalars: tuple[tuple[str, Any], ...]   # the row's figures for JUnit, in the JSON's order

    @classmethod
    def parse(cls, raw: dict) -> "BucketRow":
        return cls(text(raw.get("key")) or "", text(raw.get("budget")) or "", text(raw.get("status")),
                   count(raw.get("n")), num(raw.get("lo")), num(raw.get("hi")), num(raw.get("budget_ms")),
                   num(raw.get("estimate_ms")), "estimate_ms" in raw, count(raw.get("longest")),
                   text(raw.get("requests")),
                   tuple((k, v) for k, v in raw.items() if k not in ("key", "budget", "bucket")
                         and isinstance(v, (int, float, str))))


@dataclass(frozen=True)
class Shown:
    """A finding as the renderers show it: its check, its kind (``core.findings.KINDS``), its text."""
    check: str
    kind: str
    text: str


#: the result's scalars, in the JSON's order (the JUnit ``llm.<key>`` properties)
SCALARS = ("nodeid", "workload", "class", "verdict", "n", "short_outputs", "failed_requests", "prompt_tokens",
           "output_tokens", "concurrency")


@dataclass
class ResultEntry(WithParts):
    """One result of the run's document, typed (``parse``)."""
    nodeid: str = "?"
    workload: str | None = None
    verdict: str = "?"
    n: int | None = None
    short_outputs: int = 0
    failed_requests: int = 0
    scalars: tuple[tuple[str, Any], ...] = ()
    stats: dict[str, Stats] = field(default_factory=dict)          # by JSON key: ttft_ms, output_tps, reasoning_tokens
    budgets: dict[str, float] = field(default_factory=dict)        # ttft_p95_ms, output_tps_min_tok_s
    bounds: dict[str, Bound] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    findings: list[Shown] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    buckets: list[BucketRow] = field(default_factory=list)         # by_prompt.buckets, typed
    classes: list[ClassRow] = field(default_factory=list)          # mix.classes, typed
    arm_rows: list[ArmRow] = field(default_factory=list)          # arms.arms (a server sweep), typed
    turn_reuse: dict[int, float] = field(default_factory=dict)     # agent.turns: turn -> prefix reuse
    split: list[SplitRow] = field(default_factory=list)            # disagg.ttft_split, typed
    stall_causes: list[StallCause] = field(default_factory=list)   # stall.causes, typed
    requests: list[RequestRow] = field(default_factory=list)       # every request row (send_ms None: untimed)
    untimed: int = 0                                               # request rows with no send time (or malformed)
    cdf: dict[str, Cdf] | None = None                              # None: no per-request detail
    baseline_cdf: dict[str, Cdf] = field(default_factory=dict)
    timeline: dict[str, tuple[Point, ...]] = field(default_factory=dict)  # server.metrics_timeline

    def stat(self, key: str) -> Stats:
        return self.stats.get(key) or Stats()

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> "ResultEntry":
        d = dict(raw)
        parts = {c.NAME: part(c, d.get(c.NAME)) for c in PARTS}
        rows = [r for r in _list(d.get("requests")) if isinstance(r, dict)]
        timed = [RequestRow.parse(r) for r in rows]
        lists = {k: [str(x) for x in _list(d.get(k))] for k in ("violations", "errors", "notes", "causes")}
        return cls(
            nodeid=str(d.get("nodeid", "?")), workload=text(d.get("workload")), verdict=str(d.get("verdict", "?")),
            n=count(d.get("n")),
            short_outputs=count(d.get("short_outputs")) or 0, failed_requests=count(d.get("failed_requests")) or 0,
            scalars=tuple((k, d[k]) for k in SCALARS if d.get(k) is not None),
            stats={k: s for k, v in d.items() if k.endswith("_ms") or k in ("output_tps", "reasoning_tokens")
                   for s in (Stats.parse(v),) if s is not None},
            budgets={str(k): float(v) for k, v in _dict(d.get("budgets")).items() if num(v) is not None},
            bounds={str(k): Bound.parse(v) for k, v in _dict(d.get("bounds")).items() if isinstance(v, dict)},
            **lists, findings=findings_of(d.get("findings"), lists),  # type: ignore[arg-type]
            failures={str(k): v for k, v in _dict(d.get("failures")).items() if count(v) is not None},
            **parts,  # type: ignore[arg-type]
            buckets=[BucketRow.parse(b) for b in _list(_dict(d.get("by_prompt")).get("buckets"))
                     if isinstance(b, dict)],
            classes=[ClassRow.parse(c) for c in _list(_dict(d.get("mix")).get("classes")) if isinstance(c, dict)],
            arm_rows=[ArmRow.parse(a) for a in _list(_dict(d.get("arms")).get("arms")) if isinstance(a, dict)],
            turn_reuse={t["turn"]: float(t["reuse"]) for t in _list(_dict(d.get("agent")).get("turns"))
                        if isinstance(t, dict) and count(t.get("turn")) is not None
                        and num(t.get("reuse")) is not None},
            split=[s for x in _list(_dict(d.get("disagg")).get("ttft_split")) if isinstance(x, dict)
                   for s in (SplitRow.parse(x),) if s is not None],
            stall_causes=[StallCause.parse(c) for c in _list(_dict(d.get("stall")).get("causes"))
                          if isinstance(c, dict)],
            requests=timed,
            untimed=len(_list(d.get("requests"))) - sum(1 for r in timed if r.send_ms is not None),
            cdf=None if not isinstance(d.get("cdf"), dict) else _cdfs(d["cdf"]),
            baseline_cdf=_cdfs(_dict(_dict(d.get("baseline")).get("cdf"))),
            timeline={str(k): points(v) for k, v in _dict(_dict(d.get("server")).get("metrics_timeline")).items()})


def _cdfs(raw: dict) -> dict[str, Cdf]:
    return {str(k): c for k, v in raw.items() for c in (Cdf.parse(v),) if c is not None}


def findings_of(raw: Any, lists: dict[str, list[str]]) -> list[Shown]:
    """The entry's findings with their checks (JSON ``findings``); an entry without them (an older
    file) gets its lists' texts, check unknown."""
    given = [Shown(str(f.get("check", "?")), str(f.get("kind", "note")), str(f.get("text", "")))
             for f in _list(raw) if isinstance(f, dict)]
    if given or raw is not None:
        return given
    kinds = (("violations", "violation"), ("causes", "cause"), ("errors", "error"), ("notes", "note"))
    return [Shown("?", kind, t) for key, kind in kinds for t in lists[key]]


Entry = Union[ResultEntry, Mapping[str, Any]]


def entry_of(r: Entry) -> ResultEntry:
    """``r`` typed: a ``ResultEntry`` as it is, a JSON object parsed."""
    return r if isinstance(r, ResultEntry) else ResultEntry.parse(r)


def entries_of(results: Sequence[Entry]) -> list[ResultEntry]:
    return [entry_of(r) for r in results if isinstance(r, (ResultEntry, Mapping))]
