"""Speculative decoding on a real llama-server with a draft model (issue 26, the real tier).

The models come from the generator (``make_models``, its docstring): ``spec-target`` has 8
layers of which only the first 2 write, ``spec-draft`` is those 2 layers with the same
embeddings and output matrix, so it predicts the target's greedy tokens exactly;
``spec-draft-unrelated`` has the draft's shape and another seed.  Both servers run the same
target with ``--spec-draft-n-max 4`` (``conftest.llama_spec_command``), so only the acceptance
differs.  The figures are read the one way the project defines them
(``core.measure.spec_decode.acceptance``) from llama.cpp's per-response ``timings.draft_n*``, and
llama.cpp's own ``llamacpp:spec_decode_*`` counter deltas must say the same.

What this build does, found here: a plain Llama draft needs ``--spec-type draft-simple`` (or it
is loaded and never used); each step drafts ``min(draft max, tokens left − 1)``, so a request of
N tokens whose drafts are all accepted takes ``ceil((N − 1) / (1 + draft max))`` decode steps.
N = 31 makes that exactly ``1 + draft max`` tokens per step (N = 32 would leave a last 1-token
step: 31 / 7 = 4.43).  4 requests × 31 tokens: about a second per server on 2 cores.

Measured here (2 busy cores, -t 1): the matched pair 5.0 tokens per step at ~34 ms a step
(~6.8 ms a token), the unrelated one 1.0 at ~29 ms (4 rejected drafts and a 5-token
verification each step); the target alone decodes at ~8.4 ms a token.  On one thread the
5-token verification is compute-bound, so a step costs ~4 single-token steps: the per-step
efficiency (target + 4 × draft bytes ÷ step time ÷ ~31 GB/s) is ~0.26.

``test_ab_of_the_two_pairs_flags_tpot`` runs the plugin on an A/B SLO built from
``llama_spec_command`` (``spec_ab_slo``): the unrelated pair as the candidate against the
matched pair as the baseline target (12 samples, 4 blocks a side: ~30 s).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from tests.realserver import make_models

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.core.measure import spec_decode
from pytest_llm_latency.core.spec.workload import make_workload

pytestmark = pytest.mark.integration

OUTPUT_TOKENS = 31
PROMPT_TOKENS = 64  # at 32 the salted prompt cannot be cut to size (53 tokens: a deviation note)
SAMPLES = 4


def full_acceptance_tokens_per_step(output_tokens: int, draft_max: int) -> float:
    """Tokens per decode step of a request whose every draft is accepted (module docstring)."""
    decode = output_tokens - 1
    return decode / math.ceil(decode / (1 + draft_max))


def _run(url: str):
    w = make_workload("specdec", {"class": "custom", "prompt_tokens": PROMPT_TOKENS, "output_tokens": OUTPUT_TOKENS,
                                  "samples": SAMPLES, "warmup": 1, "slo": {"ttft_p50": "10s"}})
    with make_http_client() as http:
        res = measure(make_client(Target(url, "openai-completions"), http), w)
    assert res.n == SAMPLES and not res.failures
    assert all(r.prompt_tokens == PROMPT_TOKENS for r in res.records), res.notes
    assert all(r.output_tokens == OUTPUT_TOKENS for r in res.records)
    # both runs' responses drafted, so every one carries the two figures (llama.cpp leaves them
    # out of a response that drafted nothing)
    for r in res.records:
        st = r.server_timings
        assert st[spec_decode.DRAFT_N] > 0 and 0 <= st[spec_decode.DRAFT_N_ACCEPTED] <= st[spec_decode.DRAFT_N], st
    acc = spec_decode.acceptance(res.records)
    assert acc is not None and acc.source == spec_decode.SOURCE_LLAMACPP_TIMINGS and acc.scope == "per request"
    assert acc.notes == () and len(acc.per_request) == SAMPLES
    assert acc.decode_tokens == SAMPLES * (OUTPUT_TOKENS - 1)
    # the pipeline filled the result's part from the same source and the same figures
    assert res.spec_decode.source == spec_decode.SOURCE_LLAMACPP_TIMINGS
    assert res.spec_decode.tokens_per_step == pytest.approx(acc.tokens_per_step)
    assert res.spec_decode.acceptance_rate == pytest.approx(acc.acceptance_rate)
    _counters_agree_with_timings(res, acc)
    print(f"{url}: tokens per step {acc.tokens_per_step:.3f}, acceptance {acc.accepted_tokens}/"
          f"{acc.draft_tokens} = {acc.acceptance_rate:.3f}, step {res.spec_decode.step_ms:.2f} ms, "
          f"per request {[round(x.tokens_per_step or 0, 2) for x in acc.per_request]}")
    return res, acc


def _counters_agree_with_timings(res, acc: spec_decode.Acceptance) -> None:
    """llama.cpp's /metrics deltas over the samples count the same drafts as the summed timings."""
    deltas = res.server.metrics
    names = spec_decode.LLAMACPP_COUNTERS
    assert deltas[names["draft_tokens"]] == acc.draft_tokens == sum(r.server_timings["draft_n"] for r in res.records)
    assert deltas[names["accepted_tokens"]] == acc.accepted_tokens
    assert deltas[names["drafts"]] > 0
    # the engine's own count of target forward passes: one prefill (a 64-token prompt is one
    # batch) plus one per decode step, drafting or not -- the definition's decode steps
    assert deltas["llamacpp:n_decode_total"] - SAMPLES == acc.decode_steps
    # the same definition on the counters (the fourth source) gives the same tokens per step
    after = {n: deltas[n] for n in names.values()}
    from_counters = spec_decode.from_counters({}, after, acc.decode_tokens, names, spec_decode.SOURCE_LLAMACPP_COUNTERS)
    assert from_counters is not None and from_counters.tokens_per_step == pytest.approx(acc.tokens_per_step)
    assert from_counters.acceptance_rate == pytest.approx(acc.acceptance_rate)


