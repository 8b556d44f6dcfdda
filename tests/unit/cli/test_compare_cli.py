"""``pytest-llm-latency compare``: exit codes 0/1/2, the table (plain and Markdown), JUnit
written with the junit-xml package and parsed back, clear errors for bad or mismatched files."""
from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from pytest_llm_latency.cli.main import main
from pytest_llm_latency.files import baseline as bfile


def samples(seed: int, tpot_scale: float = 1.0, ttft_scale: float = 1.0, n: int = 60) -> dict:
    rng = random.Random(seed)
    ttft = [40 * ttft_scale * math.exp(rng.gauss(0, 0.05)) for _ in range(n)]
    tpot = [7 * tpot_scale * math.exp(rng.gauss(0, 0.03)) for _ in range(n)]
    e2e = [a + 15 * b for a, b in zip(ttft, tpot)]
    return bfile.encode_samples({"ttft": ttft, "tpot": tpot, "e2e": e2e})


def write(path, tests: dict, model: str = "m") -> str:
    bfile.save(path, bfile.make_document({k: {"samples": v} for k, v in tests.items()}, {"model": model}))
    return str(path)


def test_same_distribution_exits_0_and_prints_the_table(tmp_path, capsys):
    a = write(tmp_path / "a.json", {"t::chat": samples(1)})
    b = write(tmp_path / "b.json", {"t::chat": samples(2)})
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["test", "metric", "base", "candidate", "ratio", "CI", "verdict"]
    assert "t::chat  TPOT p50" in out and "REGRESSION" not in out
    assert "0 regression(s) in 4 comparison(s) of 1 test(s)" in out


def test_slower_decode_exits_1_with_junit_parsed_back_and_markdown(tmp_path, capsys):
    a = write(tmp_path / "a.json", {"t::chat": samples(1), "t::agent": samples(3)})
    b = write(tmp_path / "b.json", {"t::chat": samples(2, tpot_scale=1.15), "t::agent": samples(4)}, model="m2")
    xml = tmp_path / "out" / "gate.xml"
    assert main(["compare", a, b, "--max-regression", "tpot_p50=5%,e2e_p50=50%", "--junit-xml", str(xml),
                 "--markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("| test | metric | base | candidate | ratio | CI | verdict |\n|---|---|")
    assert "| t::chat | TPOT p50 |" in out and "| REGRESSION |" in out
    assert "regression: t::chat: TPOT p50 +" in out and "> tolerance 5%" in out
    assert "warning: fingerprint differs: model: 'm' -> 'm2'" in out
    root = ET.parse(xml).getroot()
    cases = root.findall(".//testcase")
    assert len(cases) == 2 * 4                                   # test x metric
    failed = [(c.get("classname"), c.get("name")) for c in cases if c.find("failure") is not None]
    assert failed == [("t::chat", "tpot_p50")]
    msg = cases[[c.get("name") for c in cases].index("tpot_p50")].find("failure").get("message")
    assert msg.startswith("TPOT p50 +") and "95% CI" in msg


def test_slower_ttft_is_flagged_and_faster_is_an_improvement(tmp_path, capsys):
    a = write(tmp_path / "a.json", {"t::chat": samples(1)})
    slow = write(tmp_path / "s.json", {"t::chat": samples(2, ttft_scale=1.15)})
    fast = write(tmp_path / "f.json", {"t::chat": samples(2, tpot_scale=0.8)})
    assert main(["compare", a, slow]) == 1
    assert "regression: t::chat: TTFT p50 +" in capsys.readouterr().out
    assert main(["compare", a, fast]) == 0
    assert "improvement: t::chat: TPOT p50 -" in capsys.readouterr().out


@pytest.mark.parametrize("content, expected", [
    (None, "no such file"),
    ("{not json", "not valid JSON (line 1"),
    ('{"results": [{"nodeid": "t", "workload": "chat"}]}', "no per-request samples: write it with "
                                                            "--llm-latency-json-samples"),
    ('{"format": "something-else"}', "not a baseline file"),
    ('{"format": "pytest-llm-latency-baseline", "version": 1, "fingerprint": {}, '
     '"tests": {"t::chat": {"samples": {"ttft_ms": ["x"]}}}}', "samples.ttft_ms: expected a list of numbers"),
])
def test_unusable_input_exits_2_with_a_clear_message(tmp_path, capsys, content, expected):
    good = write(tmp_path / "a.json", {"t::chat": samples(1)})
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert main(["compare", good, str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pytest-llm-latency compare: {bad}: ") and expected in err


def test_mismatched_files_and_bad_tolerance_exit_2(tmp_path, capsys):
    a = write(tmp_path / "a.json", {"t::chat": samples(1)})
    b = write(tmp_path / "b.json", {"u::agent": samples(2)})
    assert main(["compare", a, b]) == 2
    assert "no test in common: the baseline has t::chat, the candidate u::agent" in capsys.readouterr().err
    assert main(["compare", a, a, "--max-regression", "tpot_p50=lots"]) == 2
    assert "--max-regression: regression tpot_p50: expected a percentage" in capsys.readouterr().err


def test_a_results_file_with_samples_is_accepted_and_the_console_script_runs(tmp_path):
    res = {"version": "0", "results": [{"nodeid": "t", "workload": "chat", "samples": samples(1)}]}
    (tmp_path / "r.json").write_text(json.dumps(res))
    b = write(tmp_path / "b.json", {"t::chat": samples(2, tpot_scale=1.2)})
    p = subprocess.run([sys.executable, "-m", "pytest_llm_latency.cli", "compare", str(tmp_path / "r.json"), b],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "regression: t::chat: TPOT p50 +" in p.stdout


def test_help_names_the_default_tolerances(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "ttft_p50=10%, ttft_p95=15%, tpot_p50=5%, e2e_p50=10%" in out


def test_a_tpot_regression_is_explained_by_the_files_decode_totals(tmp_path, capsys):
    def with_totals(tps, tpot_scale):
        steps = 900 / tps
        return {"samples": samples(1 if tps == 3.0 else 2, tpot_scale=tpot_scale),
                "decode_totals": {"decode_tokens": 900, "decode_ms": 21.0 * steps, "tokens_per_step": tps,
                                  "step_ms": 21.0, "source": "vLLM /metrics counters"}}
    a, b, old = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "old.json"
    bfile.save(a, bfile.make_document({"t::chat": with_totals(3.0, 1.0)}, {"model": "m"}))
    bfile.save(b, bfile.make_document({"t::chat": with_totals(1.2, 2.5)}, {"model": "m"}))
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert ("explained: t::chat: TPOT +150 % on run totals (Σ decode time ÷ Σ decode tokens, 7 → 17.5 ms; not a "
            "percentile): engine steps unchanged (21 → 21 ms), tokens per step 3.0 → 1.2: draft acceptance fell") in out
    assert "the fingerprint shows no change" in out
    write(old, {"t::chat": samples(1)})                        # a baseline saved before decode totals
    assert main(["compare", str(old), str(b)]) == 1
    assert "explained: t::chat: not split into engine step time and tokens per step: the baseline stores no " \
           "decode totals" in capsys.readouterr().out
