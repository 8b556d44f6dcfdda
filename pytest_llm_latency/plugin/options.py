"""Options, env vars and ini keys: one table, one help text per setting.

Precedence for every setting: marker > CLI > env > ini > YAML file > default.
The first four are resolved here (global); markers and YAML files add their
per-test layers through ``Settings.pick``.  Every value is validated where it
is read and an error names its source, e.g.
``LLM_LATENCY_SAMPLES='abc' (environment): expected a positive integer``.

Renamed settings (``RENAMED``: old -> new) keep their old flag, env var and ini key for this
release: the value is used at the old name's layer, ``Settings.deprecations`` says what to use
instead (the plugin warns with ``LatencyDeprecationWarning``), and old and new at the same layer
are a ``ConfigError`` naming both.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..core.errors import ConfigError

from ..client import APIS  # one list for options and runner


def _checked(convert: Callable[[str], Any], ok: Callable[[Any], bool]) -> Callable[[str], Any]:
    """``convert(v)``, a ValueError where ``ok`` refuses it."""
    def parse(v: str) -> Any:
        x = convert(v)
        if not ok(x):
            raise ValueError
        return x
    return parse


_pos_int = _checked(int, lambda n: n >= 1)
_nonneg_int = _checked(int, lambda n: n >= 0)
_pos_float = _checked(float, lambda f: math.isfinite(f) and f > 0)
_fraction = _checked(float, lambda f: 0 < f <= 1)
_level = _checked(float, lambda f: 0.5 <= f < 1)


def _auto_or_pos_int(v: str) -> int | str:
    """``samples`` and ``workers``: a positive integer or ``auto``."""
    return "auto" if str(v).strip().lower() == "auto" else _pos_int(v)


def _ray_address(v: str) -> str:
    """A Ray cluster address: ``host:port`` or ``ray://host:port`` (``client/placement/ray/shards.py``)."""
    if not isinstance(v, str) or not v.strip() or any(ch.isspace() for ch in v.strip()):
        raise ValueError
    return v.strip()


def _confidence(v: str) -> float | str:
    """A confidence level in [0.5, 1), or null/none for the point-estimate verdict."""
    return "null" if str(v).strip().lower() in ("null", "none") else _level(v)


def _bool(v: str) -> bool:
    low = str(v).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError


def _url(v: str) -> str:
    if not isinstance(v, str):
        raise TypeError
    v = v.strip()
    scheme, sep, rest = v.partition("://")
    if not sep or scheme.lower() not in ("http", "https", "reference"):
        raise ValueError
    if not rest or rest.startswith("/") or any(ch.isspace() for ch in rest):  # no host
        raise ValueError
    return v


def _metrics_url(v: str) -> str:
    """A pool's Prometheus endpoint: an http(s):// URL of its ``/metrics``, or a path on the target
    (``/prefill/metrics``)."""
    if not isinstance(v, str):
        raise TypeError
    v = v.strip()
    if v.startswith("/") and not v.startswith("//") and not any(ch.isspace() for ch in v):
        return v
    scheme, sep, rest = v.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest.startswith("/") \
            or any(ch.isspace() for ch in rest):
        raise ValueError
    return v


def _link(v: str) -> str:
    """``kv_link``: a catalog link key (``roofline/hardware.yaml`` ``links:``) or GB/s > 0."""
    from ..roofline.catalog import resolve_link

    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise TypeError
    resolve_link(v, "kv_link")  # a ConfigError names the close keys or the bad bandwidth
    return str(v).strip()


def _nonce(v: str) -> str:
    """A replay nonce: what a results file recorded (16 hex digits), or any short token."""
    if not isinstance(v, str):
        raise TypeError
    v = v.strip()
    if not 1 <= len(v) <= 64 or not all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in v):
        raise ValueError
    return v


def _api(v: str) -> str:
    if not isinstance(v, str) or v not in APIS:
        raise ValueError
    return v


@dataclass(frozen=True)
class Opt:
    name: str            # setting name, e.g. "url"; flag --llm-latency-url, env LLM_LATENCY_URL, ini llm_latency_url
    help: str
    parse: Callable[[str], Any] = str
    expect: str = "a string"
    default: Any = None
    flag: bool = False   # store_true CLI switch

    @property
    def cli(self) -> str:
        return "--llm-latency-" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "LLM_LATENCY_" + self.name.upper()

    @property
    def ini(self) -> str:
        return "llm_latency_" + self.name


