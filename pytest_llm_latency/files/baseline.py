"""The baseline file: each latency test's raw per-request samples (a miss stored as null) and a
fingerprint of what produced them, so a later run (or ``pytest-llm-latency compare``) can judge a
candidate statistically.  Format ``data/baseline.schema.json``, version ``FORMAT_VERSION``, described in
docs/result-json.md#baselines.  Written atomically (``files.atomic``); read with a structural check
that names the file, the key and the fix.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from .atomic import write_atomic

FORMAT = "pytest-llm-latency-baseline"
FORMAT_VERSION = 1
#: per-request sample lists, the metric key of ``core.measure.compare`` each maps to
SAMPLE_KEYS = {"ttft_ms": "ttft", "ttfo_ms": "ttfo", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2e",
               "output_tps": "output_tps"}
COUNT_KEYS = ("output_tokens", "prompt_tokens")
#: ``decode_totals`` keys (the fields of ``core.measure.decode_totals.DecodeTotals``; a test holds them equal)
DECODE_TOTALS_NUMBERS = ("decode_tokens", "decode_ms", "tokens_per_step", "acceptance_rate", "step_ms",
                         "step_efficiency", "decode_efficiency")
DECODE_TOTALS_TEXTS = ("source",)
#: where results JSON version 2 keeps them when a result has no ``decode_totals`` (a speculating run)
_PART_KEYS = {"spec_decode": ("decode_tokens", "decode_ms", "tokens_per_step", "acceptance_rate", "step_ms",
                              "source"),
              "roofline": ("step_efficiency", "decode_efficiency")}


class BaselineError(ValueError):
    """A baseline or results file that cannot be used; the message names the file and the fix."""


def entry_key(nodeid: str, workload: str) -> str:
    return f"{nodeid}::{workload}"


def encode_samples(values: Mapping[str, list[float]]) -> dict[str, list]:
    """``{"ttft": [..]}`` (``core.result.result.metric_values``) -> ``{"ttft_ms": [..]}`` with +inf as null."""
    return {key: [None if not math.isfinite(v) else round(v, 4) for v in values[metric]]
            for key, metric in SAMPLE_KEYS.items() if metric in values}


def decode_samples(samples: Mapping[str, Any]) -> dict[str, list[float]]:
    """The inverse: ``{"ttft": [...]}`` floats, null -> +inf."""
    return {metric: [math.inf if v is None else float(v) for v in samples.get(key) or []]
            for key, metric in SAMPLE_KEYS.items() if key in samples}


def make_document(tests: Mapping[str, Mapping], fingerprint: Mapping) -> dict:
    return {"format": FORMAT, "version": FORMAT_VERSION, "fingerprint": dict(fingerprint), "tests": dict(tests)}


def save(path: str | Path, doc: Mapping) -> None:
    validate(doc, str(path))
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=False) + "\n")


def _fail(where: str, what: str) -> BaselineError:
    return BaselineError(f"{where}: {what}")


def validate(doc: Any, where: str) -> dict:
    """The structural rules of ``data/baseline.schema.json`` (the package has no runtime
    jsonschema dependency; the test suite checks both agree)."""
    if not isinstance(doc, dict):
        raise _fail(where, f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise _fail(where, f"not a baseline file (format {doc.get('format')!r}, expected {FORMAT!r}); "
                           f"write one with --llm-latency-save-baseline, or pass a results file written "
                           f"with --llm-latency-json-samples")
    if doc.get("version") != FORMAT_VERSION:
        raise _fail(where, f"baseline format version {doc.get('version')!r} is not supported (this plugin "
                           f"reads version {FORMAT_VERSION}); save the baseline again with this version")
    if not isinstance(doc.get("fingerprint"), dict):
        raise _fail(where, "'fingerprint' must be an object")
    tests = doc.get("tests")
    if not isinstance(tests, dict):
        raise _fail(where, "'tests' must be an object of '<nodeid>::<workload>' entries")
    for name, entry in tests.items():
        at = f"{where}: tests[{name!r}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("samples"), dict):
            raise BaselineError(f"{at}: expected an object with 'samples'")
        for key, vals in entry["samples"].items():
            if key not in SAMPLE_KEYS and key not in COUNT_KEYS:
                raise BaselineError(f"{at}.samples: unknown key {key!r} (known: "
                                    f"{', '.join(list(SAMPLE_KEYS) + list(COUNT_KEYS))})")
            if not isinstance(vals, list) or not all(v is None or (isinstance(v, (int, float))
                                                                    and not isinstance(v, bool)) for v in vals):
                raise BaselineError(f"{at}.samples.{key}: expected a list of numbers (null = a failed request)")
        if "decode_totals" in entry:
            _check_totals(entry["decode_totals"], f"{at}.decode_totals")
    return doc


def _check_totals(totals: Any, at: str) -> None:
    if not isinstance(totals, dict):
        raise BaselineError(f"{at}: expected an object of the run's decode totals, got {type(totals).__name__}")
    for key, v in totals.items():
        if key in DECODE_TOTALS_TEXTS:
            if not isinstance(v, str):
                raise BaselineError(f"{at}.{key}: expected a string, got {v!r}")
        elif key in DECODE_TOTALS_NUMBERS:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise BaselineError(f"{at}.{key}: expected a number >= 0, got {v!r}")
        else:
            raise BaselineError(f"{at}: unknown key {key!r} (known: "
                                f"{', '.join(DECODE_TOTALS_NUMBERS + DECODE_TOTALS_TEXTS)})")


def decode_totals_of(entry: Mapping | None) -> dict | None:
    """An entry's ``decode_totals`` (None: the baseline stores none, an older one)."""
    totals = (entry or {}).get("decode_totals")
    return dict(totals) if isinstance(totals, dict) else None


