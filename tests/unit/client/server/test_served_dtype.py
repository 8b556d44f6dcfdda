"""What the server says it serves (``client.server.served_dtype``), on llama.cpp's recorded ``/props`` and
``/v1/models`` answers (copies of ``shared/recordings``) and Ollama's ``/api/show`` shape, and the
decode diagnosis naming a mismatch with the SLO outright."""
from __future__ import annotations

import json

import httpx
import pytest

from pytest_llm_latency.client.server.served_dtype import ServedDtype, llamacpp_ftype, served_dtype
from tests.helpers.paths import RECORDINGS

PROPS = json.loads((RECORDINGS / "props-llamacpp.json").read_text())
MODELS = json.loads((RECORDINGS / "models-llamacpp.json").read_text())


def http_for(routes: dict[tuple[str, str], object], seen: list | None = None) -> httpx.Client:
    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append((request.method, request.url.path, request.content))
        answer = routes.get((request.method, request.url.path))
        if answer is None:
            return httpx.Response(404, json={"error": "not found"})
        if isinstance(answer, httpx.Response):
            return answer
        return httpx.Response(200, json=answer)
    return httpx.Client(transport=httpx.MockTransport(handle))


def test_llamacpp_props_states_the_files_type():
    http = http_for({("GET", "/props"): PROPS, ("GET", "/v1/models"): MODELS})
    assert served_dtype(http, "http://x", None) == ServedDtype("Q4_1", "llama.cpp /props")


def test_without_props_the_models_meta_speaks():
    http = http_for({("GET", "/v1/models"): MODELS})
    assert served_dtype(http, "http://x/", "SmolLM2-135M-Instruct.Q4_1.gguf") == \
        ServedDtype("Q4_1", "llama.cpp /v1/models meta")


def test_ollama_show_states_the_quantization_level():
    seen: list = []
    http = http_for({("POST", "/api/show"): {"details": {"format": "gguf", "quantization_level": "Q4_K_M"}}}, seen)
    assert served_dtype(http, "http://x", "qwen3:8b", ollama=True) == ServedDtype("Q4_K_M", "Ollama /api/show")
    assert json.loads(seen[0][2]) == {"model": "qwen3:8b"}


def test_a_server_that_states_nothing_or_answers_badly_gives_none():
    vllm_models = {"data": [{"id": "m", "object": "model", "max_model_len": 4096}]}
    assert served_dtype(http_for({("GET", "/v1/models"): vllm_models}), "http://x", "m") is None
    broken = http_for({("GET", "/props"): httpx.Response(200, text="<html>proxy</html>"),
                       ("GET", "/v1/models"): httpx.Response(502, text="bad gateway")})
    assert served_dtype(broken, "http://x", None) is None
    assert served_dtype(http_for({}), "http://x", "m", ollama=True) is None

    def refuse(request):
        raise httpx.ConnectError("refused", request=request)
    assert served_dtype(httpx.Client(transport=httpx.MockTransport(refuse)), "http://x", "m") is None


@pytest.mark.parametrize("said, dtype", [  # llama_ftype_name's texts (llama.cpp src/llama-model-loader.cpp)
    ("all F32", "F32"), ("F16", "F16"), ("BF16", "BF16"), ("Q4_1", "Q4_1"), ("Q4_K - Medium", "Q4_K_M"),
    ("Q3_K - Large", "Q3_K_L"), ("Q2_K - Small", "Q2_K_S"), ("MXFP4 MoE", "MXFP4"), ("(guessed) Q8_0", "Q8_0"),
    ("IQ2_XS - 2.3125 bpw", "IQ2_XS - 2.3125 bpw"), ("IQ3_S mix - 3.66 bpw", "IQ3_S mix - 3.66 bpw")])
def test_llamacpp_file_type_names_read_back_to_dtype_names(said, dtype):
    from pytest_llm_latency.core.roofline.decode_diagnosis import _dtype_bytes

    assert llamacpp_ftype(said) == dtype
    assert _dtype_bytes(dtype) is not None, "the diagnosis can weigh it"
    http = http_for({("GET", "/props"): {**PROPS, "model_ftype": said}})
    assert served_dtype(http, "http://x", None) == ServedDtype(dtype, "llama.cpp /props")