OPTIONS: tuple[Opt, ...] = (
    Opt("url", "Base URL of the LLM server under test (http://host:port), or reference://HARDWARE/MODEL "
        "for the embedded reference target.", _url, "an http://, https:// or reference:// URL"),
    Opt("model", "Model name to request (default: the first model the server lists in /v1/models)."),
    Opt("api", f"Streaming API dialect: {', '.join(APIS)} (default openai-completions: exact prompt lengths).",
        _api, f"one of {', '.join(APIS)}", "openai-completions"),
    Opt("json", "Write all latency results of the run to this JSON file (atomically).", str, "a path"),
    Opt("html", "Write a self-contained HTML latency report to this file (atomically).", str, "a path"),
    Opt("samples", "Override the number of measured requests per workload, or 'auto': sample until every "
        "budget is decided at the confidence (between min_samples and max_samples; the default). At 95%, "
        "a p95 can pass from 59 samples; with the point estimate (confidence null), a percentile budget "
        "needs p90 10, p95 20, p99 100 samples.",
        _auto_or_pos_int, "a positive integer or 'auto'"),
    Opt("workers", "Worker processes that send a workload's load (an open loop, rate:; a closed loop, "
        "concurrency: C with C >= N; samples: auto rounds, C >= N; a trace replay or agent sessions, whole "
        "sessions per worker; a rate_sweep's steps and an A/B run's blocks, as their loop), each with its own "
        "HTTP client: "
        "N, or 'auto': after the warm-up, streams x its tokens/s per stream (an open loop: requests/s x tokens "
        "per request) / the events/s one process stamps within 1 ms (core/spec/worker_sizing.py), rounded up, at "
        "most one per stream, at most the CPUs (one left when the server is on this host). Default: auto for "
        "those loops (a one-stream run, a prompt_sweep, agent sessions and A/B runs: one process); 1: one "
        "process, as before. A run-wide setting applies to those workloads and leaves the others as they are.",
        _auto_or_pos_int, "a positive integer or 'auto'", "auto"),
    Opt("ray", "Address of a Ray cluster (host:port or ray://host:port; needs pip install "
        "'pytest-llm-latency[ray]'): every workload workers can spread (an open loop, a rate_sweep's steps, a "
        "closed loop, a trace replay, agent sessions, samples: auto rounds) is sent by one shard per node "
        "(STRICT_SPREAD placement; workers: N nodes, default auto = every node), started on one wall-clock "
        "instant, each node's clock offset measured and reported, its exact records merged here. YAML: ray: on "
        "the target or workload.",
        _ray_address, "a Ray cluster address (host:port or ray://host:port)"),
    Opt("confidence", "Judge budgets on confidence bounds at this level (e.g. 0.95): pass when the bound "
        "shows the budget is met, fail when it shows it is missed, else inconclusive; 'null' for the "
        "point estimate. Default: 0.95 (the point estimate for load runs, sweeps, agent sessions and A/B runs).",
        _confidence, "a level in [0.5, 1) like 0.95, or null"),
    Opt("seed", "Seed for the prompt bodies (default 0): the same seed sends the same prompt text; the salts "
        "that keep prompts out of the server's prefix cache also depend on the run's nonce.",
        _nonneg_int, "a non-negative integer", 0),
    Opt("nonce", "Pin the per-run salt nonce (default: a fresh random one per run, recorded as 'nonce' in the "
        "JSON results and the report header) to replay a run's exact prompts. A replay against the same "
        "server hits its prefix cache, which the plugin then reports as an error, not a pass.",
        _nonce, "1-64 letters, digits, '-' or '_' (e.g. the 'nonce' of a results file)"),
    Opt("skip", "Skip every latency test (CI lanes without a server).", _bool, "true or false", False, flag=True),
    Opt("connect_timeout", "Seconds to wait for a TCP/TLS connect (default 10).", _pos_float, "seconds > 0", 10.0),
    Opt("idle_timeout", "Seconds without a byte before a stream counts as stalled (default 60).", _pos_float,
        "seconds > 0", 60.0),
    Opt("total_timeout", "Seconds a single request may take in all (default 600).", _pos_float, "seconds > 0", 600.0),
    Opt("hardware", "Accelerator for the roofline gate: a catalog name, 'auto' (nvidia-smi) or 'local-cpu'."),
    Opt("min_decode_efficiency", "Fail when decode runs below this fraction of the memory-bandwidth ceiling "
        "(e.g. 0.5; YAML roofline.min_decode_efficiency).", _fraction, "a fraction in (0, 1]"),
    # -- deploy gate (plugin/baseline.py, core/measure/compare.py) --
    Opt("save_baseline", "Save every latency test's raw per-request samples and a fingerprint to this "
        "baseline file (atomically) for later --llm-latency-baseline runs.", str, "a path"),
    Opt("baseline", "Judge each latency test against this baseline file (or a results file written with "
        "--llm-latency-json-samples): fail on a regression that is beyond the tolerance and significant.",
        str, "a path"),
    Opt("json_samples", "Also write raw per-request samples to the --llm-latency-json file, so it can serve "
        "as a baseline.", _bool, "true or false", False, flag=True),
    Opt("regression", "Regression tolerances, e.g. 'ttft_p95=10%,tpot_p50=5%' (defaults: ttft_p50=10%, "
        "ttft_p95=15%, tpot_p50=5%, e2e_p50=10%), and absolute floors under which no change counts, e.g. "
        "'ttft_floor=2ms' (defaults: ttft/ttfo/e2e 5ms, itl 2ms, tpot 0.25ms).", str,
        "metric_stat=percent pairs like ttft_p95=10%, or metric_floor=duration like ttft_floor=2ms"),
    Opt("min_prefill_efficiency", "Fail a prompt_sweep workload whose prefill runs below this fraction of the "
        "compute ceiling (MFU, e.g. 0.35; YAML roofline.min_prefill_efficiency).", _fraction, "a fraction in (0, 1]"),
    # -- a disaggregated target (issue 37: core/measure/kv_transfer.py, core/checks/kv_transfer.py) --
    Opt("prefill_metrics_url", "A disaggregated target's prefill pool: its Prometheus /metrics URL "
        "(http://prefill:8100/metrics), or a path on the target URL (/prefill/metrics). Scraped before and after "
        "the samples for the TTFT split and the KV transfer (kv_transfer_<stat> budgets); a reference:// target "
        "with pd_link= serves its pools at /prefill/metrics and /decode/metrics (the default there). YAML "
        "target.prefill_metrics_url.", _metrics_url, "an http(s):// URL of a /metrics endpoint, or a path like "
        "/prefill/metrics"),
    Opt("decode_metrics_url", "A disaggregated target's decode pool: its Prometheus /metrics URL, or a path on the "
        "target URL (/decode/metrics); see prefill_metrics_url. YAML target.decode_metrics_url.", _metrics_url,
        "an http(s):// URL of a /metrics endpoint, or a path like /decode/metrics"),
    Opt("kv_link", "The link a disaggregated target ships the KV cache over, for the transfer floor (the prompt's KV "
        "bytes ÷ the link's bandwidth): a catalog key (nvlink-4, nvlink-5, ib-hdr, ib-ndr, ib-xdr, roce-400g, "
        "ethernet-100g, pcie-4-x16, pcie-5-x16) or one direction's GB/s (e.g. 25). A reference:// target's pd_link "
        "is the default. YAML target.kv_link.", _link, "a link key such as ib-ndr, or GB/s > 0 such as 25"),
)
BY_NAME = {o.name: o for o in OPTIONS}

