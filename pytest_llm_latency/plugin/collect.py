"""``*.slo.yaml`` / ``*.slo.yml`` files as pytest items: one item per workload."""
from __future__ import annotations

from pathlib import Path

import pytest

from typing import TYPE_CHECKING

from ..core.errors import ConfigError

if TYPE_CHECKING:  # the executor and workloads load when an SLO file is run, not at start-up (P4)
    from ..core.spec.workload import Workload

SUFFIXES = (".slo.yaml", ".slo.yml")


class SloFileError(Exception):
    """A bad SLO file: reported as a collection error with just the message."""


def is_slo_file(path: Path) -> bool:
    return path.name.endswith(SUFFIXES)


class SloFile(pytest.File):
    def collect(self):
        from .stash import get_session
        from .slofile import parse_slo_file

        s = get_session(self.config).settings
        try:
            spec = parse_slo_file(self.path.read_bytes(), _rel(self.path, self.config.rootpath),
                                  samples_override=s.get("samples"), samples_source=s.source("samples"),
                                  confidence_override=s.get("confidence"), ray_override=s.get("ray"),
                                  workers_override=None if s.source("workers") == "default" else s.get("workers"),
                                  workers_source=s.source("workers"), ray_source=s.source("ray"))
            if not s.get("skip"):
                from .session import target_from
                from .server_sweep import sweep_url_target

                # a URL or command exists (a file of urls: sweeps only: their first arm's)
                target = target_from(s, sweep_url_target(spec.target, spec.workloads), spec.where(("target",)))
                sweeps = [w.server_sweep for w in spec.workloads if w.server_sweep is not None]
                if sweeps:  # a flags sweep needs the managed command (its --help is read when it runs)
                    from .server_sweep import check_sweep_target

                    for sweep in sweeps:
                        check_sweep_target(sweep, target)
            from .roofline_gate import validate_roofline_spec

            for w in spec.workloads:
                if w.roofline:
                    own = ("workloads", w.name, "roofline")
                    validate_roofline_spec(w.roofline, spec.where(own if own in spec.lines else ("roofline",)))
        except ConfigError as exc:
            raise SloFileError(str(exc)) from None
        for w in spec.workloads:
            yield SloItem.from_parent(self, name=w.name, workload=w, spec=spec)

    def repr_failure(self, excinfo, style=None):
        if excinfo.errisinstance(SloFileError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)  # Collector.repr_failure takes no style


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


class SloItem(pytest.Item):
    def __init__(self, *, workload: Workload, spec, **kw):
        super().__init__(**kw)
        self.workload = workload
        self.spec = spec
        self.add_marker(pytest.mark.llm_latency_test)

    def runtest(self):
        from .execute import config_failure, outcome, record, run_workload, warn_notes
        from .stash import get_session
        from .session import target_from

        sess = get_session(self.config)
        where = self.spec.where(("target",))
        try:
            from .server_sweep import sweep_url_target

            target = target_from(sess.settings, sweep_url_target(self.spec.target, [self.workload]), where)
        except ConfigError as exc:
            config_failure(exc)
        res = run_workload(self, sess, target, self.workload)  # its overrides were applied by parse_slo_file
        record(self, res)
        warn_notes(self, res)
        outcome(res)

    def reportinfo(self):
        line = self.spec.lines.get(("workloads", self.name), 1)
        return self.path, line - 1, f"{self.path.name}::{self.name}"
