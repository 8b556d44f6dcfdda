"""Ollama as its users run it, through the plugin (pytester) against the reference target's
Ollama API, and an OpenAI-compatible server without /tokenize:

* exact prompt lengths without a tokenize endpoint, on servers that count tokens unlike the
  probe text (one per word; one per 3 characters);
* ``ollama-chat`` (/api/chat) measures TTFT, TTFO (with thinking) and TPOT as ``ollama`` does;
* cold model loads: flagged, excluded by default, counted and named; ``cold_ttft_max``;
* a second run against the same long-lived server with Ollama's prompt cache;
* the model name checked against /api/tags.
"""
import json
import re
import secrets
import xml.etree.ElementTree as ET

import pytest

from pytest_llm_latency.targets.reference.launch import start_reference

REF = "reference://h100-sxm/llama-3.1-8b"


def run(pytester, url, *args, slo=None, name="r.json"):
    if slo is not None:
        pytester.makefile(".slo.yaml", ollama=slo)
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={url}", f"--llm-latency-json={name}", *args)
    doc = json.loads((pytester.path / name).read_text())
    return r, {res["workload"]: res for res in doc["results"]}, doc


# ---------------------------------------------------------------- exact prompts
EXACT = """
workloads:
  p64: {class: custom, prompt_tokens: 64, output_tokens: 2, samples: 5, warmup: 1, max_error_rate: 0.5}
  p512: {class: custom, prompt_tokens: 512, output_tokens: 2, samples: 5, warmup: 1, max_error_rate: 0.5}
  p6000: {class: custom, prompt_tokens: 6000, output_tokens: 2, samples: 5, warmup: 1, max_error_rate: 0.5}
"""


@pytest.mark.parametrize("api, rule", [("ollama", "word"), ("ollama", "chars3"), ("ollama-chat", "chars3"),
                                       ("openai-completions", "word"), ("openai-completions", "chars3"),
                                       ("openai-chat", "word")])
def test_prompts_are_exact_without_a_tokenize_endpoint(pytester, api, rule):
    url = f"{REF}?time_scale=0&tokenize_endpoint=0&tokenizer={rule}&max_model_len=16384"
    r, res, _ = run(pytester, url, f"--llm-latency-api={api}", slo=EXACT)
    r.assert_outcomes(passed=3)
    for name, planned in (("p64", 64), ("p512", 512), ("p6000", 6000)):
        x = res[name]
        how = x["measurement"]["prompt_counter"]
        print(f"{api} {rule} {planned}: {how}; exact {x['measurement']['prompt_exact_requests']}/{x['n']}")
        assert how.startswith("linear estimate from probe usage; corrected on the server's count")
        # every measured sample: the server's own count equals the plan (none omitted, none off)
        assert x["n"] + x["failed_requests"] == 5 and x["measurement"]["prompt_exact_requests"] == x["n"] >= 3
        assert x["measurement"]["prompt_deviation_requests"] == 0
        assert not any("deviated" in n for n in x["notes"]), x["notes"]
        shift = int(re.search(r"body ([-+]\d+) chars \(exact", how).group(1))
        if rule == "word" and planned >= 512:  # the estimate alone is off by ~16%: the correction did it
            assert abs(shift) > planned // 2, how


# ---------------------------------------------------------------- ollama-chat timing
THINK = """
workloads:
  think: {class: custom, prompt_tokens: 2048, output_tokens: 24, samples: 10, warmup: 1, max_error_rate: 0.5}
"""