#: old setting name -> new: the old flag, env var and ini key still work this release, with a warning
RENAMED = {"min_efficiency": "min_decode_efficiency", "max_regression": "regression"}


def _deprecated_opt(old: str, new: Opt) -> Opt:
    return Opt(old, f"Deprecated: use {new.cli} (env {new.env}, ini {new.ini}).", new.parse, new.expect,
               flag=new.flag)


#: the old names as options of their own, for the parser and ini registration (never resolved alone)
DEPRECATED_OPTIONS: tuple[Opt, ...] = tuple(_deprecated_opt(old, BY_NAME[new]) for old, new in RENAMED.items())


@dataclass(frozen=True)
class Value:
    value: Any
    source: str   # "--llm-latency-seed", "LLM_LATENCY_SEED (environment)", "llm_latency_seed (ini)", "default"


def _parse(opt: Opt, raw: Any, source: str) -> Value:
    if raw is None:
        return Value(None, source)
    try:
        return Value(opt.parse(raw) if isinstance(raw, str) or opt.parse is not str else raw, source)
    except ConfigError as exc:  # a parser that explains itself (kv_link: did you mean ...)
        raise ConfigError(f"{source}: {exc}") from None
    except (ValueError, TypeError, AttributeError, OverflowError):
        raise ConfigError(f"{source}: {_shown(raw)} is not valid for {opt.name}: expected {opt.expect}") from None


