"""Exact ITL end to end against the ground-truth emitter (``benchmarks/emitter.py``, a separate
process stamping each event's send time with CLOCK_MONOTONIC, the clock the client stamps with).

At 1, 4 and 1..5 tokens per chunk, with per-chunk usage (vLLM ``continuous_usage_stats``) and
with the final usage only (llama.cpp, TGI, proxies): the per-chunk token counts the client ends
up with are the emitter's, and each per-token ITL value matches the one computed from the
emitter's send stamps (k values of gap/k for a k-token chunk).  Without any usage, ITL stays
per chunk, the report names it, and an ITL budget is refused.

The premise of the tail's tolerance is a client that reads on time.  The plugin's own lag
monitor (``client.load.engine.LagMonitor``) runs beside the streams, as in ``measure``: a value read
while it saw the client stalled, by enough to explain the error, is excused (and counted); every
other value keeps the tolerance, and the median of all values checks the counting rule.

Bounded: each emitter streams 3 requests x 24 tokens at 100 tok/s (about 0.3 s each).
"""
from __future__ import annotations

import contextlib
import select
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pytest_llm_latency.client.prepare.chunk_counts import CountRecovery
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.load.engine import LagMonitor
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.measure import metrics as m
from pytest_llm_latency.core.measure.bunching import MIN_STALL_NS, StallTimeline, stall_at
from pytest_llm_latency.core.measure.stats import percentile
from pytest_llm_latency.core.spec.workload import make_workload

ROOT = Path(__file__).resolve().parents[2]
INTERVAL_MS = 10.0
#: per-token ITL error tolerances (ms): the median of all values, the p90 of those read on time
ERR_P50_MS = 0.5
ERR_P90_MS = 2.0
TOKENS = 24
REQUESTS = 3