@pytest.mark.parametrize("api", ["ollama", "ollama-chat"])
def test_ollama_chat_measures_ttft_ttfo_and_tpot_like_generate(pytester, api):
    # time_scale=1: a 2048-token H100 prefill is ~69 ms and a decode step ~7 ms of modelled time,
    # stamped by the server in its own prompt_eval_duration / eval_duration (the ground truth)
    url = f"{REF}?time_scale=1&tokenize_endpoint=0&thinking_tokens=8"
    r, res, _ = run(pytester, url, f"--llm-latency-api={api}", slo=THINK)
    r.assert_outcomes(passed=1)
    x = res["think"]
    ttft, ttfo, tpot = x["ttft_ms"]["p50"], x["ttfo_ms"]["p50"], x["tpot_ms"]["p50"]
    prefill = x["server"]["server_prefill_ms_p50"]
    step = x["server"]["server_tpot_ms_p50"] * 24 / 23  # eval_duration / eval_count spans 23 steps of 24 tokens
    print(f"{api}: TTFT {ttft:.1f} (server prefill {prefill:.1f}), TTFO {ttfo:.1f}, TPOT {tpot:.2f} "
          f"(server {step:.2f}) ms")
    # the client's window holds the server's plus HTTP and scheduling overhead (a loaded 2-core box)
    assert prefill <= ttft < 1.25 * prefill + 15, (ttft, prefill)
    assert abs(tpot / step - 1) < 0.10, (tpot, step)
    # 8 thinking tokens before the first output: TTFO is 8 decode steps after TTFT
    assert abs((ttfo - ttft) / (8 * step) - 1) < 0.15, (ttft, ttfo, step)
    # ... counted from the stream's thinking chunks: the first 8 tokens of each response, fewer in a
    # short output that stopped while thinking (core.measure.reasoning)
    rows = [q for q in x["requests"] if q["status"] != "failed"]
    assert [q["reasoning_tokens"] for q in rows] == [min(8, q["output_tokens"]) for q in rows]
    assert all(q["reasoning_tokens"] + q["answer_tokens"] == q["output_tokens"] for q in rows)
    how = x["measurement"]
    assert how["reasoning_tokens"] == sum(q["reasoning_tokens"] for q in rows) and how["reasoning_source"] == "stream"
    assert how["answer_tokens"] == sum(q["output_tokens"] for q in rows) - how["reasoning_tokens"]


# ---------------------------------------------------------------- cold starts
COLD = """
workloads:
  cold: {class: custom, prompt_tokens: 256, output_tokens: 4, samples: 12, warmup: 1, max_error_rate: 0.5%s}
"""
# the model unloads after every 6th request (another client's model evicting it) and takes
# 400 ms to load: some samples pay it inside their TTFT (~10 ms warm)
EVICTING = f"{REF}?time_scale=1&tokenize_endpoint=0&load_time=0.4&evict_every=6"


def test_cold_starts_are_flagged_excluded_counted_and_named(pytester):
    r, res, _ = run(pytester, EVICTING, "--llm-latency-api=ollama", "--junitxml=out.xml", slo=COLD % "")
    r.assert_outcomes(passed=1)
    x = res["cold"]
    cold = x["cold_start"]["cold_starts"]
    assert cold >= 1 and x["n"] + cold + x["failed_requests"] == 12
    assert x["ttft_ms"]["max"] < 200, x["ttft_ms"]  # excluded: no 400 ms load in the statistics
    numbers = x["cold_start"]["cold_start_samples"]
    note = next(n for n in x["notes"] if "cold starts" in n)
    assert note.startswith(f"{cold} of 12 samples were cold starts") and "excluded from the statistics" in note
    assert all(f"#{i} " in note for i in numbers.split(","))
    r.stdout.fnmatch_lines(["notes (*):", f"*ollama.slo.yaml::cold: {cold} of 12 samples were cold starts*"])
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "out.xml").getroot().iter("property")}
    assert props["llm.cold_start.cold_starts"] == str(cold) and props["llm.cold_start.cold_start_samples"] == numbers


def test_cold_starts_include_keeps_them_and_fail_fails(pytester):
    r, res, _ = run(pytester, EVICTING, "--llm-latency-api=ollama", slo=COLD % ", cold_starts: include")
    r.assert_outcomes(passed=1)
    assert res["cold"]["cold_start"]["cold_starts"] >= 1 and res["cold"]["ttft_ms"]["max"] > 400
    assert any("kept in the statistics (cold_starts: include)" in n for n in res["cold"]["notes"])
    r, res, _ = run(pytester, EVICTING, "--llm-latency-api=ollama", slo=COLD % ", cold_starts: fail", name="f.json")
    r.assert_outcomes(failed=1)
    assert res["cold"]["verdict"] == "fail"
    r.stdout.fnmatch_lines(["*samples were cold starts*the workload allows none (cold_starts: fail)*"])


def test_keep_alive_keeps_the_model_loaded_on_a_server_that_unloads_at_once(pytester):
    # OLLAMA_KEEP_ALIVE=0: the server unloads after every request that does not ask otherwise
    url = f"{REF}?time_scale=1&tokenize_endpoint=0&load_time=0.4&keep_alive=0"
    r, res, _ = run(pytester, url, "--llm-latency-api=ollama-chat", slo=COLD % "")
    r.assert_outcomes(passed=1)
    assert res["cold"]["cold_start"]["cold_starts"] == 0 and res["cold"]["ttft_ms"]["max"] < 200