def _shown(raw: Any) -> str:
    """The rejected value as the error shows it: credentials in anything URL-like masked
    (``htp://user:***@host``, ``***@host`` without a scheme)."""
    from ..core.redact import redact_url

    text = redact_url(repr(raw))
    if "@" in text and "://" not in text:
        text = text[0] + "***@" + text.rsplit("@", 1)[1]
    return text


def _layer(opt: Opt, olds: tuple[Opt, ...], cli: Mapping[str, Any], env: Mapping[str, str],
           ini: Mapping[str, Any], deprecations: list[str]) -> Value | None:
    """The value of ``opt`` from the highest layer that gives it under its name or an old one."""
    layers = (
        (lambda o: cli.get(o.name) is not None and cli[o.name] is not False, lambda o: cli[o.name], lambda o: o.cli,
         "true"),
        (lambda o: env.get(o.env, "") != "", lambda o: env[o.env], lambda o: f"{o.env} (environment)", None),
        (lambda o: ini.get(o.name) not in (None, "", []), lambda o: ini[o.name], lambda o: f"{o.ini} (ini)", None),
    )
    found = None
    for given, raw, source, flag_raw in layers:
        names = [o for o in (opt,) + olds if given(o)]
        for old in names:
            if old is not opt:
                deprecations.append(f"{source(old)} is deprecated, use {source(opt)} instead "
                                    "(the old name works for this release)")
        if len(names) > 1:
            raise ConfigError(f"{source(names[1])} (deprecated) and {source(names[0])} are both given: "
                              f"keep {source(names[0])} only")
        if names and found is None:
            o = names[0]
            value = raw(o)
            found = _parse(opt, flag_raw if isinstance(value, bool) else value, source(o))
    return found


class Settings:
    """The global layers (CLI > env > ini > default), each value with its source.  ``deprecations``:
    one sentence per old (renamed) name the run used, naming the new one."""

    def __init__(self, values: Mapping[str, Value], deprecations: tuple[str, ...] = ()):
        self._values = dict(values)
        self.deprecations = tuple(deprecations)

    @classmethod
    def resolve(cls, cli: Mapping[str, Any], env: Mapping[str, str], ini: Mapping[str, Any]) -> "Settings":
        """``cli`` and ``ini`` are keyed by setting name (old names included, see ``RENAMED``)."""
        out = {}
        deprecations: list[str] = []
        for opt in OPTIONS:
            olds = tuple(o for o in DEPRECATED_OPTIONS if RENAMED[o.name] == opt.name)
            found = _layer(opt, olds, cli, env, ini, deprecations)
            out[opt.name] = found if found is not None else Value(opt.default, "default")
        return cls(out, tuple(deprecations))

    def get(self, name: str) -> Any:
        return self._values[name].value

    def source(self, name: str) -> str:
        return self._values[name].source

    def pick(self, name: str, *, marker: Any = None, marker_source: str = "marker",
             yaml: Any = None, yaml_source: str = "YAML file") -> Value:
        """marker > CLI > env > ini > YAML > default for one test (``name``: a setting of ``OPTIONS``;
        ``resolve`` gave each its global value)."""
        if marker is not None:
            return _parse(BY_NAME[name], marker, marker_source)
        v = self._values[name]
        if v.source == "default" and yaml is not None:
            return _parse(BY_NAME[name], yaml, yaml_source)
        return v


def api_key_from_env(env: Mapping[str, str] = os.environ) -> str | None:
    """The API key comes only from LLM_LATENCY_API_KEY; it is never a flag and never printed."""
    return env.get("LLM_LATENCY_API_KEY") or None
