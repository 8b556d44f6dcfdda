"""pytest-llm-latency: pytest hooks.  Loaded in every pytest run of a user's repo,
so it imports nothing heavy at module level (httpx, numpy, yaml load lazily)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from ..core.errors import ConfigError
from ..core.redact import redact_url
from .options import DEPRECATED_OPTIONS, OPTIONS, Settings
from .session import LatencySession, run_nonce
from .stash import ENTRIES_KEY, FIXTURE_KEY, RESULTS_KEY, SESSION_KEY, XDIST_NOTE_KEY, get_session

if TYPE_CHECKING:
    from .fixtures import LatencyFixture



def pytest_addhooks(pluginmanager):
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llm-latency", "LLM latency SLOs (pytest-llm-latency)")
    for opt in OPTIONS + DEPRECATED_OPTIONS:
        cli_help = f"{opt.help} Env {opt.env}, ini {opt.ini}.".replace("%", "%%")  # argparse formats help with %
        if opt.flag:
            group.addoption(opt.cli, action="store_true", default=None, dest=f"llm_latency_{opt.name}",
                            help=cli_help)
        else:
            group.addoption(opt.cli, action="store", default=None, dest=f"llm_latency_{opt.name}",
                            metavar=opt.name.upper(), help=cli_help)
        parser.addini(opt.ini, help=opt.help, type="string", default=None)


def _ini(config: pytest.Config, name: str):
    try:
        return config.getini(name)
    except ValueError:
        return None


def pytest_configure(config: pytest.Config) -> None:
    from .markers import MARKER_SIGNATURE

    config.addinivalue_line("markers", MARKER_SIGNATURE)
    config.addinivalue_line("markers", "llm_latency_test: set by the plugin on every latency test (for -m)")
    cli = {o.name: config.getoption(f"llm_latency_{o.name}") for o in OPTIONS + DEPRECATED_OPTIONS}
    ini = {o.name: _ini(config, o.ini) for o in OPTIONS + DEPRECATED_OPTIONS}
    try:
        settings = Settings.resolve(cli, os.environ, ini)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.get("ray") is not None:  # ray: an optional extra, checked before any test
        from ..client.placement.ray.cluster import require_ray

        try:
            require_ray(f"{settings.source('ray')} {settings.get('ray')}")
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    if not hasattr(config, "workerinput"):  # once per run: the controller's, not each xdist worker's
        from ..core.errors import LatencyDeprecationWarning

        for message in settings.deprecations:
            config.issue_config_time_warning(LatencyDeprecationWarning(message), stacklevel=2)
    transport = config.hook.pytest_llm_latency_transport
    sess = LatencySession(settings, nonce=run_nonce(settings, getattr(config, "workerinput", None)))
    sess.transport_factory = lambda url: transport(config=config, url=url)
    clock = config.hook.pytest_llm_latency_clock(config=config)
    if clock is not None:
        sess.clock = clock
    if settings.get("baseline") or settings.get("regression"):  # else nothing to read or check: the
        from .baseline import load_for_session  # comparison's imports stay out of start-up (P4)

        try:  # deploy gate: the baseline is read once, bad files stop the run
            sess.baseline_doc = load_for_session(settings)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION_KEY] = sess
    config.stash[RESULTS_KEY] = []
    _serialize_under_xdist(config)
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_WorkerInput(llm_latency_nonce=sess.nonce), "llm-latency-xdist-nonce")
    config.pluginmanager.register(_ResultCollector(config), "llm-latency-results")


def _serialize_under_xdist(config: pytest.Config) -> None:
    """Latency tests must never be measured concurrently by accident: under pytest-xdist
    they all carry ``xdist_group("llm-latency")``, and the distribution mode is switched
    to ``loadgroup`` so that one xdist worker runs them one after another (other tests still
    spread over every xdist worker)."""
    if hasattr(config, "workerinput"):
        if config.workerinput.get("llm_latency_loadgroup"):
            config.option.loadgroup = True  # xdist then suffixes grouped nodeids with @llm-latency
        return
    if not config.pluginmanager.hasplugin("xdist"):
        return
    dist = getattr(config.option, "dist", "no")
    if dist in ("no", "loadgroup", "each") or not getattr(config.option, "numprocesses", None):
        return
    config.option.dist = "loadgroup"
    config.pluginmanager.register(_WorkerInput(llm_latency_loadgroup=True), "llm-latency-xdist")
    config.stash[XDIST_NOTE_KEY] = (f"--dist {dist} switched to loadgroup: latency tests run serially on one "
                                    "xdist worker")


class _WorkerInput:
    """What the controller tells each xdist worker (``node.workerinput``): the run's nonce, so every
    worker salts alike, and that it switched to loadgroup (workers parse the original command line,
    which still says --dist load)."""

    def __init__(self, **values: object):
        self.values = values

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput.update(self.values)


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = get_session(config).settings
    if s.get("skip"):
        return ["llm-latency: skipped (--llm-latency-skip)"]
    url = redact_url(s.get("url")) if s.get("url") else "(from SLO files)"
    lines = [f"llm-latency: url={url} api={s.get('api')} model={s.get('model') or '(server default)'} "
             f"seed={s.get('seed')}",
             f"llm-latency: nonce={get_session(config).nonce} (salts of this run; replay its exact prompts with "
             f"--llm-latency-seed {s.get('seed')} --llm-latency-nonce {get_session(config).nonce})"]
    if XDIST_NOTE_KEY in config.stash:
        lines.append(f"llm-latency: {config.stash[XDIST_NOTE_KEY]}")
    return lines


def pytest_collect_file(file_path: Path, parent):
    from .collect import SloFile, is_slo_file

    if is_slo_file(file_path):
        return SloFile.from_parent(parent, path=file_path)
    return None


def _is_latency(item: pytest.Item) -> bool:
    return (item.get_closest_marker("llm_latency_test") is not None or item.get_closest_marker("llm_slo") is not None
            or "llm_latency" in getattr(item, "fixturenames", ()))


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = get_session(config).settings.get("skip")
    if not skip:
        for item in items:
            if item.get_closest_marker("llm_slo") is not None:
                from .fixtures import validate_marker  # only where a marker is (start-up cost, P4)

                try:
                    validate_marker(item, get_session(config).settings)
                except ConfigError as exc:
                    raise pytest.UsageError(str(exc)) from None
    # xdist registers the xdist_group marker; without it (not installed, or -p no:xdist) the
    # marker would be unknown: a PytestUnknownMarkWarning, and an error under --strict-markers
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        if _is_latency(item):
            item.add_marker(pytest.mark.llm_latency_test)
            if skip:
                item.add_marker(pytest.mark.skip(reason="llm-latency: --llm-latency-skip"))
            if xdist:  # under xdist --dist loadgroup: one xdist worker measures, never two at once
                item.add_marker(pytest.mark.xdist_group("llm-latency"))


@pytest.fixture
def llm_latency(request: pytest.FixtureRequest) -> LatencyFixture:
    """Measure LLM latency workloads against the configured target (see pytest-llm-latency docs)."""
    from .fixtures import LatencyFixture

    fx = LatencyFixture(request.node)
    request.node.stash[FIXTURE_KEY] = fx
    return fx


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    result = yield
    marker = item.get_closest_marker("llm_slo")
    fx = cast("LatencyFixture | None", item.stash.get(FIXTURE_KEY, None))
    if marker is None and (fx is None or not fx.results):
        return result  # the fixture was requested but nothing was measured: nothing to judge
    from .execute import outcome
    from .fixtures import LatencyFixture

    if fx is None:
        fx = LatencyFixture(item)
    if not fx.results:  # empty-bodied marker test: the marker is the whole test
        fx.measure()
    fx.record()
    outcome([r._res for r in fx.results if not r.checked])
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A latency test that could not be judged (``execute.Unjudged``) is marked, so that
    ``pytest_report_teststatus`` counts it as an error, as pytest does for a failed fixture
    (the same way pytest's own xfail marks a report and categorizes it).  The mark is a plain
    report attribute, so it also travels from xdist workers."""
    report = yield
    if call.when == "call" and ENTRIES_KEY in item.stash:  # the test's result entries: one JSON value that
        report.llm_latency_results = item.stash[ENTRIES_KEY]  # travels from xdist workers with the report
    if call.excinfo is not None and report.failed:
        from .execute import Unjudged

        if call.excinfo.errisinstance(Unjudged):
            report.llm_latency_error = True
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    if getattr(report, "llm_latency_error", False) and report.failed:
        return "error", "E", "ERROR"
    return None


