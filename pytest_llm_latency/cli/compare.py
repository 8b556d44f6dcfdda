"""``pytest-llm-latency compare BASE.json CAND.json``: the deploy gate between two saved runs.

Each file is a baseline (``--llm-latency-save-baseline``) or a JSON results file written with
``--llm-latency-json-samples``.  Every test present in both is compared on every tolerance
(``core.measure.compare``: seeded bootstrap CI of the candidate/baseline percentile ratio; a regression
is beyond the tolerance *and* significant).  Exit status: 0 no regression, 1 a regression,
2 unusable input (a file missing, not JSON, without samples, or no test in common).
"""
from __future__ import annotations

import argparse
import math
import sys

from ..core.measure.compare import (DEFAULT_FLOORS_MS, DEFAULT_TOLERANCES, LABEL, compare_all, fingerprint_changes,
    md_table, parse_tolerances)
from ..core.errors import ConfigError
from ..files import baseline as bfile
from ..files.atomic import write_atomic
from ..files.baseline_match import AMBIGUOUS, describe, match_all

HEADER = ("test", "metric", "base", "candidate", "ratio", "CI", "verdict")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", help="baseline file, or results JSON written with --llm-latency-json-samples")
    p.add_argument("candidate", help="candidate file (same kinds)")
    p.add_argument("--regression", action="append", default=[], metavar="METRIC_STAT=PCT",
                   help="tolerance, e.g. ttft_p95=10%% (repeat or comma-separate; defaults: "
                        + ", ".join(f"{k}={v * 100:g}%%" for k, v in DEFAULT_TOLERANCES.items())
                        + "), or an absolute floor in ms under which no change counts, e.g. ttft_floor=2ms "
                        "(defaults: " + ", ".join(f"{m}_floor={v:g}ms" for m, v in DEFAULT_FLOORS_MS.items()) + ")")
    p.add_argument("--max-regression", action="append", default=[], metavar="METRIC_STAT=PCT",
                   help="deprecated: use --regression (works for this release)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the interval (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--junit-xml", metavar="PATH", help="write one JUnit test case per test x metric")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")


def _pct(r: float) -> str:
    return "+inf%" if math.isinf(r) else f"{(r - 1) * 100:+.1f}%"


def rows_for(base: dict, cand: dict, tolerances: dict, *, confidence: float, seed: int):
    """[(test, Comparison)], [(test, note)], fingerprint changes; raises BaselineError when no test is shared."""
    matches = match_all(base["tests"], cand["tests"])  # exact keys, else a unique file path suffix
    common = {k: m.key for k, m in matches.items() if m.key is not None}
    if not common:
        raise bfile.BaselineError(
            f"no test in common: the baseline has {_names(base)}, the candidate {_names(cand)} "
            f"(entries are '<nodeid>::<workload>'; compare runs of the same SLO files)"
            + "".join(f"; {k}: {describe(m, k)}" for k, m in matches.items() if m.how == AMBIGUOUS))
    out = []
    notes = [(key, said) for key, m in matches.items() if (said := describe(m, key))]
    for key, bkey in common.items():
        comps, skipped = compare_all(bfile.decode_samples(base["tests"][bkey]["samples"]),
                                     bfile.decode_samples(cand["tests"][key]["samples"]), tolerances,
                                     confidence=confidence, seed=seed)
        out += [(key, c) for c in comps]
        notes += [(key, s) for s in skipped]
    used = set(common.values())
    notes += [(k, "new: not in the baseline") for k in cand["tests"] if k not in common]
    notes += [(k, "missing: in the baseline, not in the candidate") for k in base["tests"] if k not in used]
    return out, notes, fingerprint_changes(base.get("fingerprint") or {}, cand.get("fingerprint") or {})


