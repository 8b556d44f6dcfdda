"""Speculative decoding end to end on the reference target (issue 26's first two acceptance
points): its engine steps run at 0.8 of the H100 ceiling and emit 1 + accepted tokens in one SSE
chunk, and its /metrics carries vLLM's spec-decode counters; no drafter bytes are given.

* 2 drafted tokens, all accepted: 3 tokens per step; the gate judges the steps (0.8) at a 0.6
  floor and passes, though per token decode runs at 2.4x the single-token ceiling.
* The same steps with acceptance 0.2 at the first position only: ~1.2 tokens per step.  A TPOT
  budget between the two fails and names the acceptance; against a baseline of the first run
  the deploy gate says the steps are unchanged and tokens per step fell."""
import json

import pytest

REF = "reference://h100-sxm/llama-3.1-8b?decode_efficiency=0.8&spec_tokens=2&jitter=0.02&spec_acceptance="
ALL_ACCEPTED, FEW_ACCEPTED = "1.0", "0.2,0"

SLO = """
target: {{url: "{url}"}}
roofline: {{min_decode_efficiency: 0.6}}
workloads:
  decode: {{class: custom, prompt_tokens: 64, output_tokens: 64, samples: 12, warmup: 1, slo: {{tpot_p50: 3.5ms}}}}
"""


def run(pytester, acceptance, *args):
    pytester.makefile(".slo.yaml", spec=SLO.format(url=REF + acceptance))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", *args, timeout=300)


def result(pytester) -> dict:
    (res,) = json.loads((pytester.path / "r.json").read_text())["results"]
    return res


def test_three_tokens_per_step_at_0_8_of_the_ceiling_pass_a_0_6_floor(pytester):
    r = run(pytester, ALL_ACCEPTED)
    r.assert_outcomes(passed=1)
    res = result(pytester)
    spec, roof = res["spec_decode"], res["roofline"]
    assert spec["source"] == "vLLM /metrics counters" and spec["scope"] == "run"
    assert spec["tokens_per_step"] == pytest.approx(3.0, abs=0.1) and spec["acceptance_rate"] == 1.0
    assert roof["tokens_per_step"] == pytest.approx(3.0, abs=0.1)
    assert roof["step_efficiency"] == pytest.approx(0.8, abs=0.05), roof
    assert roof["decode_efficiency"] > 2.0              # per token: far above the single-token ceiling
    assert roof["status"] == "pass"
    assert "drafter bytes not counted" in r.stdout.str()  # no roofline.draft: said, the steps still judged


def test_acceptance_falls_tpot_fails_naming_it_and_the_gate_says_steps_unchanged(pytester):
    run(pytester, ALL_ACCEPTED, "--llm-latency-save-baseline=base.json").assert_outcomes(passed=1)
    r = run(pytester, FEW_ACCEPTED, "--llm-latency-baseline=base.json")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    res = result(pytester)
    tps = res["spec_decode"]["tokens_per_step"]
    assert tps == pytest.approx(1.2, abs=0.1), res["spec_decode"]
    assert res["roofline"]["step_efficiency"] == pytest.approx(0.8, abs=0.05)   # the same steps
    # the TPOT budget fails, and its explanation names the acceptance
    assert any(v.startswith("TPOT p50") for v in res["violations"]), res["violations"]
    assert f"tokens per step {tps:.2f} (acceptance " in out and "each engine step emitted few tokens" in out
    # the deploy gate against the first run: steps unchanged, tokens per step fell
    assert "engine steps unchanged" in out and f"tokens per step 3.0 → {tps:.1f}: draft acceptance fell" in out, out
    assert "engine steps unchanged" in res["baseline"]["explanation"]
