"""P4: what the plugin adds to pytest's start-up, in a repo with no latency tests.

    .venv/bin/python benchmarks/startup.py [--runs 20] [--json benchmarks/results/startup.json]

A throw-away repo (``tmp``) holds 20 plain test files (no latency markers, no SLO YAML) and a
``pytest.ini``.  ``python -m pytest --co -q -p no:cacheprovider`` runs there ``--runs`` times with
the plugin (auto-loaded from its entry point) and ``--runs`` times with ``-p no:llm_latency``,
alternating (so a neighbour's load hits both alike); each run is one fresh process, timed
wall-clock from spawn to exit.  Reported: the median of each and the difference (the plugin's
cost), with the load average before and after.  Also: CPU time (user+sys of the child), and the
plugin module's own import time in a fresh interpreter that already imported pytest (median of
``--runs``), which a loaded machine disturbs far less than the difference of two ~1 s timings.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = "def test_a_{i}():\n    assert {i} + 1 == {j}\n\n\ndef test_b_{i}():\n    assert str({i})\n"


def make_repo(root: Path) -> None:
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (root / "tests").mkdir()
    for i in range(20):
        (root / "tests" / f"test_plain_{i}.py").write_text(TEST.format(i=i, j=i + 1))


def one(cmd: list[str], cwd: Path) -> tuple[float, float]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout.decode()[-2000:]}")
    return wall * 1000, (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000


IMPORT_COST = ("import time, pytest\nt = time.perf_counter()\nimport pytest_llm_latency.plugin.hooks\n"
               "print((time.perf_counter() - t) * 1000)")


def import_ms(runs: int) -> float:
    """The plugin module's own import (``pytest`` already loaded), median over fresh interpreters:
    a figure the neighbours' load disturbs less than two ~1 s process timings' difference."""
    out = [float(subprocess.run([sys.executable, "-c", IMPORT_COST], capture_output=True, text=True,
                                timeout=60, check=True).stdout) for _ in range(runs)]
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", default=str(Path(__file__).parent / "results" / "startup.json"),
                    help="write the result here (machine-readable; benchmarks/report.py reads it)")
    a = ap.parse_args()
    base = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
    variants = {"plugin": base, "no_plugin": base + ["-p", "no:llm_latency"]}
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_repo(root)
        out = subprocess.run(base, cwd=root, capture_output=True, text=True, timeout=120).stdout
        if "40 tests collected" not in out:
            raise SystemExit(f"unexpected collection:\n{out[-1000:]}")
        for cmd in variants.values():  # warm the page cache and .pyc files
            one(cmd, root)
        wall: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(a.runs):
            for name, cmd in variants.items():
                w, c = one(cmd, root)
                wall[name].append(w)
                cpu[name].append(c)
    imp = import_ms(a.runs)
    load1 = os.getloadavg()
    med = {k: statistics.median(v) for k, v in wall.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    res = {"runs": a.runs, "wall_ms_median": med, "cpu_ms_median": cmed,
           "added_wall_ms": med["plugin"] - med["no_plugin"], "plugin_import_ms_median": imp, "added_cpu_ms": cmed["plugin"] - cmed["no_plugin"],
           "loadavg_before": load0, "loadavg_after": load1, "python": sys.version.split()[0],
           "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(f"pytest --co -q, {a.runs} alternating runs each, median wall ms: plugin {med['plugin']:.1f}, "
          f"-p no:llm_latency {med['no_plugin']:.1f}, added {res['added_wall_ms']:+.1f} ms "
          f"(CPU {res['added_cpu_ms']:+.1f} ms); plugin import alone {imp:.1f} ms; load {load0[0]:.2f} -> {load1[0]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