def test_matched_draft_is_accepted_every_step(llama_spec_servers):
    k = llama_spec_servers.draft_max
    _, acc = _run(llama_spec_servers.matched)
    assert full_acceptance_tokens_per_step(OUTPUT_TOKENS, k) == 1 + k
    assert acc.tokens_per_step >= 0.9 * (1 + k)
    assert acc.acceptance_rate >= 0.95
    for x in acc.per_request:  # judged per request, like llama.cpp reports it
        assert x.tokens_per_step >= 0.9 * (1 + k), acc.per_request


def test_unrelated_draft_of_the_same_shape_is_rejected(llama_spec_servers):
    _, acc = _run(llama_spec_servers.unrelated)
    assert acc.draft_tokens >= SAMPLES * (OUTPUT_TOKENS - 1)  # it kept drafting ...
    assert acc.tokens_per_step < 1.3 and acc.acceptance_rate < 0.2  # ... and the target rejected it


def test_both_pairs_decode_the_targets_tokens(llama_spec_servers):
    """Greedy speculative decoding never changes the output: both servers emit the target's
    tokens, whatever their drafts (only the acceptance differs)."""
    texts = []
    with make_http_client() as http:
        for url in (llama_spec_servers.matched, llama_spec_servers.unrelated):
            rec = OpenAIClient(http, url, None, continuous_usage=False).stream("", "Same prompt, two drafts", 16)
            assert rec.output_tokens == 16
            texts.append("".join(c.text for c in rec.chunks))
    assert texts[0] == texts[1] and texts[0].strip()


