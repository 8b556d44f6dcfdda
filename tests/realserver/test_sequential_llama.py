"""``samples: auto`` against a real llama.cpp ``llama-server`` (the integration tier)."""
import pytest

pytestmark = pytest.mark.integration


def test_samples_auto_stops_at_the_first_possible_pass_on_llama_server(llm_latency, llama_tiny):
    """Budgets far above the tiny model's latencies: every sample is inside them, so each p95
    passes at the first sample size where a 95% upper bound exists under the sequential rule
    (62), and sampling stops there instead of running to max_samples."""
    r = llm_latency.measure(url=llama_tiny.url, prompt_tokens=64, output_tokens=8, samples="auto", warmup=1,
                            ttft_p95="5s", tpot_p95="1s", **{"class": "custom"})
    res = r._res
    assert res.verdict == "pass"
    assert r.n == 62 and res.measurement.stop_reason == "every budget decided at 62 samples"
    assert {v.key: (v.status, v.n, v.method) for v in res.verdicts} == {
        "ttft_p95": ("pass", 62, "sequential order-statistic"), "tpot_p95": ("pass", 62, "sequential order-statistic")}
    for v in res.verdicts:
        assert v.lower <= v.estimate <= v.upper < (5000 if v.key == "ttft_p95" else 1000)
    print(f"llama-server tiny, samples auto: n={r.n}, " + ", ".join(
        f"{v.key} {v.estimate:.2f} ms (95% bounds {v.lower:.2f}..{v.upper:.2f})" for v in res.verdicts))
