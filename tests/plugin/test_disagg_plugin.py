"""Issue 37 through pytest: the reference target as a prefill/decode pair (``pd_link=``) with a slow link
fails ``kv_transfer_p95`` naming the link and its floor, with a fast link passes; the JSON carries the
floor's arithmetic and the TTFT split, the HTML shows them.  Bad input (an unknown link, a negative
bandwidth, a kv_transfer budget on a target with no pools) is an error before any request."""
from __future__ import annotations

import json

from tests.helpers.results import validated_results

SLO = """
workloads:
  pd:
    class: custom
    prompt_tokens: 2000
    output_tokens: 4
    samples: 20      # a p95 needs 20 transfers (core.measure.stats.min_samples_for)
    warmup: 1
    confidence: null
    slo:
      kv_transfer_p95: 10ms
"""


def pair(link: str, extra: str = "") -> str:
    return f"reference://h100-sxm/llama-3.1-8b?pd_link={link}&max_model_len=8192{extra}"


def run(pytester, url: str, *args: str):
    pytester.makefile(".slo.yaml", test_pd=SLO)
    return pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={url}", "--llm-latency-json=out.json",
                              "--llm-latency-html=out.html", *args)


def test_a_slow_link_fails_kv_transfer_p95_naming_the_link_and_its_floor(pytester):
    # 2000 tokens x 131 072 B = 262.1 MB over 100GbE (12.5 GB/s): 21.0 ms a transfer, above 10 ms
    r = run(pytester, pair("ethernet-100g"))
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*KV transfer p95 * ms for 262.1 MB = 0.* of the 12.5 GB/s link (Ethernet 100GbE; "
                            "floor 21.0 ms) > budget 10 ms (vllm:nixl_xfer_time_seconds on the decode pool, "
                            "20 transfers; p95 interpolated in the 10-25 ms bucket)*",
                            "*disaggregated serving*", "*TTFT mean * ms = queue * + prefill * + kv transfer * "
                            "+ first decode step * + remainder *"])
    doc = validated_results(pytester.path / "out.json")
    d = doc["results"][0]["disagg"]
    assert (d["link"], d["link_gb_s"], d["kv_bytes_per_token"], d["prompt_tokens"]) == \
        ("ethernet-100g", 12.5, 131072.0, 2000.0)
    assert d["kv_bytes"] == 262_144_000 and d["floor_ms"] == 20.9715
    assert d["floor_arithmetic"] == ("131,072 B/token × 2,000 tokens = 262.1 MB ÷ 12.5 GB/s (Ethernet 100GbE) "
                                     "= 21.0 ms")
    assert d["transfers"] == 20 and d["transfer_bytes_mean"] == 262_144_000
    assert abs(d["kv_transfer_ms_mean"] - 20.9715) < 0.01   # each transfer alone on the link: the floor exactly
    parts = {p["part"]: p for p in d["ttft_split"]}
    assert set(parts) == {"queue", "prefill", "kv_transfer", "first_decode_step", "remainder"}
    assert abs(parts["kv_transfer"]["ms"] - d["kv_transfer_ms_mean"]) < 1e-3
    assert "decode pool" in parts["first_decode_step"]["source"]
    html = (pytester.path / "out.html").read_text()
    assert "Disaggregated serving" in html
    assert "floor = 131,072 B/token × 2,000 tokens = 262.1 MB ÷ 12.5 GB/s (Ethernet 100GbE) = 21.0 ms" in html


def test_a_fast_link_passes(pytester):
    r = run(pytester, pair("nvlink-4"))
    r.assert_outcomes(passed=1)
    d = json.loads((pytester.path / "out.json").read_text())["results"][0]["disagg"]
    assert d["link_name"] == "NVLink 4 (H100)" and d["floor_ms"] < 1.0   # 262.1 MB / 450 GB/s = 0.58 ms
    assert d["kv_transfer_ms_p95"] <= 5.0    # inside vLLM's first bucket (<= 5 ms)


def test_kv_link_on_the_command_line_outranks_the_reference_pd_link(pytester):
    r = run(pytester, pair("nvlink-4"), "--llm-latency-kv-link=25")
    r.assert_outcomes(passed=1)
    d = json.loads((pytester.path / "out.json").read_text())["results"][0]["disagg"]
    assert (d["link"], d["link_gb_s"], d["floor_ms"]) == ("custom", 25.0, 10.4858)


def test_an_unknown_link_key_says_did_you_mean(pytester):
    r = run(pytester, pair("nvlink-4"), "--llm-latency-kv-link=ib-ndx")
    assert r.ret != 0
    assert "kv_link: unknown link 'ib-ndx'; did you mean ib-ndr" in r.stderr.str() + r.stdout.str()