def explained(base: dict, cand: dict, rows, changes: list[str]) -> list[tuple[str, str]]:
    """[(test, sentence)]: each test's TPOT/E2E regression split, on run totals, into engine step
    time and tokens per step (``core.measure.decode_totals``, from the files' ``decode_totals``)."""
    from ..core.measure.decode_totals import DecodeTotals, explain

    def totals(entry: dict | None):
        raw = bfile.decode_totals_of(entry)
        return None if raw is None else DecodeTotals.from_json(raw)

    matches = match_all(base["tests"], cand["tests"])
    out = []
    for test in dict.fromkeys(t for t, c in rows if c.status == "regression" and c.metric in ("tpot", "e2e")):
        metrics = {c.metric for t, c in rows if t == test and c.status == "regression"}
        bkey = matches[test].key if test in matches else None
        out.append((test, explain("tpot" if "tpot" in metrics else "e2e", totals(base["tests"].get(bkey or "")),
                                  totals(cand["tests"][test]), changes)))
    return out


def _names(doc: dict) -> str:
    names = list(doc["tests"])
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "") if names else "no tests"


def table(rows) -> list[list[str]]:
    return [[test, f"{LABEL[c.metric]} {c.stat}", f"{c.base:.2f}" if math.isfinite(c.base) else "inf",
             f"{c.cand:.2f}" if math.isfinite(c.cand) else "inf", f"{c.ratio:.3f}",
             f"{_pct(c.lower)}..{_pct(c.upper)}", c.status.upper() if c.status == "regression" else c.status]
            for test, c in rows]


def junit(rows, notes, path: str) -> None:
    from junit_xml import TestCase, TestSuite, to_xml_report_string

    cases = []
    for test, c in rows:
        tc = TestCase(f"{c.key}", classname=test, elapsed_sec=0.0)
        tc.stdout = c.message()
        if c.status == "regression":
            tc.add_failure_info(message=c.message(), failure_type="regression")
        cases.append(tc)
    for test, note in notes:
        tc = TestCase("baseline", classname=test)
        tc.add_skipped_info(note)
        cases.append(tc)
    write_atomic(path, to_xml_report_string([TestSuite("pytest-llm-latency compare", cases)]))


def run(args: argparse.Namespace) -> int:
    try:
        tolerances = dict(DEFAULT_TOLERANCES)
        flag, given = "--regression", args.regression
        if args.max_regression:
            if args.regression:
                raise ConfigError("--max-regression (deprecated) and --regression are both given: "
                                  "keep --regression only")
            print("pytest-llm-latency compare: '--max-regression' is deprecated, use '--regression' instead "
                  "(the old name works for this release)", file=sys.stderr)
            flag, given = "--max-regression", args.max_regression
        tolerances.update(parse_tolerances(",".join(given), flag))
        if not 0.5 <= args.confidence < 1:
            raise ConfigError(f"--confidence: expected a level in [0.5, 1) like 0.95, got {args.confidence}")
        base, cand = bfile.load(args.base), bfile.load(args.candidate)
        rows, notes, changes = rows_for(base, cand, tolerances, confidence=args.confidence, seed=args.seed)
    except (bfile.BaselineError, ConfigError) as exc:
        print(f"pytest-llm-latency compare: {exc}", file=sys.stderr)
        return 2
    body = table(rows)
    if args.markdown:
        sys.stdout.write(md_table(HEADER, body))
    else:
        widths = [max(len(str(r[i])) for r in [HEADER, *body]) for i in range(len(HEADER))]
        for r in [HEADER, *body]:
            print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
    for test, c in rows:
        if c.status != "ok":
            print(f"{c.status}: {test}: {c.message()}")
    for test, why in explained(base, cand, rows, changes):
        print(f"explained: {test}: {why}")
    for test, note in notes:
        print(f"note: {test}: {note}")
    if changes:
        print("warning: fingerprint differs: " + "; ".join(changes))
    if args.junit_xml:
        junit(rows, notes, args.junit_xml)
    regressions = sum(1 for _, c in rows if c.status == "regression")
    print(f"{regressions} regression(s) in {len(rows)} comparison(s) of {len({t for t, _ in rows})} test(s)")
    return 1 if regressions else 0
