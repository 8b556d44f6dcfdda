"""Token counting as the *server* counts (its tokenize endpoint, or a calibration from probe
requests' usage; docs/concepts.md#exact-salted-prompts), and prompt preparation with a bounded
number of counter calls.  Cost per workload, in requests to the server:

* endpoint detection: 2 ``/tokenize`` calls per shape tried (at most 3 shapes);
* calibration: 1 probe completion + 1 tokenize call (or 2 probes without an endpoint);
* ``build_prompts``: the fit, O(log prompt_tokens) calls, plus one verify call per prompt
  (``core.prompts.synthesis``) -- not a binary search per prompt;
* without an endpoint, whose linear chars-per-token estimate is off by the server's tokenizer (16%
  on a word-counting server), ``correct_plan``: 1-6 more unmeasured one-token requests in the usual
  case (at most ``PLAN_STEPS``), before the warm-up, each with a fresh salt (never a sample's
  prompt, so no sample is served from a cache the correction filled).
"""
from __future__ import annotations

import secrets
from typing import Callable

import httpx

from ...core.errors import MeasurementError
from ...core.spec.lengths import draw_lengths
from ...core.prompts.synthesis import Prompt, build_prompts, linear_counter, resized
from ...core.spec.workload import Workload
from ..transport.http import bounded_request, map_transport_error
from ..apis.ollama import OllamaClient


def new_nonce() -> str:
    """A fresh per-run nonce (64 random bits, hex): the salts of one run, never of another."""
    return secrets.token_hex(8)


def tokenize_endpoint(client, *, add_special: bool = True) -> Callable[[str], int] | None:
    """The server's tokenizer, if it has one: the API's own counter (``/v1/messages/count_tokens``,
    ``/v1/responses/input_tokens``: its adapter's ``COUNT_ENDPOINT``), vLLM ``/tokenize`` ({model,
    prompt} → count), llama.cpp ``/tokenize`` ({content} → tokens), SGLang ``/v1/tokenize``.  ``add_special``
    False counts text without BOS/special tokens (output text, not a prompt)."""
    if isinstance(client, OllamaClient):
        return None
    base, http, model = client.base_url, client.http, client.resolve_model()
    # the API's own counter (the rendered prompt, specials included: what its usage will say) first
    own = getattr(client, "COUNT_ENDPOINT", None) if add_special else None
    shapes = ([(own[0], lambda t: own[1](t, model))] if own else []) + [
        ("/tokenize", lambda t: {"model": model, "prompt": t, "add_special_tokens": add_special}),
        ("/tokenize", lambda t: {"content": t, "add_special": add_special}),
        ("/v1/tokenize", lambda t: {"model": model, "prompt": t,
                                    **({} if add_special else {"add_special_tokens": False})})]
    short, long = "hello world", "hello world " + "counting tokens " * 20
    for path, body in shapes:
        def count(text: str, _p=path, _b=body) -> int:
            resp = bounded_request(http, "POST", base + _p, json=_b(text), total_s=client.timeouts.idle_s)
            if resp.status_code != 200:  # the kind a streamed request's status would have (http_503...)
                raise MeasurementError(f"http_{resp.status_code}", client.redact(
                    f"HTTP {resp.status_code} from {base + _p} while counting prompt tokens"))
            d = resp.json()
            return int(d["count"]) if "count" in d else int(d["input_tokens"]) if "input_tokens" in d else \
                len(d["tokens"])
        try:
            a, b = count(short), count(long)
        except (MeasurementError, httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            continue  # not this shape (404, another body): try the next
        if 0 < a < b:  # a server that ignores the field we sent answers 0 tokens or a constant
            counter = _server_faults_by_kind(count, client, base + path)
            counter.source = f"{path} endpoint"  # type: ignore[attr-defined]
            return counter
    return None


def _server_faults_by_kind(count: Callable[[str], int], client, url: str) -> Callable[[str], int]:
    """Once the endpoint is known, its failures carry the same kinds as a streamed request's
    (``http_503``, ``idle_timeout``, ``reset``...), so a server that fails while prompts are
    prepared is judged as it would be on the first sample (``core.result.result.is_server_fault``)."""
    def counted(text: str) -> int:
        try:
            return count(text)
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, url, client.timeouts, client.redact) from None
    return counted


PLAN_STEPS = 8  # most correction requests per workload


