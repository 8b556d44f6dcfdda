"""What the server says it serves: the weights' dtype or quantization, for the decode diagnosis
(docs/roofline.md: llama.cpp ``/props`` or ``/v1/models`` ``meta``, Ollama ``/api/show``; vLLM, SGLang
and TGI say nothing of it over HTTP).  llama.cpp's file type name (``llama_ftype_name``: ``all F32``,
``Q4_K - Medium``, ``IQ2_XS - 2.3125 bpw``, ``MXFP4 MoE``, ``(guessed) ...``) is read back to the dtype
names the roofline knows (``llamacpp_ftype``).  Evidence, not a measurement: every request is bounded,
and any failure gives None.
"""
from __future__ import annotations

import re
from typing import Any, NamedTuple

import httpx

from ..transport.http import bounded_request

ASK_S = 5.0  # the whole answer of one discovery request


class ServedDtype(NamedTuple):
    dtype: str
    source: str   # where the server said it, e.g. "llama.cpp /props"


_SIZES = {"small": "S", "medium": "M", "large": "L"}


def llamacpp_ftype(name: str) -> str:
    """``llama_ftype_name``'s text as a dtype name: ``all F32`` -> ``F32``, ``Q4_K - Medium`` ->
    ``Q4_K_M``, ``MXFP4 MoE`` -> ``MXFP4``, ``(guessed) Q8_0`` -> ``Q8_0``; ``... - 2.3125 bpw`` kept."""
    text = name.strip().removeprefix("(guessed)").strip()
    text = re.sub(r"^all\s+", "", text)
    sized = re.fullmatch(r"(\S+) - (Small|Medium|Large)", text, flags=re.IGNORECASE)
    if sized:
        return f"{sized.group(1)}_{_SIZES[sized.group(2).lower()]}"
    if text.upper().endswith(" MOE"):
        return text[:-4].strip()
    return text


def _json(http: httpx.Client, method: str, url: str, **kw) -> Any:
    try:
        r = bounded_request(http, method, url, total_s=ASK_S, max_bytes=4 * 1024 * 1024, **kw)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _text(v: Any) -> str | None:
    return v.strip() if isinstance(v, str) and v.strip() else None


def served_dtype(http: httpx.Client, base_url: str, model: str | None, *, ollama: bool = False) -> ServedDtype | None:
    """The dtype the server states for ``model``, with its source; None when it states none."""
    base = base_url.rstrip("/")
    if ollama:
        shown = _json(http, "POST", f"{base}/api/show", json={"model": model or ""})
        details = shown.get("details") if isinstance(shown, dict) else None
        level = _text(details.get("quantization_level")) if isinstance(details, dict) else None
        return ServedDtype(level, "Ollama /api/show") if level else None
    props = _json(http, "GET", f"{base}/props")
    if isinstance(props, dict) and _text(props.get("model_ftype")):
        return ServedDtype(llamacpp_ftype(props["model_ftype"]), "llama.cpp /props")
    listed = _json(http, "GET", f"{base}/v1/models")
    data = listed.get("data") if isinstance(listed, dict) else None
    entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    for m in entries:
        meta = m.get("meta")
        if isinstance(meta, dict) and _text(meta.get("ftype")) and (not model or m.get("id") == model
                                                                    or len(entries) == 1):
            return ServedDtype(llamacpp_ftype(meta["ftype"]), "llama.cpp /v1/models meta")
    return None
