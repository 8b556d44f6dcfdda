"""Run one workload for a pytest item and turn the result into an outcome:
user_properties for JUnit/JSON, the stash result list, and a failure message."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .core.errors import ConfigError, LatencyError, MeasurementError
from .core.result import Failure, WorkloadResult, evaluate
from .core.workload import Workload
from .report.properties import flatten
from .report.terminal import Progress
from .session import LatencySession, TargetSpec


def run_workload(item: pytest.Item, sess: LatencySession, spec: TargetSpec, workload: Workload,
                 roofline_cli: dict[str, Any] | None = None) -> WorkloadResult:
    from . import runner

    tr = item.config.pluginmanager.get_plugin("terminalreporter")
    progress = Progress(tr, workload.name)
    try:
        client = sess.client(spec)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    except (MeasurementError, LatencyError, OSError, RuntimeError) as exc:
        res = evaluate(workload, [], [Failure("target", f"target {spec.describe()} could not start: {exc}")])
        return res
    try:
        res = runner.measure(client, workload, seed=sess.settings.get("seed"), progress=progress)
    finally:
        progress.clear()
    server = sess.server_for(spec)
    if server is not None and hasattr(server, "check_alive") and res.failures:
        died = _died(server)
        if died:
            res.errors.append(f"the managed server died during the test: {died}")
    apply_roofline(item, sess, spec, client, workload, res, roofline_cli or {})
    return res


def _died(server, grace_s: float = 2.0) -> str | None:
    """After failed requests, give a crashing server a bounded moment to exit, then report it."""
    import time

    deadline = time.monotonic() + grace_s
    while True:
        try:
            server.check_alive()
        except Exception as exc:  # noqa: BLE001 - its message carries exit code and log tail
            return str(exc)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def apply_roofline(item, sess: LatencySession, spec: TargetSpec, client, workload: Workload, res: WorkloadResult,
                   overrides: dict) -> None:
    """Roofline gate, when a workload, marker or the CLI asks for it (see roofline_gate)."""
    from .roofline_gate import gate_for

    gate_for(sess, spec, workload, res, overrides, base_dir=Path(str(item.path)).parent, client=client)


def record(item: pytest.Item, res: WorkloadResult) -> None:
    item.user_properties[:] = [p for p in item.user_properties if not str(p[0]).startswith("llm.")]
    item.user_properties.extend(flatten(res, item.nodeid))


def outcome(res: WorkloadResult) -> None:
    """Fail the test (call phase) listing every violated budget, failed gate and error."""
    if res.verdict == "pass":
        return
    head = (f"latency SLO not met for workload {res.workload.name!r}" if res.verdict == "fail"
            else f"latency test could not be judged for workload {res.workload.name!r} (error)")
    pytest.fail(f"{head}\n{res.failure_message()}", pytrace=False)
