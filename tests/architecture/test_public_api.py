"""The typed public API (issue 25, item 4): the names a user's test touches import from the
package, lazily, and mypy sees their types, so a typo in a user's test is found before run time."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_llm_latency

PUBLIC = ("LatencyFixture", "MeasuredResult", "WorkloadResult", "Summary", "Verdict", "LatencyWarning",
          "LatencyDeprecationWarning", "Violation", "Failure", "RequestRecord", "Workload", "Clock",
          "LatencyError", "ConfigError", "EmptySampleError", "MeasurementError")

USER_TEST = '''\
import pytest

from pytest_llm_latency import Clock, LatencyFixture, MeasuredResult, Summary, Verdict, WorkloadResult


def pytest_llm_latency_clock(config: pytest.Config) -> Clock | None:  # a conftest's hook
    return None


@pytest.mark.llm_slo(workload="chat", samples=20, ttft_p95="800ms")
def test_chat(llm_latency: LatencyFixture) -> None:
    result = llm_latency.measure(workload="chat", prompt_tokens=256, samples=20)
    ttft: Summary = result.ttft
    assert ttft.p50 <= result.ttft.p90 <= result.ttft.p99 <= result.ttft.max
    assert result.tpot.mean < 40.0 and result.itl.p95 < 80.0 and result.e2e.p90 < 5000.0
    assert result.ttfo.p95 < 900.0 and result.output_tps.p50 > 10.0
    assert result.ttft.p955 < 800
    checked: MeasuredResult = result.check(tpot_p95="40ms")
    verdict: Verdict = checked.verdict
    assert verdict == "pass"
    assert not checked.violations and checked.n == len(checked.records)
    judged: WorkloadResult = checked.result
    assert judged.summaries["ttft"].n == judged.ttft.n
'''
TYPO_LINE = USER_TEST.splitlines().index("    assert result.ttft.p955 < 800") + 1


def test_public_names_import_from_the_package():
    assert set(pytest_llm_latency.__all__) == {"__version__", *PUBLIC} == {"__version__", *pytest_llm_latency._EXPORTS}
    for name in PUBLIC:
        assert name in pytest_llm_latency.__all__, name
        assert getattr(pytest_llm_latency, name) is not None, name
    assert issubclass(pytest_llm_latency.LatencyDeprecationWarning, DeprecationWarning)
    assert not issubclass(pytest_llm_latency.LatencyDeprecationWarning, pytest_llm_latency.LatencyWarning)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = pytest_llm_latency.NoSuchName


def test_the_package_ships_its_types():
    assert (Path(pytest_llm_latency.__file__).parent / "py.typed").is_file()


def test_importing_the_package_loads_nothing_heavy():
    """The exports are lazy (PEP 562): ``import pytest_llm_latency`` and naming a core type
    load neither pytest, httpx, numpy nor yaml; the fixture class loads pytest only when named."""
    code = ("import sys\n"
            "import pytest_llm_latency as p\n"
            "heavy = ('pytest', 'httpx', 'numpy', 'yaml')\n"
            "print('BARE', [m for m in heavy if m in sys.modules])\n"
            "p.Summary, p.Verdict, p.WorkloadResult, p.LatencyWarning, p.LatencyDeprecationWarning\n"
            "print('CORE', [m for m in heavy if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "BARE []" in out.stdout and "CORE []" in out.stdout, out.stdout


def test_verdict_is_one_of_three_plain_strings():
    """A ``Literal``: the verdict stays a plain ``str`` (xdist's execnet, JSON and JUnit take it as it is)."""
    from typing import get_args

    from pytest_llm_latency.core.checks import evaluate
    from pytest_llm_latency.core.result.result import VERDICTS
    from pytest_llm_latency.core.spec.workload import make_workload

    assert get_args(pytest_llm_latency.Verdict) == VERDICTS == ("pass", "fail", "error")
    res = evaluate(make_workload("chat", {}), [], [])  # nothing measured: an error
    assert type(res.verdict) is str and res.verdict == "error"


def _mypy_env(tmp_path: Path) -> dict[str, str]:
    """mypy finds an installed package by its ``py.typed`` and reports no errors inside it; an
    editable install (an import hook) it cannot follow, so point MYPYPATH at the source tree
    and silence the package's own errors as for an installed one (``mypy pytest_llm_latency``
    checks those, in CI)."""
    env = dict(os.environ)
    root = Path(pytest_llm_latency.__file__).resolve().parent.parent
    if "site-packages" not in root.parts:
        env["MYPYPATH"] = str(root)
        (tmp_path / "mypy.ini").write_text("[mypy]\n[mypy-pytest_llm_latency.*]\nfollow_imports = silent\n")
    return env


def test_mypy_on_a_users_test_reports_exactly_the_typo(tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "test_user.py").write_text(USER_TEST)
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
                          "--hide-error-context", "--no-error-summary", "--show-error-codes", "test_user.py"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_mypy_env(tmp_path))
    errors = [line for line in out.stdout.splitlines() if re.search(r": (error|note):", line)]
    assert len(errors) == 1, out.stdout + out.stderr
    assert re.match(rf'test_user\.py:{TYPO_LINE}: error: "Summary" has no attribute "p955"', errors[0]), errors
    assert out.returncode == 1


def test_a_metric_with_no_values_raises_and_says_why():
    from pytest_llm_latency import EmptySampleError, WorkloadResult
    from pytest_llm_latency.core.measure.stats import summarize
    from pytest_llm_latency.core.spec.workload import make_workload

    res = WorkloadResult(workload=make_workload("chat", {}))
    res.errors.append("no successful requests out of 3 (connect)")
    with pytest.raises(EmptySampleError, match=r"no TTFT values were measured \(no successful requests out of 3"):
        _ = res.ttft
    with pytest.raises(AttributeError):
        _ = res.ttfft  # type: ignore[attr-defined]
    res.summaries["tpot"] = summarize([10.0, 20.0], "TPOT")
    assert res.tpot.max == 20.0 and res.metric("tpot") is res.tpot
    with pytest.raises(EmptySampleError, match=r"no output tok/s values were measured"):
        _ = res.output_tps
