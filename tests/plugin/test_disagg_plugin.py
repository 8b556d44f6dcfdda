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
    samples: 6
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
                            "6 transfers; p95 interpolated in the 10-25 ms bucket)*",
                            "*disaggregated serving*", "*TTFT mean * ms = queue * + prefill * + kv transfer * "
                            "+ first decode step * + remainder *"])
    doc = validated_results(pytester.path / "out.json")
    d = doc["results"][0]["disagg"]
    assert (d["link"], d["link_gb_s"], d["kv_bytes_per_token"], d["prompt_tokens"]) == \
        ("ethernet-100g", 12.5, 131072.0, 2000.0)
    assert d["kv_bytes"] == 262_144_000 and d["floor_ms"] == 20.9715
    assert d["floor_arithmetic"] == ("131,072 B/token × 2,000 tokens = 262.1 MB ÷ 12.5 GB/s (Ethernet 100GbE) "
                                     "= 21.0 ms")
    assert d["transfers"] == 6 and d["transfer_bytes_mean"] == 262_144_000
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


def test_prompts_of_different_lengths_compare_a_percentile_transfer_with_that_percentiles_prompt(pytester):
    """A p95 transfer is a long prompt's: against the mean prompt's floor it claimed a small share of the link
    (a chat + summarization mix on 25 GB/s: 'KV transfer p95 89.1 ms for 270.1 MB = 0.12 of the link' while the
    16,000-token transfers ran at ~0.9 of it).  Every p95 prompt here is 4000 tokens; the mean is ~2500."""
    from pytest_llm_latency.core.roofline.kv_layout import format_bytes

    pytester.makefile(".slo.yaml", test_pd=SLO.replace("prompt_tokens: 2000", "prompt_tokens: {distribution: "
                                                       "uniform, min: 1000, max: 4000}").replace("samples: 6",
                                                                                                 "samples: 10"))
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={pair('ethernet-100g')}",
                           "--llm-latency-json=out.json")
    r.assert_outcomes(failed=1)
    d = validated_results(pytester.path / "out.json")["results"][0]["disagg"]
    p95 = d["floor_by_stat"]["p95"]
    assert d["prompt_tokens"] < p95["prompt_tokens"] <= 4000 and p95["kv_bytes"] > d["kv_bytes"]
    assert set(d["floor_by_stat"]) == {"p50", "p90", "p95", "p99", "max"}
    assert p95["floor_ms"] == round(p95["kv_bytes"] / 12.5e9 * 1000, 4)
    out = r.stdout.str()
    share = p95["floor_ms"] / d["kv_transfer_ms_p95"]
    assert (f"KV transfer p95 {d['kv_transfer_ms_p95']:.1f} ms for {format_bytes(p95['kv_bytes'])} = {share:.2f} "
            f"of the 12.5 GB/s link (Ethernet 100GbE; floor {p95['floor_ms']:.1f} ms) > budget 10 ms") in out
    assert d["floor_arithmetic"].startswith("131,072 B/token × ")  # the HTML's arithmetic: the mean prompt's
