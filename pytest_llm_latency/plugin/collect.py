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

        sess = get_session(self.config)
        samples = sess.settings.get("samples")
        try:
            spec = parse_slo_file(self.path.read_bytes(), _rel(self.path, self.config.rootpath),
                                  samples_override=samples, samples_source=sess.settings.source("samples"),
                                  confidence_override=sess.settings.get("confidence"),
                                  workers_override=None if sess.settings.source("workers") == "default"
                                  else sess.settings.get("workers"), workers_source=sess.settings.source("workers"),
                                  ray_override=sess.settings.get("ray"), ray_source=sess.settings.source("ray"))
            if not sess.settings.get("skip"):
                from .session import target_from

                target_from(sess.settings, spec.target, spec.where(("target",)))  # a URL or command exists
        except ConfigError as exc:
            raise SloFileError(str(exc)) from None
        try:
            from .roofline_gate import validate_roofline_spec

            for w in spec.workloads:
                if w.roofline:
                    own = ("workloads", w.name, "roofline")
                    validate_roofline_spec(w.roofline, spec.where(own if own in spec.lines else ("roofline",)))
        except ConfigError as exc:
            raise SloFileError(str(exc)) from None
        for w in spec.workloads:
            yield SloItem.from_parent(self, name=w.name, workload=w, spec=spec, cli_samples=samples)

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
    def __init__(self, *, workload: Workload, spec, cli_samples=None, **kw):
        super().__init__(**kw)
        self.workload = workload
        self.spec = spec
        self.cli_samples = cli_samples
        self.add_marker(pytest.mark.llm_latency_test)

    def runtest(self):
        from .execute import config_failure, outcome, record, run_workload, warn_notes
        from .stash import get_session
        from .session import target_from

        sess = get_session(self.config)
        where = self.spec.where(("target",))
        try:
            target = target_from(sess.settings, self.spec.target, where)
        except ConfigError as exc:
            config_failure(exc)
        w = self.workload  # samples/confidence overrides were applied by parse_slo_file
        res = run_workload(self, sess, target, w)
        record(self, res)
        warn_notes(self, res)
        outcome(res)

    def reportinfo(self):
        line = self.spec.lines.get(("workloads", self.name), 1)
        return self.path, line - 1, f"{self.path.name}::{self.name}"