def test_a_negative_bandwidth_is_refused(pytester):
    pytester.makefile(".slo.yaml", test_pd="target:\n  kv_link: -25\n" + SLO)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={pair('nvlink-4')}")
    out = r.stdout.str() + r.stderr.str()
    assert r.ret != 0 and "test_pd.slo.yaml:2 target.kv_link" in out
    assert "a link's bandwidth must be a positive number of GB/s" in out


def test_an_unknown_reference_pd_link_is_refused(pytester):
    r = run(pytester, pair("ib-ndx"))
    out = r.stdout.str() + r.stderr.str()
    assert r.ret != 0 and "pd_link: unknown link 'ib-ndx'; did you mean ib-ndr" in out


def test_a_kv_transfer_budget_on_a_target_without_pools_is_an_error_before_any_request(pytester):
    r = run(pytester, "reference://h100-sxm/llama-3.1-8b?time_scale=0&max_model_len=8192")
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert "configuration error" in out and "kv_transfer_p95 needs a disaggregated target" in out
    assert "--llm-latency-prefill-metrics-url" in out
    results = json.loads((pytester.path / "out.json").read_text())["results"] \
        if (pytester.path / "out.json").exists() else []
    assert all(res["n"] == 0 and not res.get("requests") for res in results)  # nothing was sent


AB = """
workloads:
  pd:
    class: custom
    prompt_tokens: 200
    output_tokens: 4
    samples: 4
    warmup: 0
    confidence: null
    baseline_target: "{base}"
    slo: {slo}
"""


def test_an_ab_run_refuses_kv_transfer_budgets_and_scrapes_no_pool(pytester):
    # the baseline arm's blocks would scrape the candidate's pools, and only the first block's would count
    base = pair("ib-hdr", "&time_scale=0")
    pytester.makefile(".slo.yaml", test_pd=AB.format(base=base, slo="{kv_transfer_p95: 10ms}"))
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={pair('nvlink-4', '&time_scale=0')}",
                           "--llm-latency-json=out.json")
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines(["*configuration error*kv_transfer_p95 cannot be judged in an A/B run (baseline_target): "
                            "its blocks alternate between deployments*measure each deployment in its own run*"])
    pytester.makefile(".slo.yaml", test_pd=AB.format(base=base, slo="{ttft_p50: 60s}"))
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={pair('nvlink-4', '&time_scale=0')}",
                           "--llm-latency-json=out.json")
    r.assert_outcomes(passed=1)
    res, = validated_results(pytester.path / "out.json")["results"]
    assert "disagg" not in res   # no figure from a block's pools standing for the arm
    assert any(n.startswith("disaggregated target: its pools' /metrics are not scraped in an A/B run")
               for n in res["notes"])


MIXED = """
workloads:
  pd:
    class: custom
    prompt_tokens: {distribution: uniform, min: 200, max: 3000}
    output_tokens: 2
    samples: 20
    warmup: 1
    confidence: null
    slo:
      kv_transfer_p95: 1ms
"""


def test_mixed_prompts_compare_each_transfer_statistic_with_the_same_statistic_of_their_floors(pytester):
    # each transfer alone on the link takes its own prompt's floor: the mean floor / the mean transfer is 1
    pytester.makefile(".slo.yaml", test_pd=MIXED)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={pair('ethernet-100g')}",
                           "--llm-latency-json=out.json")
    r.assert_outcomes(failed=1)
    d = validated_results(pytester.path / "out.json")["results"][0]["disagg"]
    low, top = d["prompt_tokens_min"], d["prompt_tokens_max"]
    assert 200 <= low < d["prompt_tokens"] < top <= 3000
    assert abs(d["achieved_fraction"] - 1.0) < 0.02                    # the mean with the mean
    assert abs(d["floor_ms_max"] - top * 131072 / 12.5e6) < 1e-3       # the longest prompt's
    assert d["floor_ms_p50"] < d["floor_ms_p95"] < d["floor_ms_max"]
    r.stdout.fnmatch_lines([f"*KV transfer p95 * ms for * = * of the 12.5 GB/s link (Ethernet 100GbE; floor "
                            f"{d['floor_ms_p95']:.1f} ms: the p95 of the requests' floors, prompts {low:,.0f}-"
                            f"{top:,.0f} tokens) > budget 1 ms*",
                            f"*mean * ms over 20 transfers = {d['achieved_fraction']:.2f} of the link (the mean "
                            f"floor {d['floor_ms']:.1f} ms)*"])
