"""A server sweep of a mixed workload end to end on the reference target: chunked prefill off and on as two
running servers, the chat class carrying a stall budget.  Each arm's table row is followed by its classes' own
figures (what their budgets are judged on, not the pooled ones), the JSON's arm rows carry them (as the schema
says), and the HTML chart plots the class carrying the stall budget, with that budget's line."""
import html
import re

from tests.helpers.results import validated_results

REF = "reference://h100-sxm/llama-3.1-8b?ignore_eos=1&time_scale=0.2"
MIX = f"""
target: {{url: "{REF}"}}
workloads:
  shared:
    mix:
      talk: {{weight: 0.8, prompt_tokens: 256, output_tokens: 64}}
      summ: {{weight: 0.2, prompt_tokens: 8000, output_tokens: 8}}
    rate: 20
    requests: 20
    warmup: 0
    stall_prompt_tokens: 4000
    slo:
      talk: {{ttft_p50: 10s, stall_max: 5s}}
      summ: {{ttft_p50: 10s}}
    server_sweep:
      urls:
        unchunked: "{REF}"
        chunked: "{REF}&chunked_prefill=1&max_num_batched_tokens=512"
      block_size: 10
"""


def test_a_mixs_arms_show_each_classs_figures_and_the_chart_the_class_with_the_stall_budget(pytester):
    pytester.makefile(".slo.yaml", mix=MIX)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json",
                                      "--llm-latency-html=r.html", timeout=300)
    r.assert_outcomes(passed=1)
    res, = validated_results(pytester.path / "r.json")["results"]  # the arms' class rows as the schema says
    arms = {a["name"]: a for a in res["arms"]["arms"]}
    for arm in arms.values():
        talk = next(c for c in arm["classes"] if c["name"] == "talk")
        assert talk["requests"] == 16 and talk["verdict"] == "pass" and talk["stall"]["stall_ms_max"] > 0
        assert {b["key"] for b in talk["budgets"]} >= {"ttft_p50", "stall_max"}
    out = r.stdout.str()
    talk = arms["chunked"]["classes"][0]
    assert re.search(r"\n    chunked\s+reference://\S+\s+20\s+0\s", out)
    assert re.search(rf"\n      \[talk\]\s+16\s+0\s+{talk['stats']['ttft_p95_ms']:.1f}\s", out), out
    assert re.search(r"\n      \[summ\]\s+4\s+0\s", out)
    page = html.unescape((pytester.path / "r.html").read_text())
    assert "Server sweep: class talk's TTFT p95 against its stall max per arm (talk carries the stall budget)" in page
    assert 'class="y-budget" data-budget="5000.0"' in page
    assert res["arms"]["recommendation"].startswith("2 of 2 arms meet every budget")
