"""The ``openai-responses`` and ``anthropic-messages`` APIs through pytest (pytester) against the
reference target, chosen in each place ``api`` can be set: the SLO file's target, the marker, the
``measure()`` fixture, ``--llm-latency-api``, ``LLM_LATENCY_API`` and the ini; the JSON results
name the API that measured; worker processes speak it too."""
import json

import pytest

REF = "reference://h100-sxm/llama-3.1-8b?time_scale=0&ignore_eos=1"
APIS = ["openai-responses", "anthropic-messages"]
W = "{class: custom, prompt_tokens: 256, output_tokens: 16, samples: 6, warmup: 1, confidence: null, " \
    "slo: {ttft_max: 10s, tpot_max: 1s}}"


def results(pytester, name="r.json") -> dict:
    doc = json.loads((pytester.path / name).read_text())
    return {res["workload"]: res for res in doc["results"]}


def exact(res: dict) -> bool:
    m = res["measurement"]
    return m["prompt_exact_requests"] == res["n"] == 6 and m["prompt_deviation_requests"] == 0


@pytest.mark.parametrize("api", APIS)
def test_slo_file_target_api(pytester, api):
    pytester.makefile(".slo.yaml", x=f"target: {{url: '{REF}', api: {api}}}\nworkloads:\n  w: {W}\n")
    r = pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-json=r.json")
    r.assert_outcomes(passed=1)
    res = results(pytester)["w"]
    assert res["measurement"]["api"] == api and exact(res)
    assert res["measurement"]["prompt_counter"].startswith(
        "/v1/responses/input_tokens" if api == "openai-responses" else "/v1/messages/count_tokens")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("where", ["cli", "env", "ini"])
def test_cli_env_and_ini(pytester, monkeypatch, api, where):
    pytester.makefile(".slo.yaml", x=f"workloads:\n  w: {W}\n")
    args = ["-p", "no:cacheprovider", f"--llm-latency-url={REF}", "--llm-latency-json=r.json"]
    if where == "cli":
        args.append(f"--llm-latency-api={api}")
    elif where == "env":
        monkeypatch.setenv("LLM_LATENCY_API", api)
    else:
        pytester.makeini(f"[pytest]\nllm_latency_api = {api}\n")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert results(pytester)["w"]["measurement"]["api"] == api


@pytest.mark.parametrize("api", APIS)
def test_marker_and_fixture(pytester, api):
    pytester.makepyfile(f"""
import pytest

@pytest.mark.llm_slo(workload="chat", prompt_tokens=256, output_tokens=16, samples=6, warmup=1,
                     confidence=None, ttft_p95=None, tpot_p95=None, e2e_p95=None, ttft_max="10s", api="{api}")
def test_marked():
    pass

def test_fixture(llm_latency):
    r = llm_latency.measure(workload="chat", prompt_tokens=256, output_tokens=16, samples=6, warmup=1,
                            confidence=None, ttft_p95=None, tpot_p95=None, e2e_p95=None, api="{api}")
    assert r.n == 6 and r.result.records[0].prompt_tokens == 256
    r.check(ttft_max="10s")
""")
    r = pytester.runpytest("-p", "no:cacheprovider", f"--llm-latency-url={REF}", "--llm-latency-json=r.json")
    r.assert_outcomes(passed=2)
    assert {res["measurement"]["api"] for res in json.loads((pytester.path / "r.json").read_text())["results"]} == {api}


@pytest.mark.parametrize("api", APIS)
def test_worker_processes_speak_the_api(pytester, api):
    pytester.makefile(".slo.yaml", x=f"target: {{url: '{REF}', api: {api}}}\nworkloads:\n  w: "
                                     "{class: custom, prompt_tokens: 256, output_tokens: 16, samples: 8, warmup: 1, "
                                     "confidence: null, concurrency: 4, workers: 2, slo: {ttft_max: 10s}}\n")
    pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-json=r.json").assert_outcomes(passed=1)
    res = results(pytester)["w"]
    assert res["n"] == 8 and res["measurement"]["api"] == api and res["measurement"]["prompt_exact_requests"] == 8


@pytest.mark.parametrize("api", APIS)
def test_exact_without_any_counter(pytester, api):
    """``tokenize_endpoint=0``: no /tokenize and no input_tokens / count_tokens either: the probe estimate,
    corrected on the server's own usage, still makes every prompt exact."""
    pytester.makefile(".slo.yaml", x=f"target: {{url: '{REF}&tokenize_endpoint=0&tokenizer=chars3', api: {api}}}\n"
                                     f"workloads:\n  w: {W}\n")
    pytester.runpytest("-p", "no:cacheprovider", "--llm-latency-json=r.json").assert_outcomes(passed=1)
    res = results(pytester)["w"]
    assert exact(res) and res["measurement"]["prompt_counter"].startswith("linear estimate from probe usage")
