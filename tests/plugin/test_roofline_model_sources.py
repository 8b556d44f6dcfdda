"""The decode gate's model sources end to end: a refusal before any request, the per-layer split rendered."""
import json
import xml.etree.ElementTree as ET

import pytest

from pytest_llm_latency.targets.reference.launch import start_reference

SLO = """
target: {{url: "{url}"}}
roofline: {{{roof}}}
workloads:
  decode: {{class: custom, prompt_tokens: 64, output_tokens: 32, samples: 3, warmup: 1}}
"""


@pytest.fixture(scope="module")
def server():
    with start_reference("reference://h100-sxm/llama-3.1-8b?time_scale=0.2", mode="subprocess") as handle:
        yield handle.url


def served_requests(url) -> float:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) if f.name == "vllm:request_success"
               for s in f.samples if s.name.endswith("_total"))


def run(pytester, url, roof):
    pytester.makefile(".slo.yaml", gate=SLO.format(url=url, roof=roof))
    return pytester.runpytest("-p", "no:cacheprovider", "--junitxml=j.xml", "--llm-latency-json=r.json")


def test_an_unmodelled_model_type_is_refused_naming_file_key_and_ways_out_before_any_request(pytester, server):
    (pytester.path / "falcon").mkdir()
    (pytester.path / "falcon" / "config.json").write_text(json.dumps(
        {"model_type": "falcon", "hidden_size": 4544, "num_hidden_layers": 32, "vocab_size": 65024}))
    before = served_requests(server)
    r = run(pytester, server, "config: falcon, min_decode_efficiency: 0.3")
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert f"{pytester.path / 'falcon' / 'config.json'}: model_type 'falcon' is not modelled" in out
    assert "it is not counted as Llama" in out and "*.safetensors" in out and "GGUF file" in out
    assert "kv_bytes_per_token" in out
    assert served_requests(server) == before  # refused first: nothing was sent


def test_a_catalog_config_model_renders_its_per_layer_split(pytester, server):
    # report only, on a made-up bandwidth: the server is an 8B model at ~730 tok/s, far above a 27B's
    # ceiling on an H100; what this test checks is the arithmetic rendered
    r = run(pytester, server, "model: gemma-3-27b, mem_bandwidth_gb_s: 200000")
    r.assert_outcomes(passed=1)
    res = json.loads((pytester.path / "r.json").read_text())["results"][0]["roofline"]
    assert "10 full layers" in res["arithmetic"] and "52 windowed layers" in res["arithmetic"]
    assert "(window 1 024)" in res["arithmetic"]
    root = ET.parse(pytester.path / "j.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert "52 windowed layers" in props["llm.roofline.arithmetic"]
    assert "(window 1 024)" in res["message"] and props["llm.roofline.kv_cache"] == "counted"
