"""Run one workload for a pytest item and turn the result into an outcome:
user_properties for JUnit/JSON, notes as ``LatencyWarning``, and the test outcome.

Outcome mapping (README "Verdicts"): verdict ``pass`` -> passed; ``fail`` -> failed;
``error`` (could not be judged) -> ``Unjudged`` raised, which ``hooks`` reports as a
pytest *error* (like a failed fixture), so the latency table and pytest agree."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, replace
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.errors import ConfigError, LatencyError, LatencyWarning, MeasurementError
from ..core.checks import evaluate, judge
from ..core.result.result import Failure, WorkloadResult
from ..core.spec.workload import Workload
from .report.document import result_entry
from .report.properties import junit_properties
from .report.terminal import Progress
from .session import LatencySession, TargetSpec
from .stash import ENTRIES_KEY, SESSION_KEY

#: the (name, value) tuples ``record`` added to an item's user_properties (so it never touches the user's own)
OWN_PROPS_KEY = pytest.StashKey[list]()
#: note texts already emitted as LatencyWarning for an item
WARNED_KEY = pytest.StashKey[set]()


if TYPE_CHECKING:
    from _pytest.outcomes import Failed as _Failed  # pytest.fail.Exception, as mypy sees it
else:
    _Failed = pytest.fail.Exception


class Unjudged(_Failed):
    """The latency test could not be judged (bad configuration, nothing answering, no
    usage...).  Raised in the call phase; ``hooks.pytest_runtest_makereport`` marks the
    report and ``hooks.pytest_report_teststatus`` counts it as an *error*, as pytest does
    for a failed fixture, never as a failed SLO."""

    __module__ = "builtins"  # shown as "Unjudged: ..." in pytest's summaries, as pytest does for Failed


def config_failure(exc: ConfigError) -> None:
    """End the running test as an error (unjudgeable) with a configuration error, without the
    exception chain ("During handling of the above exception...") that raising inside ``except`` shows."""
    exc.__traceback__ = None
    raise Unjudged(f"configuration error: {exc}", pytrace=False) from None


class TargetDown(LatencyError):
    """A target (the test's, or an A/B run's baseline) could not be started or reached."""


@dataclass(frozen=True)
class Targets:
    """Every target a measurement needs, resolved before its driver runs: the test's client and,
    for A/B in one run (``plugin/ab.py``), the baseline target and its arm (a client, or with
    ``alternating`` the callables that start each target between blocks); for a server sweep
    (``plugin/server_sweep.py``) its arms, the first arm's client being the test's."""
    client: Any
    spec_b: TargetSpec | None = None
    arms: Any = None  # client.drivers.base.ABArms
    sweep: Any = None  # client.drivers.base.SweepArms: a server sweep's arms (plugin.server_sweep)
    notes: tuple[str, ...] = ()  # what resolving them found (a flags check skipped)


def run_workload(item: pytest.Item, sess: LatencySession, spec: TargetSpec, workload: Workload,
                 roofline_cli: dict[str, Any] | None = None) -> WorkloadResult:
    """One pass down the layers: the workload's trace rows and model bytes checked, its targets
    resolved (managed, reference, both A/B arms), then its driver measures, the facts the plugin
    owns are recorded (a managed server that died, the baseline comparison, the roofline gates'
    figures), and every check runs once."""
    from ..client.drivers.base import Run
    from ..client.drivers.registry import driver_for
    from . import disagg_floor
    from .roofline_gate import preflight

    try:
        workload, rows = with_trace(item, workload)
        extra = body_fields(item, spec, workload)  # a reasoning key the API cannot take: refused before any request
        workload = with_schema(item, workload)
        preflight(workload, Path(str(item.path)).parent)  # the roofline's model bytes: refused before any request
        disagg_floor.preflight(spec, workload, f"{item.nodeid} workload {workload.name!r}")  # kv_transfer budgets
        targets = resolve_targets(item, sess, spec, workload)
        blocked = disagg_floor.in_blocks(workload, spec, targets.spec_b)  # A/B, a server sweep: no pool scraped
        pools = None if blocked else disagg_floor.pools_of(spec, getattr(targets.client, "base_url", None))
        if blocked:
            targets = replace(targets, notes=(*targets.notes, blocked))
    except ConfigError as exc:
        config_failure(exc)
    except TargetDown as exc:
        return evaluate(workload, [], [Failure("target", sess.redactor()(str(exc)))])
    progress = Progress(item.config.pluginmanager.get_plugin("terminalreporter"), workload.name)
    try:
        with xdist_measurement_lock() as waited_for:
            t0 = time.time_ns()
            run = Run(seed=sess.settings.get("seed"), nonce=sess.nonce or None,
                      salt_context=sess.salt_context(item.nodeid, workload.name), progress=progress, judge=judge,
                      trace_rows=rows, ab=targets.arms, sweep=targets.sweep, extra=extra or None, disagg=pools)
            try:
                res = _measure(sess, workload, driver_for(workload), targets, run)
            except ConfigError as exc:  # found before any request was sent (a trace row beyond the context)
                config_failure(exc)
            res.notes.extend(n for n in targets.notes if n not in res.notes)
            if extra:
                res.measurement.set(request_fields=extra)
            if waited_for is not None:
                res.measurement.set(measure_start_ns=t0, measure_end_ns=time.time_ns())
            _server_died(sess, spec, res)
            from .baseline import apply as apply_baseline  # deploy gate: judged against a baseline's samples

            apply_baseline(item, sess, spec, targets.client, workload, res)  # first: the decode diagnosis reads it
            # inside the lock: a local-cpu bandwidth probe saturates memory bandwidth, so it must
            # not overlap another xdist worker's measurement either
            apply_roofline(item, sess, spec, targets.client, workload, res, roofline_cli or {})
            disagg_floor.apply_floor(res, pools, spec, workload, Path(str(item.path)).parent, targets.client)
    finally:
        progress.clear()
    return judge(res)  # every check, once (core.checks)


def body_fields(item: pytest.Item, spec: TargetSpec, workload: Workload) -> dict[str, Any]:
    """The request-body fields the workload's ``reasoning`` / ``thinking`` keys ask of the target's API
    (``core.spec.request_fields``), sent with every request; a ``ConfigError`` where a key means nothing
    there.  An A/B run sends the same fields to both arms: its baseline target must speak the same API."""
    from ..core.spec.request_fields import request_fields

    where = f"{item.nodeid} workload {workload.name!r}"
    fields = request_fields(workload.request, spec.api, where)
    base = workload.baseline_target
    api_b = base.get("api") if isinstance(base, dict) else None
    if fields and api_b is not None and api_b != spec.api:
        raise ConfigError(f"{where} baseline_target.api: an A/B run sends the same reasoning fields to both arms, "
                          f"but the baseline speaks {api_b} and the target {spec.api} -- give both the same api")
    return fields


def resolve_targets(item: pytest.Item, sess: LatencySession, spec: TargetSpec, workload: Workload) -> Targets:
    """Start (or reach) every target the workload names before anything is measured; a target that
    cannot start is ``TargetDown`` (the test errors, naming it), a bad A/B spec a ``ConfigError``.  A server
    sweep's arms are its targets (``plugin.server_sweep``: the test's own is not started)."""
    from ..client.drivers.base import ABArms
    from . import ab

    if workload.server_sweep is not None:  # the arms are the targets (the test's own command: their base)
        from .server_sweep import sweep_arms

        try:
            client, arms, notes = sweep_arms(sess, spec, workload)
        except ab.StartError as exc:
            raise TargetDown(str(exc)) from exc
        return Targets(client, sweep=arms, notes=tuple(notes))
    try:
        client = sess.client(spec)
    except (MeasurementError, LatencyError, OSError, RuntimeError) as exc:
        raise TargetDown(f"target {spec.describe()} could not start: {exc}") from exc
    if workload.baseline_target is None:
        return Targets(client)
    where = f"{item.nodeid} workload {workload.name!r}"
    spec_b = ab.baseline_spec(workload.baseline_target, spec, where)
    mode, block = ab.ab_mode(workload.baseline_target, where)
    if mode == "alternating":  # one target at a time (the candidate, running now, goes first)
        arms = {"a": spec, "b": spec_b}

        def alternate(arm: str) -> None:
            sess.stop_server(arms[arm])
        return Targets(client, spec_b, ABArms(_starter(sess, spec_b, "baseline target"), block,
                                              _starter(sess, spec, "target"), alternate))
    try:
        return Targets(client, spec_b, ABArms(sess.client(spec_b), block))
    except (MeasurementError, LatencyError, OSError, RuntimeError) as exc:
        raise TargetDown(f"baseline target {spec_b.describe()} could not start: {exc}") from exc


def _measure(sess: LatencySession, workload: Workload, driver, targets: Targets, run) -> WorkloadResult:
    """The driver's measurement; with A/B arms, the candidate interleaved with the baseline target
    and compared with it."""
    from . import ab, baseline

    if targets.arms is None:
        try:
            res = driver.measure(targets.client, workload, run)
        except ab.StartError as exc:  # a server sweep's arm did not start for its block
            return evaluate(workload, [], [Failure("target", sess.redactor()(str(exc)))])
        res.measurement.api = targets.client.api_name
        return res
    try:
        res, res_b = driver.measure_arms(targets.client, workload, run)
        res.measurement.api = targets.client.api_name
    except ab.StartError as exc:  # alternating: a target did not come back between blocks
        return evaluate(workload, [], [Failure("target", sess.redactor()(str(exc)))])
    assert targets.spec_b is not None  # resolve_targets gives both or neither
    label = f"baseline target {ab.describe(targets.spec_b)}"
    if not res_b.records:
        judge(res_b)
        res.facts.baseline_target_empty = f"{label} measured no sample: {res_b.failure_message() or 'empty sample'}"
        return res
    baseline.compare_with(res, baseline.entry_of(res_b), baseline.tolerances(sess.settings, workload),
                          seed=sess.settings.get("seed") or 0, label=label, paired=True, block=targets.arms.block_size)
    return res


def _server_died(sess: LatencySession, spec: TargetSpec, res: WorkloadResult) -> None:
    """A managed server that died under failed requests: a fact for the checks (its refused requests
    are server faults, and it is named)."""
    server = sess.server_for(spec)
    if server is not None and hasattr(server, "check_alive") and res.failures:
        died = _died(server)
        if died:
            res.facts.server_failed = True
            res.facts.server_died = sess.redactor()(died)


def with_trace(item: pytest.Item, workload: Workload) -> tuple[Workload, tuple | None]:
    """A trace replay's rows, read here (``plugin.trace_load``: relative to the SLO file's or test
    file's folder), so a malformed row is a configuration error before anything is sent; the
    workload's samples become the rows, checked against its percentile budgets."""
    trace = getattr(workload, "trace", None)
    if trace is None:
        return workload, None
    from ..core.result.sample_size import check_min_samples
    from .trace_load import load_trace, trace_path

    base_dir = Path(str(item.path)).parent
    rows = tuple(load_trace(trace, base_dir))
    if workload.mix is not None:  # rows judged per class: each names one the slo gives budgets
        from ..core.spec.mix_spec import check_row_classes

        check_row_classes(workload.mix, rows, str(trace_path(trace, base_dir)))
    workload = replace(workload, trace=replace(trace, path=str(trace_path(trace, base_dir))), samples=len(rows),
                       samples_given=True)
    check_min_samples(workload, f"{item.nodeid} workload {workload.name!r} ({len(rows)} trace rows)")
    return workload, rows


