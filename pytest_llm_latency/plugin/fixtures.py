"""The ``llm_latency`` fixture and the ``llm_slo`` marker's runtime.

    def test_chat(llm_latency):
        result = llm_latency.measure(workload="chat", prompt_tokens=256, samples=20)
        assert result.ttft.p95 < 800          # ms
        result.check(tpot_p95="40ms")         # the standard failure message

A measured workload is always judged against its budgets (class defaults,
then marker, then measure() kwargs) at the end of the test; ``check()``
judges immediately, with extra budgets.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import pytest

from ..core.errors import ConfigError
from .execute import config_failure
from ..core.result.result import Failure, Verdict, Violation, WorkloadResult
from ..core.measure.record import RequestRecord
from ..core.measure.stats import Summary
from ..core.spec.agent_spec import AGENT_BUDGET_KEYS
from ..core.spec.prompt_buckets import BY_PROMPT_KEYS
from ..core.spec.renamed_keys import RENAMED_WORKLOAD_KEYS
from ..core.spec.structured_spec import OVERHEAD_BUDGET
from ..core.spec.prefill_spec import PREFILL_SLO_KEYS
from ..core.spec.workload import BUDGET_KEYS, WORKLOAD_KEYS, Workload, make_workload, with_budgets

TARGET_KW = ("url", "api", "model", "prefill_metrics_url", "decode_metrics_url", "kv_link")
ROOFLINE_KW = ("min_decode_efficiency", "hardware", "min_prefill_efficiency")
SLO_KW = BUDGET_KEYS + tuple(k for k in PREFILL_SLO_KEYS if k not in ROOFLINE_KW) + AGENT_BUDGET_KEYS \
    + BY_PROMPT_KEYS + (OVERHEAD_BUDGET,)  # into slo
SPEC_KW = WORKLOAD_KEYS + tuple(RENAMED_WORKLOAD_KEYS)  # old names: make_workload warns and renames
MARKER_KW = ("workload",) + SPEC_KW + SLO_KW + TARGET_KW + ROOFLINE_KW
from .markers import MARKER_SIGNATURE  # noqa: E402,F401 - re-exported (kept light for start-up)

if TYPE_CHECKING:
    from .options import Settings


T = TypeVar("T")


class _Of(Generic[T]):
    """A read-only ``MeasuredResult`` property: the result's attribute of that name (or ``attr``)."""

    def __init__(self, attr: str = "") -> None:
        self.attr = attr

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = self.attr or name

    def __get__(self, obj: MeasuredResult | None, owner: type | None = None) -> T:
        return cast(T, self if obj is None else getattr(obj._res, self.attr))

    def __set__(self, obj: MeasuredResult, value: object) -> None:
        raise AttributeError(f"MeasuredResult.{self.attr} is read-only")