def result_totals(r: Mapping) -> dict | None:
    """A result's decode totals: its own ``decode_totals``, else its version-2 parts (a speculating run)."""
    if isinstance(r.get("decode_totals"), dict):
        return dict(r["decode_totals"])
    sd = r.get("spec_decode")
    if not isinstance(sd, dict) or "decode_tokens" not in sd or "decode_ms" not in sd:
        return None
    out = {}
    for part, keys in _PART_KEYS.items():
        got = r.get(part)
        if isinstance(got, dict):
            out.update({k: got[k] for k in keys if got.get(k) is not None})
    if isinstance(r.get("roofline"), dict) and r["roofline"].get("status") not in ("pass", "fail", "report"):
        out.pop("step_efficiency", None)
        out.pop("decode_efficiency", None)
    return out


#: results JSON versions read as baselines: 3 (``measurement.xdist_worker``), 2 (typed parts), and 1,
#: whose ``version`` was the plugin's version string (``docs/result-json.md``); all keep ``samples``
#: and ``fingerprint`` per result in the same place
RESULTS_VERSIONS = (1, 2, 3)


def results_version(doc: Mapping) -> int | None:
    """1, 2 or 3 for a results document this plugin reads; None for another version."""
    v = doc.get("version")
    if isinstance(v, str) or v is None:
        return 1
    return v if v in RESULTS_VERSIONS and not isinstance(v, bool) else None


def from_results(doc: Any, where: str) -> dict:
    """A JSON results file written with ``--llm-latency-json-samples`` as a baseline document
    (results version 1, 2 or 3)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise _fail(where, "neither a baseline file nor a JSON results file (no 'results' list)")
    if results_version(doc) is None:
        raise _fail(where, f"results JSON version {doc.get('version')!r} is not one this plugin reads "
                           f"({', '.join(map(str, RESULTS_VERSIONS))}): compare it with the plugin that wrote it, "
                           f"or save a baseline with --llm-latency-save-baseline")
    tests = {}
    for r in doc["results"]:
        if isinstance(r, dict) and isinstance(r.get("samples"), dict):
            totals = result_totals(r)
            tests[entry_key(str(r.get("nodeid")), str(r.get("workload")))] = {
                "samples": r["samples"], "workload": {"name": r.get("workload")},
                **({"fingerprint": r["fingerprint"]} if isinstance(r.get("fingerprint"), dict) else {}),
                **({"decode_totals": totals} if totals else {})}
    if not tests:
        raise _fail(where, "this JSON results file has no per-request samples: write it with "
                           "--llm-latency-json-samples (or save a baseline with --llm-latency-save-baseline)")
    fp = doc.get("fingerprint")
    return validate(make_document(tests, fp if isinstance(fp, dict) else {}), where)


def load(path: str | Path) -> dict:
    """Read a baseline file (or a results file with samples); BaselineError names what is wrong."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _fail(where, "no such file (save one first with --llm-latency-save-baseline PATH)") from None
    except OSError as exc:
        raise _fail(where, f"cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(where, f"not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    if isinstance(doc, dict) and "results" in doc and "format" not in doc:
        return from_results(doc, where)
    return validate(doc, where)