def test_generated_pairs_share_what_their_construction_says(gguf_models):
    """The generator's construction, read back from the files: the matched draft is the target's
    first layers (same embeddings, output matrix and norms), the target's other layers write
    nothing, and the unrelated draft has the matched draft's shape and other weights."""
    import gguf

    (target_name, draft_name), (_, unrelated_name) = make_models.SPEC_PAIRS.values()
    target, draft, unrelated = (
        {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(gguf_models[n])).tensors}
        for n in (target_name, draft_name, unrelated_name))
    spec, dspec = make_models.SPECS[target_name], make_models.SPECS[draft_name]
    assert spec.writing_layers == dspec.n_layer < spec.n_layer
    for name, w in draft.items():
        assert np.array_equal(w, target[name]), name
    for i in range(dspec.n_layer, spec.n_layer):
        assert not target[f"blk.{i}.attn_output.weight"].any() and not target[f"blk.{i}.ffn_down.weight"].any()
        assert target[f"blk.{i}.attn_q.weight"].any()  # the silent layers still compute (and cost bytes)
    assert {n: w.shape for n, w in unrelated.items()} == {n: w.shape for n, w in draft.items()}
    assert make_models.SPECS[unrelated_name].n_params == dspec.n_params
    assert not np.array_equal(unrelated["output.weight"], draft["output.weight"])
    assert not np.array_equal(unrelated["blk.0.attn_q.weight"], draft["blk.0.attn_q.weight"])


def spec_ab_slo(command, binary, models, samples: int = 12, block: int = 3, roofline: dict | None = None) -> str:
    """An A/B SLO file's text: the unrelated-draft server (candidate, ``target.command``) against
    the matched-draft server (``baseline_target.command``), both managed by the plugin, with
    ``command`` the ``llama_spec_command`` builder; ``roofline``: the file's ``roofline:``
    mapping, if any.  JSON lists and objects are YAML flow collections."""
    (target, draft), (_, unrelated) = make_models.SPEC_PAIRS["matched"], make_models.SPEC_PAIRS["unrelated"]
    cand = command(binary, models[target], models[unrelated])
    base = command(binary, models[target], models[draft])
    head = f"roofline: {json.dumps(roofline)}\n" if roofline is not None else ""
    return head + (f"target:\n  command: {json.dumps(cand)}\n  ready: /health\n  startup_timeout: 120\n"
            f"workloads:\n  specdec_ab:\n    class: custom\n    prompt_tokens: {PROMPT_TOKENS}\n"
            f"    output_tokens: {OUTPUT_TOKENS}\n    samples: {samples}\n    warmup: 1\n    slo: {{}}\n"
            f"    baseline_target:\n      command: {json.dumps(base)}\n      ready: /health\n      block: {block}\n"
            "    regression: {tpot_p50: 10%, e2e_p50: 10%}\n")


def test_spec_ab_slo_parses_with_a_roofline(llama_spec_command, tmp_path):
    """The builder's text is a valid SLO file (no server needed): both commands, the roofline."""
    from pytest_llm_latency.plugin.slofile import parse_slo_file

    models = {n: tmp_path / f"{n}.gguf" for n in make_models.SPECS}
    text = spec_ab_slo(llama_spec_command, tmp_path / "llama-server", models,
                       roofline={"hardware": "local-cpu", "gguf": str(models["spec-target"]),
                                 "min_decode_efficiency": 0.05})
    spec = parse_slo_file(text, "specdec_ab.slo.yaml")
    data = yaml.safe_load(text)
    assert str(models["spec-draft-unrelated"]) in data["target"]["command"]
    assert str(models["spec-draft"]) in data["workloads"]["specdec_ab"]["baseline_target"]["command"]
    w, = spec.workloads
    assert w.output_tokens == OUTPUT_TOKENS and w.baseline_target is not None
    assert data["roofline"]["gguf"] == str(models["spec-target"]) == (w.roofline or {}).get("gguf")


GATE_SLO = """
target: {{url: "{url}", api: openai-completions}}
roofline: {{hardware: local-cpu, gguf: "{target}", draft: {{gguf: "{draft}", spec_tokens: {k}}},
           min_decode_efficiency: 0.05}}
workloads:
  specdec: {{class: custom, prompt_tokens: %d, output_tokens: %d, samples: %d, warmup: 1, slo: {{}}}}
""" % (PROMPT_TOKENS, OUTPUT_TOKENS, SAMPLES)