@contextlib.contextmanager
def emitter(tmp_path: Path, per_chunk: str, usage: str):
    stamps = tmp_path / f"stamps-{per_chunk}-{usage}.jsonl".replace(":", "_")
    p = subprocess.Popen([sys.executable, str(ROOT / "benchmarks/emitter.py"), "--port", "0", "--ttft-ms", "20",
                          "--tok-per-s", str(1000 / INTERVAL_MS), "--tokens-per-chunk", per_chunk, "--usage", usage,
                          "--default-tokens", str(TOKENS), "--stamps", str(stamps)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 30)
        assert ready, "the emitter printed no URL within 30 s"
        url = p.stdout.readline().strip()
        assert url.startswith("http://"), url
        yield url, stamps
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def load_stamps():
    import importlib.util

    spec = importlib.util.spec_from_file_location("emitter", ROOT / "benchmarks/emitter.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.load_stamps


def true_itl(events: list[dict]) -> tuple[list[int], list[float]]:
    """(tokens per token event, per-token ITL in ms) from the emitter's send stamps."""
    tok = [e for e in events if e["tok"] > 0]
    itl = []
    for a, b in zip(tok, tok[1:]):
        itl += [(b["sent_ns"] - a["sent_ns"]) / 1e6 / b["tok"]] * b["tok"]
    return [e["tok"] for e in tok], itl


def stream_and_recover(url: str, stamps: Path, continuous: bool):
    with make_http_client() as http:
        client = OpenAIClient(http, url, "emitter", continuous_usage=continuous)
        with LagMonitor() as lag:  # the plugin's own client-health monitor, as ``measure`` runs it
            recs = [client.stream("", f"[itl-{i}] tell me a story", TOKENS) for i in range(REQUESTS)]
        recovery = CountRecovery(client, make_workload("w", {"prompt_tokens": 8, "output_tokens": TOKENS}))
        per_chunk = [m.itl_ms(r) for r in recs]
        recovery.apply(recs)
        report = recovery.report(recs)
        dump = http.post(url + "/_emitter/dump", json={}).json()
    _, requests, events = load_stamps()(dump["path"] if dump.get("path") else str(stamps))
    by_tag = {req["prompt_head"].split("]")[0] + "]": rid for rid, req in requests.items()}
    truth = [true_itl(events[by_tag[f"[itl-{i}]"]]) for i in range(REQUESTS)]
    # the emitter's own pacing: how late each token event went out against its schedule (ms)
    paced = [(e["sent_ns"] - e["due_ns"]) / 1e6 for i in range(REQUESTS) for e in events[by_tag[f"[itl-{i}]"]]
             if e["tok"] > 0]
    return recs, per_chunk, report, truth, lag.timeline(), sorted(paced)


def split_by_client_stalls(rec, itl: list[float], itl_truth: list[float], timeline: StallTimeline):
    """Per-token ITL errors (ms), split by the plugin's own client health: ``(kept, excused)``.
    A value is excused only where the lag monitor saw the client stalled at one of the two
    reads its gap spans, by enough to explain the error (a k-token chunk's stall L puts L/k on
    each of its k values; the monitor sees a stall to within a tick): the premise -- a client
    that reads on time -- did not hold there.  Every other value keeps the tolerance."""
    stalls = sorted(x for x in timeline.stalls if x[1] >= MIN_STALL_NS)
    kept, excused = [], []
    j = 0
    for prev, chunk in zip(rec.chunks, rec.chunks[1:]):
        stall_ms = max(stall_at(prev.t_ns, stalls), stall_at(chunk.t_ns, stalls)) / 1e6
        for _ in range(chunk.tokens):
            err = abs(itl[j] - itl_truth[j])
            j += 1
            explained = stall_ms > 0 and err * chunk.tokens <= stall_ms + timeline.tick_ns / 1e6 + ERR_P50_MS
            (excused if explained and err > ERR_P50_MS else kept).append(err)
    return kept, excused


@pytest.mark.parametrize("usage,rule_1", [("per-chunk", "server"), ("final", "one each")],
                         ids=["per-chunk-usage", "final-usage-only"])
@pytest.mark.parametrize("per_chunk", ["1", "4", "var:1-5"])
def test_per_token_itl_matches_the_emitters_send_stamps(tmp_path, per_chunk, usage, rule_1):
    with emitter(tmp_path, per_chunk, "request") as (url, stamps):
        recs, per_chunk_itl, (extra, notes, left_per_chunk), truth, timeline, paced = stream_and_recover(
            url, stamps, usage == "per-chunk")
    want = rule_1 if per_chunk == "1" or usage == "per-chunk" else "tokenize"
    assert extra == {"itl_token_counts": want} and notes == [] and left_per_chunk is None, (extra, notes)
    assert timeline.covers([c.t_ns for c in r.chunks] for r in recs)  # the monitor watched every read
    errs, kept, excused = [], [], []
    for rec, (counts, itl_truth) in zip(recs, truth):
        assert [c.tokens for c in rec.chunks] == counts  # the emitter's own per-event token counts
        itl = m.itl_ms(rec)
        assert len(itl) == len(itl_truth) == TOKENS - counts[0]
        errs += [abs(a - b) for a, b in zip(itl, itl_truth)]
        k, x = split_by_client_stalls(rec, itl, itl_truth, timeline)
        kept, excused = kept + k, excused + x
    errs.sort()
    kept.sort()
    print(f"{per_chunk} per chunk, {usage}: per-token ITL error p50 {percentile(errs, 50):.3f} ms, "
          f"p90 {percentile(errs, 90):.3f} ms, max {errs[-1]:.3f} ms over {len(errs)} tokens; "
          f"{len(excused)} of them read during a client stall (longest "
          f"{max((lag for _, lag in timeline.stalls), default=0) / 1e6:.2f} ms), the others' p90 "
          f"{percentile(kept, 90):.3f} ms")
    # Each per-token value is (receive gap - send gap) / k off the truth: scheduling noise, not
    # the rule.  A wrong count would be off by a whole interval/k (>= 2 ms here) on most values,
    # so the median of every value is the rule's check.  The tail's tolerance holds where the
    # client read on time; values its own lag monitor shows read late (a scheduler tick on a busy
    # core) are excused, each by no more than its stall explains, and never most of them.
    assert percentile(errs, 50) <= ERR_P50_MS, (percentile(errs, 50), errs[-5:])
    assert len(kept) >= len(errs) / 2, (len(excused), len(errs), timeline.stalls[:10])
    assert percentile(kept, 90) <= ERR_P90_MS, (percentile(kept, 90), kept[-5:], len(excused))
    p50 = percentile(sorted(v for r in recs for v in m.itl_ms(r)), 50)
    sent_p50 = percentile(sorted(v for _, itl in truth for v in itl), 50)
    assert abs(p50 - sent_p50) <= 1.0, (p50, sent_p50)  # per token, as the emitter sent them
    if percentile(paced, 90) <= 1.0:  # the emitter kept its schedule (its own lateness): its 10 ms interval
        assert abs(p50 - INTERVAL_MS) <= 1.0, (p50, paced[-5:])
    if per_chunk == "4" and usage == "final":  # before recovery it was per chunk: 4 x the interval
        assert percentile(sorted(v for itl in per_chunk_itl for v in itl), 50) >= 3.5 * INTERVAL_MS


def test_no_usage_at_all_is_named_per_chunk_and_an_itl_budget_is_refused(tmp_path):
    with emitter(tmp_path, "4", "none") as (url, _):
        with make_http_client() as http:
            client = make_client(Target(url, "openai-completions", "emitter"), http)
            w = make_workload("w", {"prompt_tokens": 16, "output_tokens": TOKENS, "samples": 3, "warmup": 1,
                                    "slo": {"itl_p50": "20ms", "tpot_p50": "20ms"}})
            # no usage: prompts cannot be calibrated on it, so they are counted as the emitter
            # counts (one token per word)
            res = judge(measure(client, w, counter=lambda text: len(text.split())))
    assert res.measurement.itl_token_counts == "per chunk"
    assert res.verdict == "error", (res.verdict, res.errors)
    assert any(e.startswith("itl_p50 cannot be judged: 3 of 3 streams gave no per-chunk token counts")
               for e in res.errors)
    assert any("ITL is per chunk, not per token, on 3 of 3 streams" in n for n in res.notes)


def test_the_runner_names_the_tokenize_rule_and_judges_itl_per_token(tmp_path):
    """Through ``measure`` (what the plugin runs): 4 tokens per chunk with final usage only, an
    ``itl_p50: 20ms`` budget that per-chunk gaps (40 ms) would fail passes on per-token ITL."""
    with emitter(tmp_path, "4", "final") as (url, _):
        with make_http_client() as http:
            client = make_client(Target(url, "openai-completions", "emitter"), http)
            w = make_workload("w", {"prompt_tokens": 16, "output_tokens": TOKENS, "samples": 3, "warmup": 1,
                                    "slo": {"itl_p50": "20ms"}})
            res = judge(measure(client, w))
    assert res.measurement.itl_token_counts == "tokenize", res.measurement
    assert res.verdict == "pass", (res.errors, res.violations, res.notes)
    assert abs(res.summaries["itl"].p50 - INTERVAL_MS) <= 1.0


def test_emitter_is_not_reachable_after_the_context(tmp_path):
    """The fixture's ``finally`` ends the emitter (no process left behind by these tests)."""
    with emitter(tmp_path, "1", "final") as (url, _):
        assert httpx.get(url + "/v1/models", timeout=5).status_code == 200
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/v1/models", timeout=2)
