"""P4 (issue 14): a pytest run with no latency tests must not pay for the plugin's measuring
machinery.  ``benchmarks/startup.py`` measures the cost; this guards what made it small: the
executor, workloads, results and the baseline comparison load only when a latency test (or a
baseline) needs them."""
from __future__ import annotations

import subprocess
import sys

DEFERRED = ("pytest_llm_latency.plugin.execute", "pytest_llm_latency.plugin.fixtures",
            "pytest_llm_latency.core.result.result", "pytest_llm_latency.core.spec.workload",
            "pytest_llm_latency.core.measure.compare", "pytest_llm_latency.plugin.baseline", "httpx")


def test_plain_run_does_not_load_the_measuring_machinery(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    code = ("import sys, pytest\n"
            f"rc = pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'no:randomly', {str(tmp_path)!r}])\n"
            "assert 'pytest_llm_latency.plugin.hooks' in sys.modules, 'the plugin did not load'\n"
            f"print('LOADED', [m for m in {DEFERRED!r} if m in sys.modules])\n"
            "sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "LOADED []" in out.stdout, out.stdout
