"""Token counting as the *server* counts (its tokenize endpoint, or a calibration from
probe requests' usage), and prompt preparation with a bounded number of counter calls.

Cost per workload, in requests to the server:

* endpoint detection: 2 ``/tokenize`` calls per shape tried (at most 3 shapes);
* calibration: 1 probe completion + 1 tokenize call (or 2 probes without an endpoint);
* ``build_prompts``: the fit, O(log prompt_tokens) calls, plus one verify call per prompt
  (see ``core.prompts``) -- not a binary search per prompt.
"""
from __future__ import annotations

import secrets
from typing import Callable

import httpx

from ..core.errors import MeasurementError
from ..core.prompts import Prompt, build_prompts, linear_counter
from ..core.workload import Workload
from .http import bounded_request, map_transport_error
from .ollama import OllamaClient


def new_nonce() -> str:
    """A fresh per-run nonce (64 random bits, hex): the salts of one run, never of another."""
    return secrets.token_hex(8)


def tokenize_endpoint(client) -> Callable[[str], int] | None:
    """The server's tokenizer, if it has one: vLLM ``/tokenize`` ({model, prompt} → count),
    llama.cpp ``/tokenize`` ({content} → tokens), SGLang ``/v1/tokenize``."""
    if isinstance(client, OllamaClient):
        return None
    base, http, model = client.base_url, client.http, client.resolve_model()
    shapes = [("/tokenize", lambda t: {"model": model, "prompt": t, "add_special_tokens": True}),
              ("/tokenize", lambda t: {"content": t, "add_special": True}),
              ("/v1/tokenize", lambda t: {"model": model, "prompt": t})]
    short, long = "hello world", "hello world " + "counting tokens " * 20
    for path, body in shapes:
        def count(text: str, _p=path, _b=body) -> int:
            resp = bounded_request(http, "POST", base + _p, json=_b(text), total_s=client.timeouts.idle_s)
            if resp.status_code != 200:
                raise _StatusError(resp.status_code)
            d = resp.json()
            return int(d["count"]) if "count" in d else len(d["tokens"])
        try:
            a, b = count(short), count(long)
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            continue  # not this shape (404, another body): try the next
        if 0 < a < b:  # a server that ignores the field we sent answers 0 tokens or a constant
            counter = _server_faults_by_kind(count, client, base + path)
            counter.source = f"{path} endpoint"  # type: ignore[attr-defined]
            return counter
    return None


class _StatusError(ValueError):
    def __init__(self, code: int):
        super().__init__(f"HTTP {code}")
        self.code = code


def _server_faults_by_kind(count: Callable[[str], int], client, url: str) -> Callable[[str], int]:
    """Once the endpoint is known, its failures carry the same kinds as a streamed request's
    (``http_503``, ``idle_timeout``, ``reset``...), so a server that fails while prompts are
    prepared is judged as it would be on the first sample (``core.result.is_server_fault``)."""
    def counted(text: str) -> int:
        try:
            return count(text)
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, url, client.timeouts, client.redact) from None
        except _StatusError as exc:
            raise MeasurementError(f"http_{exc.code}", client.redact(
                f"HTTP {exc.code} from {url} while counting prompt tokens")) from None
    return counted


def _probe(client, system: str, user: str) -> int:
    rec = client.stream(system, user, 1)
    if rec.prompt_tokens is None:
        raise MeasurementError("no_usage", f"{client.base_url} reports no prompt token usage in its stream, so "
                               f"prompt length can neither be calibrated nor verified")
    return rec.prompt_tokens


def make_counter(client, workload: Workload, seed: int, nonce: str = "") -> tuple[Callable[[str], int], str]:
    """A counter for prompt text as the *server* will count it (template and BOS included).
    The probes carry the nonce too, so no run's calibration is served from another's cache."""
    tok = tokenize_endpoint(client)
    probe_sys = "[probe] You are helpful.\n" if workload.system_prompt_tokens or workload.shared_prefix_tokens else ""
    probe_user = f"[probe {seed} {nonce}] Count these words please: alpha beta gamma delta."
    if tok is not None:
        offset = _probe(client, probe_sys, probe_user) - tok(probe_sys + probe_user)
        return (lambda text: tok(text) + offset), f"{tok.source} {offset:+d} (calibrated)"  # type: ignore
    short = probe_user
    long = probe_user + " words" * 400
    a, b = _probe(client, probe_sys, short), _probe(client, probe_sys, long)
    per_char = (b - a) / (len(long) - len(short))
    fixed = a - per_char * len(probe_sys + short)
    return linear_counter(fixed, per_char), "linear estimate from probe usage"


def prepare_prompts(client, workload: Workload, *, seed: int, nonce: str,
                    counter: Callable[[str], int] | None = None) -> tuple[list[Prompt], str | None]:
    """Warm-up + sample prompts for ``workload``, and how they were counted (information for the
    result's ``extra``, not a note: notes are warnings)."""
    how = None
    if counter is None:
        counter, how = make_counter(client, workload, seed, nonce)
    prompts = build_prompts(counter, n=workload.warmup + workload.samples, prompt_tokens=workload.prompt_tokens,
                            seed=seed, nonce=nonce, system_prompt_tokens=workload.system_prompt_tokens,
                            shared_prefix_tokens=workload.shared_prefix_tokens)
    return prompts, how


def model_note(client) -> str | None:
    """The adapter's check that the configured model is one the server lists (a warning
    note), raising where the server lists exactly one other model."""
    check = getattr(client, "check_model", None)
    return check() if check is not None else None
