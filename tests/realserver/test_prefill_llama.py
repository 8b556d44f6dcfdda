"""The prefill roofline against a real llama.cpp ``llama-server`` (``-t 1``) on the ~406 MB F32
``membound`` model: the client's fit agrees with llama.cpp's own ``timings.prompt_per_second``,
and the MFU against this machine's measured float32 matmul peak is a fraction.

Small on purpose (2 cores, shared): three short prompt lengths, three samples each."""
import pytest

pytestmark = pytest.mark.integration


def test_prefill_fit_agrees_with_llama_cpp_and_mfu_is_a_fraction(llm_latency, llama_membound, gguf_models,
                                                                  monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_LATENCY_CACHE", str(tmp_path))  # a fresh FLOPS probe, never another run's figure
    res = llm_latency.measure(url=llama_membound.url, prompt_sweep=[128, 512, 1024], samples=3, warmup=1,
                              roofline={"hardware": "local-cpu", "gguf": str(gguf_models["membound"])})
    p = res.prefill.to_json()
    print(f"llama.cpp prefill: fit {p['tok_s']:.0f} tok/s, overhead {p['overhead_ms']:.1f} ms; llama.cpp "
          f"prompt_per_second {p['server_reported_tok_s']:.0f} tok/s at 1024 tokens (server fit "
          f"{p['server_tok_s']:.0f}); client - server {p['server_overhead_ms']:.1f} ms; MFU {p['mfu']:.3f} of "
          f"{p['peak_tflops'] * 1e3:.1f} GFLOP/s ({p['hardware']}); {p['gflop_per_token']:.3f} GFLOP/token")
    assert p["server_source"] == "llama.cpp timings"
    assert p["tok_s"] == pytest.approx(p["server_reported_tok_s"], rel=0.15)
    assert 0 < p["mfu"] <= 1.05
    assert p["status"] == "report" and res.verdict == "pass", p