class _ResultCollector:
    """Collects each test's result entries from its call report (``llm_latency_results``, put
    there by ``pytest_runtest_makereport``; under xdist it arrives with the serialized report),
    so the document is the same on the xdist controller as in a sequential run."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        entries = getattr(report, "llm_latency_results", None)
        if isinstance(entries, list):
            self.config.stash[RESULTS_KEY].extend(e for e in entries if isinstance(e, dict))


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        return
    results = config.stash.get(RESULTS_KEY, [])
    s = get_session(config).settings
    if s.get("save_baseline") and results:
        _save_baseline(session, s.get("save_baseline"), results)
    _step_summary(session, results)
    if not s.get("json") and not s.get("html"):
        return
    import json

    from .. import __version__
    from ..files.atomic import write_atomic
    from .report.document import ResultDocument

    url = redact_url(s.get("url")) if s.get("url") else s.get("url")
    document = ResultDocument(plugin_version=__version__, seed=s.get("seed"), nonce=get_session(config).nonce,
                              target={"url": url, "api": s.get("api"), "model": s.get("model")}, results=results)
    doc = document.to_json()
    outputs = []
    if s.get("json"):
        outputs.append((s.get("json"), lambda: json.dumps(doc, indent=2, default=str) + "\n"))
    if s.get("html"):
        from .report.html import render

        outputs.append((s.get("html"), lambda: render(document)))
    for path, make in outputs:
        try:
            write_atomic(path, make())
        except Exception as exc:  # a report bug must not hide the run's verdicts
            what = str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc} (a bug; please report it)"
            _say(config, f"llm-latency: could not write {path}: {what}", red=True)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def _step_summary(session: pytest.Session, results: list[dict]) -> None:
    if not results:  # nothing to append: the summary module (and its imports) stays unloaded (P4)
        return
    from .report.entry import entries_of
    from .report.step_summary import ENV, append

    if not os.environ.get(ENV):
        return
    try:
        append(entries_of(results))
    except Exception as exc:  # a summary must not hide the run's verdicts
        _say(session.config, f"llm-latency: could not append to ${ENV}: {exc}", red=True)


def _save_baseline(session: pytest.Session, path: str, results: list[dict]) -> None:
    from .baseline import save_from_results

    try:
        n = save_from_results(path, results)
    except Exception as exc:  # as for the JSON file: reported, the run's verdicts kept
        _say(session.config, f"llm-latency: could not save the baseline {path}: {exc}", red=True)
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        return
    _say(session.config, f"llm-latency: baseline of {n} test(s) saved to {path}")


def _say(config: pytest.Config, line: str, **markup: bool) -> None:
    """A line on the terminal, where there is one (not under ``-p no:terminal``)."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr:
        tr.write_line(line, **markup)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    try:
        results = config.stash.get(RESULTS_KEY, [])
        if not results:
            return
        from .report.entry import entries_of
        from .report.terminal import summary_lines

        terminalreporter.section("llm latency")
        for line in summary_lines(entries_of(results)):
            terminalreporter.write_line(line)
    except Exception as exc:  # never raise from the summary
        terminalreporter.write_line(f"llm-latency: summary failed: {type(exc).__name__}: {exc}")


def pytest_unconfigure(config: pytest.Config) -> None:
    sess = config.stash.get(SESSION_KEY, None)
    if sess is not None:
        sess.close()