def _probe(client, system: str, user: str) -> int:
    rec = client.stream(system, user, 1)
    if rec.prompt_tokens is None:
        if rec.server_timings.get("prompt_cached"):
            raise MeasurementError("prompt_cache", client.redact(
                f"{client.base_url} served a probe prompt from Ollama's prompt cache (its final object omits "
                f"prompt_eval_count when the whole prompt was cached), so its length could not be measured: the "
                f"prompt was sent before -- was the nonce pinned (--llm-latency-nonce) to replay a run against "
                f"the same server? Run with a fresh nonce"))
        raise MeasurementError("no_usage", f"{client.base_url} reports no prompt token usage in its stream, so "
                               f"prompt length can neither be calibrated nor verified")
    return rec.prompt_tokens


def make_counter(client, workload: Workload, seed: int, nonce: str = "") -> tuple[Callable[[str], int], str]:
    """A counter for prompt text as the *server* will count it (template and BOS included).
    The probes lead with the nonce too, so no run's calibration is served from another run's
    cache (Ollama's prompt cache, a prefix cache), and the two probes share no prefix.
    Without a tokenize endpoint the counter is an estimate with a ``per_char`` attribute
    (``prepare_prompts`` then corrects the plan on the server's count)."""
    tok = tokenize_endpoint(client)
    probe_sys = "[probe] You are helpful.\n" if workload.system_prompt_tokens or workload.shared_prefix_tokens else ""
    probe_user = f"[{nonce} probe {seed}] Count these words please: alpha beta gamma delta."
    if tok is not None:
        offset = _probe(client, probe_sys, probe_user) - tok(probe_sys + probe_user)
        return (lambda text: tok(text) + offset), f"{tok.source} {offset:+d} (calibrated)"  # type: ignore
    long = f"[long {nonce} probe {seed}] Count these words please: alpha beta gamma delta." + " words" * 400
    a, b = _probe(client, probe_sys, probe_user), _probe(client, probe_sys, long)
    per_char = (b - a) / (len(long) - len(probe_user))
    fixed = a - per_char * len(probe_sys + probe_user)
    counter = linear_counter(fixed, per_char)
    counter.per_char = per_char  # type: ignore[attr-defined]
    return counter, "linear estimate from probe usage"


def correct_plan(client, prompts: list[Prompt], probes: list[Prompt], per_char: float, *,
                 seed: int) -> tuple[list[Prompt], str]:
    """Make ``prompts`` exact on the server's own count, when only an estimate planned them.

    ``probes`` are prompts planned like ``prompts`` (same body, same-length salts) but with
    salts of their own; each step sends the next one resized by ``d`` characters with a
    one-token output and reads the server's prompt count ``s(d)``.  ``d`` starts at 0, takes a
    Newton step with the calibrated tokens per character, then secant steps, and bisects
    when a step leaves the bracket ``s(lo) < N < s(hi)``.  Stops when ``s(d) == N``, when
    the bracket closes (the tokenizer skips N: the nearest is kept, and the samples' check
    reports the deviation) or after ``len(probes)`` requests.  Returns the prompts resized
    by the best ``d`` and a description for the result's ``measurement.prompt_counter``."""
    target = prompts[0].expected_tokens
    min_d = -(len(prompts[0].user) - prompts[0].body_start - 1)
    slope = per_char if per_char > 0 else 0.25
    seen: dict[int, int] = {}
    lo = hi = None
    d, prev = 0, None
    for probe in probes:
        p = resized(probe, d, seed) if d else probe
        got = _probe(client, p.system, p.user)
        seen[d] = got
        if got == target:
            break
        if got < target:
            lo = d if lo is None or d > lo else lo
        else:
            hi = d if hi is None or d < hi else hi
        if lo is not None and hi is not None and hi - lo <= 1:
            break  # no length between: the tokenizer skips the target
        if prev is not None and seen[prev] != got:
            step = (target - got) * (d - prev) / (got - seen[prev])  # secant
        else:
            step = (target - got) / slope  # Newton, with the calibrated slope
        nxt = d + (int(round(step)) or (1 if got < target else -1))
        if (lo is not None and nxt <= lo) or (hi is not None and nxt >= hi) or nxt in seen:
            if lo is None or hi is None:  # no bracket yet: keep stepping in the right direction
                nxt = max(seen) + max(1, int(1 / slope)) if got < target else min(seen) - max(1, int(1 / slope))
            else:
                nxt = (lo + hi) // 2
        prev, d = d, max(nxt, min_d)
        if d in seen:
            break
    best = min(seen, key=lambda k: (abs(seen[k] - target), abs(k)))
    out = [resized(p, best, seed) if best else p for p in prompts]
    exact = "exact" if seen[best] == target else f"nearest {seen[best]}"
    return out, (f"corrected on the server's count: body {best:+d} chars ({exact} for {target}, "
                 f"{len(seen)} unmeasured request(s))")