@pytest.mark.parametrize("budget, outcome", [("200ms", "failed"), ("5s", "passed")])
def test_cold_ttft_budget_measures_the_first_request_after_an_unload(pytester, budget, outcome):
    url = f"{REF}?time_scale=1&tokenize_endpoint=0&load_time=0.4"
    r, res, _ = run(pytester, url, "--llm-latency-api=ollama",
                    slo=COLD % f", slo: {{ttft_p50: 200ms, cold_ttft_max: {budget}}}")
    r.assert_outcomes(**{outcome: 1})
    x = res["cold"]
    assert x["cold_start"]["cold_ttft_ms"] > 400 and x["cold_start"]["cold_load_ms"] >= 400
    assert x["ttft_ms"]["max"] < 200 and x["cold_start"]["cold_starts"] == 0  # the samples stay warm
    if outcome == "failed":
        r.stdout.fnmatch_lines(["*cold-start TTFT * ms > budget cold_ttft_max 200 ms (the first request after an "
                                "unload; model load * ms reported as load_duration)*"])


def test_cold_ttft_budget_needs_an_ollama_api(pytester):
    r, res, _ = run(pytester, f"{REF}?time_scale=0", slo=COLD % ", slo: {cold_ttft_max: 5s}")
    r.assert_outcomes(errors=1)
    assert any("cold_ttft_max needs a server whose model can be unloaded" in e for e in res["cold"]["errors"])


# ---------------------------------------------------------------- repeated runs, prompt cache
REPEAT = """
workloads:
  rag: {class: custom, prompt_tokens: 2048, output_tokens: 2, samples: 5, warmup: 1, max_error_rate: 0.5}
"""


@pytest.fixture(scope="module")
def caching_ollama():
    """One long-lived Ollama-like server that remembers its last 256 prompts, as a CI job's
    staging Ollama does between runs."""
    with start_reference(f"{REF}?time_scale=1&tokenize_endpoint=0&prompt_cache=256", mode="subprocess") as h:
        yield h.url


def test_a_second_run_against_the_same_caching_ollama_measures_cold_prompts(pytester, caching_ollama):
    r1, res1, doc1 = run(pytester, caching_ollama, "--llm-latency-api=ollama", slo=REPEAT, name="r1.json")
    r2, res2, doc2 = run(pytester, caching_ollama, "--llm-latency-api=ollama", name="r2.json")
    assert doc1["nonce"] != doc2["nonce"]
    for r, res in ((r1, res1), (r2, res2)):
        r.assert_outcomes(passed=1)
        assert res["rag"]["measurement"]["prompt_exact_requests"] == res["rag"]["n"]  # every count reported, exact
        assert not any("cache" in n for n in res["rag"]["notes"]), res["rag"]["notes"]
    # the same prefill both times (~70 ms modelled; a cached prompt computes one token, ~7 ms)
    assert res2["rag"]["ttft_ms"]["p50"] > 0.7 * res1["rag"]["ttft_ms"]["p50"]


def test_a_replayed_run_names_ollamas_prompt_cache_never_no_usage(pytester, caching_ollama):
    nonce = secrets.token_hex(8)
    r1, res1, _ = run(pytester, caching_ollama, "--llm-latency-api=ollama", f"--llm-latency-nonce={nonce}",
                      slo=REPEAT, name="r1.json")
    r1.assert_outcomes(passed=1)
    r2, res2, _ = run(pytester, caching_ollama, "--llm-latency-api=ollama", f"--llm-latency-nonce={nonce}",
                      name="r2.json")
    r2.assert_outcomes(errors=1)
    assert res2["rag"]["verdict"] == "error"
    text = " ".join(res2["rag"]["errors"])
    assert "Ollama's prompt cache" in text and "--llm-latency-nonce" in text
    assert "no prompt token usage" not in r2.stdout.str()


# ---------------------------------------------------------------- model check
@pytest.mark.parametrize("model, ok", [("llama-3.1-8b", True), ("llama-3.1-8b:latest", True),
                                       ("llama-3.1-8", False)])
def test_model_is_checked_against_api_tags(pytester, model, ok):
    r, res, _ = run(pytester, f"{REF}?time_scale=0", "--llm-latency-api=ollama", f"--llm-latency-model={model}",
                    slo=COLD % "")
    if ok:
        r.assert_outcomes(passed=1)
        return
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines([f"*model '{model}' is not available at * (/api/tags lists llama-3.1-8b:latest); "
                            f"did you mean 'llama-3.1-8b:latest'? -- `ollama pull {model}`*"])