class MeasuredResult:
    """What ``llm_latency.measure()`` returns: the measured ``WorkloadResult`` (``.result``)
    with ``.check()``.  ``result.ttft.p95`` etc. are in ms (``output_tps``: tokens/s); every
    field a test reads is a typed property, so mypy and an IDE see it (and a typo)."""

    def __init__(self, res: WorkloadResult, owner: LatencyFixture | None = None):
        self._res = res
        self._owner = owner
        self.checked = False

    @property
    def result(self) -> WorkloadResult:
        """The judged result (after ``check()``, judged against its budgets too)."""
        return self._res

    # the metrics: a metric with no values raises EmptySampleError naming why
    ttft = _Of[Summary]()
    ttfo = _Of[Summary]()
    tpot = _Of[Summary]()
    itl = _Of[Summary]()
    e2e = _Of[Summary]()
    output_tps = _Of[Summary]()
    reasoning_tokens = _Of[Summary]()  # a count per request, not ms

    def metric(self, name: str) -> Summary:
        return self._res.metric(name)

    # the verdict and why
    verdict = _Of[Verdict]()
    violations = _Of[list[Violation]]()
    errors = _Of[list[str]]()
    failed_checks = _Of[list[str]]()
    notes = _Of[list[str]]("shown_notes")
    causes = _Of[list[str]]()

    def failure_message(self) -> str:
        return self._res.failure_message()

    # what was measured
    workload = _Of[Workload]()
    records = _Of[list[RequestRecord]]()
    failures = _Of[list[Failure]]()
    summaries = _Of[dict[str, Summary]]()
    n = _Of[int]()
    error_rate = _Of[float]()

    if not TYPE_CHECKING:  # anything else of the result still reads at run time (typed: ``.result``)
        def __getattr__(self, name: str) -> Any:
            if name.startswith("_"):
                raise AttributeError(name)
            return getattr(self._res, name)

    def check(self, **budgets: Any) -> MeasuredResult:
        """Judge the result now against its budgets and these (``tpot_p95="40ms"``...); a miss fails
        the test with the standard message, as the end-of-test judgement would."""
        try:
            w = with_budgets(self._res.workload, budgets, "check()") if budgets else self._res.workload
            agent_keys = [k for k in budgets if k in AGENT_BUDGET_KEYS]
            if agent_keys:  # judged on the sessions while they run (client.drivers.agent_session)
                raise ConfigError(f"check({agent_keys[0]}=...): agent-session budgets are judged on the sessions as "
                                  f"they run: pass {agent_keys[0]} to measure() or the marker")
            if "cold_ttft_max" in budgets and self._res.workload.cold_budget is None:
                raise ConfigError("check(cold_ttft_max=...): the cold start is measured while the workload runs "
                                  "(the model is unloaded first): pass cold_ttft_max to measure() or the marker")
        except ConfigError as exc:
            config_failure(exc)
        from ..core.checks import judge, with_workload

        judged = judge(with_workload(self._res, w))  # the measurement, judged for these budgets
        self._res = judged
        self.checked = True
        from .execute import outcome

        if self._owner is not None:
            self._owner.record()  # JUnit/JSON show the judged result even though the test fails here
        outcome(judged)
        return self