def prepare_prompts(client, workload: Workload, *, seed: int, nonce: str,
                    counter: Callable[[str], int] | None = None) -> tuple[list[Prompt], str | None]:
    """Warm-up + sample prompts for ``workload``, and how they were counted (information for the
    result's ``measurement``, not a note: notes are warnings).  A length distribution draws each
    prompt's lengths (docs/concepts.md#length-distributions-and-shared-prefix-groups)."""
    how = None
    if counter is None:
        counter, how = make_counter(client, workload, seed, nonce)
    n = workload.warmup + workload.samples + (1 if workload.cold_budget else 0)  # + the cold-start request
    groups = workload.shared_prefix_groups
    kw: dict = dict(prompt_tokens=workload.prompt_tokens, seed=seed, system_prompt_tokens=workload.system_prompt_tokens,
                    shared_prefix_tokens=workload.shared_prefix_tokens,
                    prefix_groups=(groups.groups, groups.tokens) if groups else None)
    lengths, outputs = None, None
    if workload.mix is not None:  # every class its own lengths and system part (client.prepare.mixed_prompts)
        from .mixed_prompts import mixed_prompts

        prompts = mixed_prompts(counter, workload.mix, n=n, warmup=workload.warmup, cold=1 if workload.cold_budget
                                else 0, seed=seed, nonce=nonce, context=context_length(client))
        if getattr(counter, "per_char", None) is not None:
            how = (f"{how}; not corrected on the server's count: the mix's classes have different lengths and the "
                   f"server has no tokenize endpoint, so each request's check reports its deviation")
        return prompts, how
    if workload.prompt_dist is not None or workload.output_dist is not None:
        context = context_length(client)
        floor = 1 + max(workload.system_prompt_tokens, workload.shared_prefix_tokens, groups.tokens if groups else 0)
        outputs = draw_lengths(workload.output_dist or workload.output_tokens, n, seed=seed, key="output_tokens",
                               clip_to=context - floor if context else None)
        lengths = draw_lengths(workload.prompt_dist or workload.prompt_tokens, n, seed=seed, key="prompt_tokens",
                               floor=floor)
        if context:  # prompt + its own output within the context
            lengths = [max(floor, min(p, context - o)) for p, o in zip(lengths, outputs)]
    prompts = build_prompts(counter, n=n, nonce=nonce, lengths=lengths, output_lengths=outputs, **kw)
    per_char = getattr(counter, "per_char", None)
    if per_char is not None and len({p.expected_tokens for p in prompts}) > 1:
        how = (f"{how}; not corrected on the server's count: the prompt lengths vary and the server has no tokenize "
               f"endpoint, so each request's check reports its deviation")
    elif per_char is not None:  # an estimate: correct the plan on the server's own count
        probes = build_prompts(counter, n=PLAN_STEPS, nonce=f"{nonce}|plan", **kw)
        prompts, corrected = correct_plan(client, prompts, probes, per_char, seed=seed)
        how = f"{how}; {corrected}"
    return prompts, how


def context_length(client) -> int | None:
    """The model's context in tokens where the server lists it (vLLM's and the reference
    target's ``/v1/models`` entries carry ``max_model_len``); None elsewhere (llama.cpp, Ollama):
    lengths are then not clipped and an over-long request is the server's rejection."""
    models = getattr(client, "models", None)
    if models is None:
        return None
    try:
        entries = models()
        model = client.resolve_model()
    except (MeasurementError, httpx.HTTPError, ValueError, AttributeError):
        return None
    for e in entries:
        if str(e.get("id")) == model and isinstance(e.get("max_model_len"), int) and e["max_model_len"] > 1:
            return int(e["max_model_len"])
    return None


def model_note(client) -> str | None:
    """The adapter's check that the configured model is one the server lists (a warning
    note), raising where the server lists exactly one other model."""
    check = getattr(client, "check_model", None)
    return check() if check is not None else None