@pytest.mark.parametrize("pair", ["matched", "unrelated"])
def test_the_roofline_gate_judges_the_engine_steps_from_the_timings(pytester, llama_spec_servers, pair):
    """Through the plugin: the decode gate judges each pair's engine steps (target + 4 drafted
    tokens' worth of draft bytes per step, on the local CPU's measured bandwidth) from llama.cpp's
    per-response timings; the matched pair passes.  The floor is low (0.05) because on one thread
    a 5-token verification is compute-bound (module docstring): the gate is judged, not tuned."""
    s = llama_spec_servers
    draft = s.draft_gguf if pair == "matched" else s.unrelated_gguf
    pytester.makefile(".slo.yaml", gate=GATE_SLO.format(url=getattr(s, pair), target=s.target_gguf, draft=draft,
                                                        k=s.draft_max))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", timeout=300)
    res, = json.loads((pytester.path / "r.json").read_text())["results"]
    roof, sd = res["roofline"], res["spec_decode"]
    assert sd["source"] == spec_decode.SOURCE_LLAMACPP_TIMINGS and sd["scope"] == "per request"
    assert roof["status"] in ("pass", "fail"), roof          # judged, never "cannot be judged"
    assert roof["tokens_per_step"] == pytest.approx(sd["tokens_per_step"])
    # the drafter: each drafted token (drafted ÷ decode steps of them a step) reads the draft GGUF's
    # weights (35 MB) but the rows of its untied input embedding it does not gather (354 - 1 rows
    # of 512 F32), and its KV cache at the context
    per_step = sd["draft_tokens"] / sd["decode_steps"]
    dspec = make_models.SPECS["spec-draft"]
    read = draft.stat().st_size - (dspec.n_vocab - 1) * dspec.n_embd * 4
    assert per_step * read * 0.99 < roof["draft_bytes"] < per_step * read * 1.05, roof
    assert 0 < roof["step_efficiency"] <= 1.05
    if pair == "matched":
        r.assert_outcomes(passed=1)
        assert roof["status"] == "pass" and sd["tokens_per_step"] >= 0.9 * (1 + s.draft_max)
    else:
        assert sd["tokens_per_step"] < 1.3


def test_ab_of_the_two_pairs_flags_tpot(pytester, llama_spec_command, llama_server_binary, gguf_models):
    """Same target, same flags but the draft: the candidate's TPOT is ~4x the baseline's (1.0 vs
    5.0 tokens per step), far past the 10 % tolerance; the explanation names the acceptance."""
    (pytester.path / "specdec_ab.slo.yaml").write_text(spec_ab_slo(llama_spec_command, llama_server_binary,
                                                                     gguf_models))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--llm-latency-json=r.json", timeout=600)
    res, = json.loads((pytester.path / "r.json").read_text())["results"]
    comps = {c["key"]: c for c in res["baseline"]["comparisons"]}
    for c in comps.values():
        print(c["message"])
    r.assert_outcomes(failed=1)
    assert not [n for n in res["notes"] if "deviated" in n], res["notes"]
    assert res["n"] == 12 and res["load"]["ab_blocks"] == 4  # 4 blocks of 3 a side
    assert comps["tpot_p50"]["status"] == "regression" and comps["tpot_p50"]["lower"] > 2.0
    assert comps["e2e_p50"]["status"] == "regression"
    # the candidate's own figures come from its timings: its drafts were rejected
    sd = res["spec_decode"]
    assert sd["source"] == spec_decode.SOURCE_LLAMACPP_TIMINGS and sd["tokens_per_step"] < 1.3
    # ... and the deploy gate says why: tokens per step fell, from the acceptance
    out = r.stdout.str()
    assert "tokens per step 5.0 → 1.0: draft acceptance fell" in out, out
    assert "draft acceptance fell" in res["baseline"]["explanation"]