def split_marker(kwargs: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Marker kwargs → (workload spec incl. slo, target overrides, roofline overrides)."""
    unknown = [k for k in kwargs if k not in MARKER_KW]
    if unknown:
        from ..core.spec.workload import did_you_mean

        raise ConfigError(f"{where}: unknown llm_slo argument {unknown[0]!r}{did_you_mean(unknown[0], MARKER_KW)}")
    spec = {k: v for k, v in kwargs.items() if k in SPEC_KW}
    if "workload" in kwargs:
        spec["class"] = kwargs["workload"]
    slo = {k: v for k, v in kwargs.items() if k in SLO_KW}
    if slo:
        spec["slo"] = {**(spec.get("slo") or {}), **slo}
    target = {k: kwargs[k] for k in TARGET_KW if k in kwargs}
    roof = {k: kwargs[k] for k in ROOFLINE_KW if k in kwargs}
    return spec, target, roof


def read_marker(item: pytest.Item, where: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``split_marker`` of the item's ``llm_slo`` marker (none: empty), its positional workload as ``class``."""
    marker = item.get_closest_marker("llm_slo")
    spec, target, roof = split_marker(dict(marker.kwargs) if marker else {}, where)
    if marker and marker.args:
        spec.setdefault("class", marker.args[0])
    return spec, target, roof


class LatencyFixture:
    """The ``llm_latency`` fixture: ``measure()`` runs a workload against the configured target
    (marker, then ``measure()`` kwargs, over the class defaults) and returns a ``MeasuredResult``;
    every result is judged at the end of the test unless ``check()`` judged it already."""

    def __init__(self, item: pytest.Item):
        from .stash import get_session

        self.item = item
        self.session = get_session(item.config)
        self.marker_spec, self.marker_target, self.marker_roof = read_marker(item, f"{item.nodeid} @llm_slo")
        self.results: list[MeasuredResult] = []

    def measure(self, workload: str | None = None, **kwargs: Any) -> MeasuredResult:
        from .execute import run_workload
        from .session import target_from

        try:
            spec, target_kw, roof = split_marker(kwargs, f"{self.item.nodeid} measure()")
        except ConfigError as exc:
            config_failure(exc)
        merged = {**self.marker_spec, **spec}
        if workload is not None:
            merged["class"] = workload
        if "slo" in self.marker_spec and "slo" in spec:
            merged["slo"] = {**self.marker_spec["slo"], **spec["slo"]}
        name = merged.get("class") or self.item.name
        settings = self.session.settings
        try:
            w = make_workload(str(name), merged, lambda p: f"{self.item.nodeid} llm_slo {'.'.join(map(str, p))}")
            w = apply_statistics(w, settings, merged)
            w = apply_workers(w, settings, merged)
            w = apply_ray(w, settings, merged, f"{self.item.nodeid} measure()")
            from ..core.result.sample_size import check_min_samples

            check_min_samples(w, f"{self.item.nodeid} measure()")  # before any request, as at collection
            target = target_from(settings, marker={**self.marker_target, **target_kw})
        except ConfigError as exc:
            config_failure(exc)
        res = MeasuredResult(run_workload(self.item, self.session, target, w, {**self.marker_roof, **roof}), self)
        self.results.append(res)
        self.record()
        if not res._res.records and res._res.verdict != "pass":
            from .execute import outcome

            res.checked = True
            outcome(res._res)  # nothing was measured: stop here with the cause (error, or fail if the server failed)
        return res

    def record(self) -> None:
        """Properties for JUnit/JSON, then every new note as a LatencyWarning."""
        from .execute import record, warn_notes

        results = [r._res for r in self.results]
        record(self.item, results)
        warn_notes(self.item, results)


def validate_marker(item: pytest.Item, settings: Settings) -> None:
    """Collection-time checks of an ``llm_slo`` marker, so a mistake is a usage error before
    any request: arguments, the workload (when the marker alone defines it), percentile vs
    samples, and that some URL is configured."""
    from ..core.result.sample_size import check_min_samples
    from .session import target_from

    where = f"{item.nodeid} @llm_slo"
    spec, target, _ = read_marker(item, where)
    if "llm_latency" not in getattr(item, "fixturenames", ()) or "class" in spec:
        w = make_workload(str(spec.get("class") or item.name), spec,
                          lambda p: f"{where} {'.'.join(map(str, p))}")
        check_min_samples(apply_statistics(w, settings, spec), where)
        apply_ray(apply_workers(w, settings, spec), settings, spec, where)
    if isinstance(spec.get("roofline"), dict):  # roofline={...}: the keys of a YAML roofline mapping
        from .roofline_gate import validate_roofline_spec

        validate_roofline_spec(spec["roofline"], f"{where} roofline")
    target_from(settings, marker=target)


def apply_statistics(w: Workload, settings: Settings, marker_spec: dict[str, Any]) -> Workload:
    """``samples`` and ``confidence`` by precedence (marker > CLI > env > ini > default), applied
    with ``core.spec.workload.with_statistics`` (``auto``, the confidence default, the checks)."""
    from ..core.spec.workload import with_statistics

    samples = settings.pick("samples", marker=marker_spec.get("samples")).value
    conf = settings.pick("confidence", marker=marker_spec.get("confidence", None))
    extra = {"confidence": conf.value} if conf.value is not None else {}
    if samples is None and not extra:
        return w
    out: Workload = with_statistics(w, extra, lambda p: f"{conf.source} {'.'.join(map(str, p))}", samples)
    return out


def apply_workers(w: Workload, settings: Settings, marker_spec: dict[str, Any]) -> Workload:
    """``workers`` by precedence: the marker's (or ``measure()``'s) was applied by ``make_workload``
    and is checked there; else a run-wide CLI/env/ini value applies to open loops only
    (``core.spec.load_spec.with_workers``)."""
    from ..core.spec.workload import with_workers

    v = settings.pick("workers")
    if "workers" in marker_spec or v.source == "default":
        return w
    out: Workload = with_workers(w, v.value, f"{v.source} workers", run_wide=True)
    return out


def apply_ray(w: Workload, settings: Settings, marker_spec: dict[str, Any], where: str) -> Workload:
    """``ray`` by precedence: the marker's (or ``measure()``'s) was applied by ``make_workload``;
    else a run-wide CLI/env/ini address applies where workers can spread (``core.spec.load_spec.with_ray``).
    Either way Ray must be importable (a ``ConfigError`` with the install line)."""
    from ..client.placement.ray.cluster import require_ray
    from ..core.spec.workload import with_ray

    v = settings.pick("ray")
    if "ray" not in marker_spec and v.value is not None:
        w = with_ray(w, v.value, f"{v.source} ray", run_wide=True)
    if w.ray is not None:
        require_ray(f"{where} ray" if "ray" in marker_spec else f"{v.source} ray")
    return w