def with_schema(item: pytest.Item, workload: Workload) -> Workload:
    """A structured workload's JSON Schema, read and checked here (``plugin.structured_load``: relative
    to the SLO file's or test file's folder), so a bad file is a configuration error before any request."""
    spec = getattr(workload, "structured", None)
    if spec is None or spec.schema is not None:
        return workload
    from .structured_load import load_schema

    return replace(workload, structured=load_schema(spec, Path(str(item.path)).parent))


def _starter(sess: LatencySession, spec: TargetSpec, label: str):
    """A/B alternating blocks: a callable that (re)starts ``spec``'s managed server, returning its client."""
    from .ab import StartError, describe

    def start():
        try:
            return sess.client(spec)
        except (MeasurementError, LatencyError, OSError, RuntimeError) as exc:
            raise StartError(f"{label} {describe(spec)} could not start for an A/B block: {exc}") from exc
    return start


@contextlib.contextmanager
def xdist_measurement_lock():
    """Under pytest-xdist, hold a run-wide file lock while measuring, so latency tests on
    different workers are never measured concurrently (they would share the server and
    inflate each other's latencies).  xdist_group + loadgroup normally keeps them on one
    xdist worker already; xdist 3.8 with pytest >= 9.2 loses the group, and this lock still holds.
    Yields the lock path under xdist, else None."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock (Windows): loadgroup only
        fcntl = None  # type: ignore[assignment]
    if not run or fcntl is None:
        yield None
        return
    path = Path(tempfile.gettempdir()) / f"pytest-llm-latency-{run}.lock"
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _died(server, grace_s: float = 2.0) -> str | None:
    """After failed requests, give a crashing server a bounded moment to exit, then report it."""
    deadline = time.monotonic() + grace_s
    while True:
        try:
            server.check_alive()
        except Exception as exc:  # its message carries exit code and log tail
            return str(exc)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def apply_roofline(item, sess: LatencySession, spec: TargetSpec, client, workload: Workload, res: WorkloadResult,
                   overrides: dict) -> None:
    """Roofline gates: decode when a workload, marker or the CLI asks for it (see roofline_gate); prefill
    for a prompt_sweep workload (see prefill_gate; its decode gate only with >= 2 output tokens)."""
    from .prefill_gate import prefill_gate
    from .roofline_gate import gate_for

    base_dir = Path(str(item.path)).parent
    if not workload.prompt_sweep or workload.output_tokens >= 2:
        gate_for(sess, spec, workload, res, overrides, base_dir=base_dir, client=client)
    prefill_gate(sess, spec, workload, res, overrides, base_dir=base_dir, client=client)


def record(item: pytest.Item, results: WorkloadResult | list[WorkloadResult]) -> None:
    """The test's result entries (``report.document.result_entry``; the k-th, k >= 2, has nodeid
    ``<id>#k``) in ``item.stash[ENTRIES_KEY]`` for the run's document, and their JUnit properties
    (docs/reports.md#junit), replacing only those this function wrote before (the user's are kept)."""
    if isinstance(results, WorkloadResult):
        results = [results]
    ours = item.stash.get(OWN_PROPS_KEY, [])
    ours_ids = {id(p) for p in ours}
    item.user_properties[:] = [p for p in item.user_properties if id(p) not in ours_ids]
    xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
    settings = getattr(item.config.stash.get(SESSION_KEY, None), "settings", None)
    # per-request data for the JSON, HTML and baselines only (never JUnit)
    detail = settings is not None and bool(settings.get("json") or settings.get("html")
                                           or settings.get("save_baseline"))
    added: list[tuple[str, Any]] = []
    entries: list[dict[str, Any]] = []
    for k, res in enumerate(results, 1):
        if xdist_worker:
            res.measurement.xdist_worker = xdist_worker
        entry = result_entry(res, item.nodeid if k == 1 else f"{item.nodeid}#{k}", detail=detail, settings=settings)
        entries.append(entry)
        added.extend(junit_properties(entry, "llm." if k == 1 else f"llm.{k}."))
    item.user_properties.extend(added)
    item.stash[OWN_PROPS_KEY] = added
    item.stash[ENTRIES_KEY] = entries


def warn_notes(item: pytest.Item, results: WorkloadResult | list[WorkloadResult]) -> None:
    """Emit every note not yet emitted for this test as a ``LatencyWarning`` (pytest's warnings
    summary; ``-W error::pytest_llm_latency.LatencyWarning`` makes it fail the test).  Call
    after ``record`` so the properties are in place even when a warning is an error."""
    if isinstance(results, WorkloadResult):
        results = [results]
    seen = item.stash.setdefault(WARNED_KEY, set())
    path, line = str(item.path), (item.location[1] or 0) + 1
    for res in results:
        for note in res.shown_notes:
            text = f"{res.workload.name}: {note}"
            if text in seen:
                continue
            seen.add(text)
            try:
                warnings.warn_explicit(LatencyWarning(text), LatencyWarning, path, line, module="pytest_llm_latency")
            except LatencyWarning:  # -W error: strict CI turns a note into a failure ...
                if any(r.verdict != "pass" for r in results):
                    outcome(results)  # ... but a failed or unjudged result keeps its own outcome
                raise


def outcome(results: WorkloadResult | list[WorkloadResult]) -> None:
    """End the test (call phase): failed when a result missed a budget or a gate (every
    violation, failed gate and error listed); an error (``Unjudged``) when none failed but
    one could not be judged; passed otherwise."""
    if isinstance(results, WorkloadResult):
        results = [results]
    parts = [(f"latency SLO not met for workload {res.workload.name!r}" if res.verdict == "fail"
              else f"latency test could not be judged for workload {res.workload.name!r} (error)")
             + f"\n{res.failure_message()}" for res in results if res.verdict != "pass"]
    if not parts:
        return
    if any(res.verdict == "fail" for res in results):
        pytest.fail("\n".join(parts), pytrace=False)
    raise Unjudged("\n".join(parts), pytrace=False)
