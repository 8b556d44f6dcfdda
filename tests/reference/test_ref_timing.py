"""Acceptance: the running server's timing, measured through the plugin's own client, matches the roofline.

Ground truth is computed here from the catalog figures with the formulas written out
(not by calling ``physics.py``).  Servers run in subprocess mode, so the client's
parsing never competes with the server for one GIL.

Robust to a loaded 2-core machine (checked with two busy loops on both cores) without
widening the stated physics tolerances:

* no absolute wall-clock threshold: every expectation is a ratio of two measurements
  from the same test, or a modelled duration after subtracting a fixed per-request cost
  measured in the same test;
* each figure is a median or a minimum over a few requests;
* modelled steps are long against scheduler noise (a few ms on a busy machine): the
  ``time_scale`` and prompt sizes below are chosen so that a 10-20 ms late wake-up stays
  inside each tolerance.
"""
from __future__ import annotations

import gc
import math
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.reference.pluginclient import stream_openai  # the plugin's own client and metrics
from tests.reference.refclient import percentile, words

BW, PEAK = 3350e9, 989e12                    # H100-SXM datasheet (catalog)
P, WB, KV, L = 8.03e9, 8.03e9 * 2, 131072, 32  # Llama-3.1-8B fp16 (catalog)
H = round(math.sqrt(P / (12 * L)))           # hidden size estimate used by the attention term


@pytest.fixture(autouse=True)
def no_client_gc():
    """A gen-2 collection in this (pytest) process pauses the client for 35-130 ms
    (measured with gc.callbacks in a full run) and shows up as a false ITL spike, so
    the client measures with the collector off."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def decode_step(c: int, eff: float = 1.0) -> float:
    return (WB + KV * c) / (BW * eff)


def mean_tpot(prompt: int, n_tokens: int, eff: float = 1.0) -> float:
    """Mean decode step between the first and the last token (contexts prompt .. prompt+n-2)."""
    return statistics.fmean(decode_step(c, eff) for c in range(prompt, prompt + n_tokens - 1))


def prefill(n: int, mfu: float) -> float:
    return (2 * P * n + 2 * L * H * n * (n + 1)) / (PEAK * mfu)


def forced(prompt: str, n: int, **extra) -> dict:
    return {"prompt": prompt, "max_tokens": n, "ignore_eos": True, **extra}


def test_decode_speed_matches_the_bandwidth_roofline(serve, http):
    # time_scale 0.5: 2.4 / 3.0 ms steps, a 0.7-0.9 s window per request, so a 10 ms
    # late read of the last token moves the rate by ~1.4 %, inside the 2 % tolerance.
    ts, n = 0.5, 300
    for eff, about in ((1.0, 208.0), (0.8, 167.0)):
        model = 1.0 / mean_tpot(100, n, eff)
        assert abs(model / about - 1) < 0.005, (eff, model)        # the documented figure
        h = serve(f"efficiency={eff}&time_scale={ts}")
        stream_openai(http, h.url, forced("warm up", 4))
        rates = [1.0 / (stream_openai(http, h.url, forced(words(100, f"s{i}"), n)).tpot_s() / ts)
                 for i in range(3)]
        measured = statistics.median(rates)
        print(f"decode eff={eff}: measured {measured:.2f} tok/s, model {model:.2f} ({measured / model - 1:+.2%})")
        assert abs(measured / model - 1) < 0.02, (eff, measured, model, rates)


def first_token(n: int, mfu: float, eff: float) -> float:
    """A lone prefill step of ``n`` tokens: the larger of its compute and its weight read."""
    return max(prefill(n, mfu), decode_step(0, eff))


def test_prefill_scaling_ttft_doubles_tpot_flat(serve, http):
    # prefill_efficiency 0.1 and time_scale 2 stretch the prefills (330 / 673 ms).  TTFT
    # also holds a fixed per-request cost outside the model (HTTP, JSON, tokenizing: ~1 ms
    # on a quiet machine, ~8 ms on a slow one, more under load), which hides the attention
    # term: TTFT 2000 / TTFT 1000 is 2.036 modelled, but was 345 / 173 ms = 1.99 at
    # time_scale 1 with 8 ms added.  So that cost is measured here, with a tiny prompt whose
    # modelled first token is one memory-bound step, and subtracted.  The sizes are
    # interleaved, so a busy second on the machine hits one sample of each size rather
    # than every sample of one.
    mfu, eff, ts, sizes = 0.1, 0.7, 2, (8, 1000, 2000)
    h = serve(f"prefill_efficiency={mfu}&decode_efficiency={eff}&time_scale={ts}")
    stream_openai(http, h.url, forced("warm up", 4))
    runs = {n: [] for n in sizes}
    for i in range(5):
        for n in sizes:
            runs[n].append(stream_openai(http, h.url, forced(words(n, f"salt{n}-{i}"), 16)))
    ttft = {n: min(s.ttft_s for s in runs[n]) for n in sizes}      # the fixed cost and noise only add
    tpot = {n: statistics.median(s.tpot_s() for s in runs[n]) for n in sizes}
    fixed = ttft[8] - first_token(8, mfu, eff) * ts
    net = {n: (ttft[n] - fixed) / ts for n in (1000, 2000)}      # modelled seconds
    ratio, model_ratio = net[2000] / net[1000], prefill(2000, mfu) / prefill(1000, mfu)   # 2.036
    print(f"prefill: TTFT {ttft}, fixed {fixed * 1e3:.1f} ms, net ratio {ratio:.3f} (model {model_ratio:.3f}); "
          f"TPOT change {tpot[2000] / tpot[1000] - 1:+.2%}")
    assert -0.001 < fixed < 0.05, (fixed, ttft)          # a sane client + server overhead
    for n in (1000, 2000):
        assert abs(net[n] / prefill(n, mfu) - 1) < 0.05, (n, net[n], prefill(n, mfu), fixed)
    assert model_ratio > 2.03
    assert abs(ratio / model_ratio - 1) < 0.03, (ratio, model_ratio, ttft, fixed)  # >= 1.975: at least linear
    assert abs(tpot[2000] / tpot[1000] - 1) < 0.05, tpot


def test_prefix_caching_skips_a_shared_system_prompt(serve, http):
    system = words(3000, "system")

    def ttfts(url: str) -> list[float]:
        out = []
        for i in range(5):
            msgs = [{"role": "system", "content": system}, {"role": "user", "content": f"question {i} please"}]
            s = stream_openai(http, url, {"messages": msgs, "max_tokens": 2, "ignore_eos": True},
                              path="/v1/chat/completions")
            out.append(s.ttft_s)
        return out

    # time_scale 2: ~206 ms of prefill per uncached request, so a hit (~one short step)
    # and a miss stay > 80 ms apart from their thresholds even with late wake-ups.
    ts = 2
    cost = prefill(3000, 0.5) * ts
    for caching in (False, True):
        h = serve(f"time_scale={ts}&prefix_caching={int(caching)}")
        short = min(stream_openai(http, h.url, forced(f"short {i} prompt", 2)).ttft_s for i in range(3))
        t = ttfts(h.url)
        print(f"prefix caching={caching}: short {short * 1e3:.1f} ms, TTFTs {[round(x * 1e3, 1) for x in t]} ms")
        assert t[0] > short + 0.8 * cost, (caching, t, short)
        if caching:
            assert all(x < short + 0.4 * cost for x in t[1:]), (t, short)
        else:
            assert all(x > short + 0.8 * cost for x in t[1:]), (t, short)
        fams = {f.name: f for f in text_string_to_metric_families(http.get(h.url + "/metrics").text)}
        hits = fams["vllm:prefix_cache_hits"].samples[0].value
        assert (hits >= 4 * 2992) if caching else hits == 0


def test_decode_slows_with_context_by_the_kv_read_ratio(serve, http):
    # A context of 24000 tokens adds 3.1 GB of KV reads to the 16 GB of weights per step
    # (~19 % slower decode), and time_scale 0.5 gives ~0.5 s windows: a 10 ms late read
    # moves the measured ratio by ~2 %, and the slowdown itself by ~10 % of its size.
    ts, n, long_ctx = 0.5, 200, 24000
    h = serve(f"efficiency=1.0&time_scale={ts}")
    stream_openai(http, h.url, forced("warm up", 4))
    samples = {100: [], long_ctx: []}
    for i in range(3):                              # interleaved: machine noise hits both alike
        for ctx in samples:
            samples[ctx].append(stream_openai(http, h.url, forced(words(ctx, f"c{ctx}-{i}"), n)).tpot_s())
    tp = {ctx: statistics.median(v) for ctx, v in samples.items()}
    predicted = mean_tpot(long_ctx, n) / mean_tpot(100, n)       # ~1.195
    measured = tp[long_ctx] / tp[100]
    print(f"context growth: measured {measured:.4f}, predicted {predicted:.4f} ({measured / predicted - 1:+.2%})")
    # 3 % of the ratio is ~18 % of the slowdown itself: a decode that ignored the KV
    # reads (ratio 1.0) or read them twice (1.39) fails.
    assert abs(measured / predicted - 1) < 0.03, (measured, predicted)


def _run_concurrently(url: str, n_workers: int, bodies_per_worker) -> tuple[list, float]:
    """Closed loop: ``n_workers`` clients, created and connected first, start together."""
    clients = [httpx.Client(timeout=60.0) for _ in range(n_workers)]
    try:
        for c in clients:
            c.get(url + "/health")                   # connect outside the measurement
        start = threading.Barrier(n_workers + 1)

        def worker(i):
            start.wait(30)
            return [stream_openai(clients[i], url, body) for body in bodies_per_worker(i)]

        with ThreadPoolExecutor(n_workers) as pool:
            futures = [pool.submit(worker, i) for i in range(n_workers)]
            start.wait(30)
            t0 = time.perf_counter_ns()
            results = [s for f in futures for s in f.result(120)]
    finally:
        for c in clients:
            c.close()
    return results, t0


def _while_scraping(url: str, gauges: list[str], run):
    """Run ``run()`` while a thread samples these /metrics gauges every 20 ms; (result, samples)."""
    seen, stop = [], threading.Event()

    def scrape():
        with httpx.Client(timeout=5.0) as c:
            while not stop.is_set():
                fams = {f.name: f for f in text_string_to_metric_families(c.get(url + "/metrics").text)}
                seen.append(tuple(fams[g].samples[0].value for g in gauges))
                stop.wait(0.02)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        return run(), seen
    finally:
        stop.set()
        scraper.join(10)


def test_batching_multiplies_throughput_and_raises_p99_itl(serve, http):
    h = serve("time_scale=1")
    stream_openai(http, h.url, forced("warm up", 4))
    singles = [stream_openai(http, h.url, forced(words(100, f"one{i}"), 64)) for i in range(3)]
    single_tps = statistics.median(s.tokens / ((s.chunks[-1][0] - s.t_send) / 1e9) for s in singles)
    # The single stream's steady step (median ITL, ~6.9 ms), not its p99: on a busy machine
    # the p99 of a lone stream is one late wake-up (20-25 ms measured), i.e. noise.
    single_itl = statistics.median(x for s in singles for x in s.itls_s())

    # Second requests have 800-token prompts: each one's prefill (~26 ms) stalls the
    # running streams however their arrivals spread over the steps (with 200 tokens, one
    # prefill per step hardly lengthens it, and p99 depended on how the arrivals bunched).
    results, t0 = _run_concurrently(h.url, 32, lambda i: [forced(words(200 + 600 * k, f"w{i}-{k}"),
                                                                 48 + 8 * (i % 4)) for k in range(2)])
    assert all(s.done and s.finish_reason == "length" for s in results)
    t_end = max(s.chunks[-1][0] for s in results)
    aggregate = sum(s.tokens for s in results) / ((t_end - t0) / 1e9)
    conc_p99 = percentile([x for s in results for x in s.itls_s()], 0.99)
    print(f"batching: single {single_tps:.1f} tok/s, aggregate {aggregate:.1f} tok/s "
          f"({aggregate / single_tps:.1f}x); ITL p50 single {single_itl * 1e3:.1f} -> "
          f"p99 batched {conc_p99 * 1e3:.1f} ms")
    assert aggregate >= 10 * single_tps, (aggregate, single_tps)
    # Batched, the second requests' prefills (>= 26 ms each, ~210 ms when 8 arrive together)
    # stall the running streams: p99 ITL 130-170 ms, against a single stream's ~6.9 ms step.
    assert conc_p99 > 3 * single_itl, (conc_p99, single_itl)


def test_queueing_shows_in_metrics_and_in_ttft(serve, http):
    h = serve("time_scale=1&max_num_seqs=8")
    solos = [stream_openai(http, h.url, forced(words(50, f"solo{i}"), 32)) for i in range(2)]
    one_e2e = min((s.chunks[-1][0] - s.t_send) / 1e9 for s in solos)
    (results, _), seen = _while_scraping(
        h.url, ["vllm:num_requests_waiting"],
        lambda: _run_concurrently(h.url, 32, lambda i: [forced(words(50, f"q{i}"), 32)]))
    waiting = [w for (w,) in seen]
    print(f"queueing: max waiting {max(waiting)}, TTFT p95 {percentile([s.ttft_s for s in results], 0.95):.3f} s, "
          f"single e2e {one_e2e:.3f} s")
    assert max(waiting) > 0, waiting
    ttfts = [s.ttft_s for s in results]
    # 4 waves of 8: the last wave waits for 3 full requests (~3 x one_e2e) before its prefill
    assert percentile(ttfts, 0.95) > 2 * one_e2e, (percentile(ttfts, 0.95), one_e2e)
    fams = {f.name: f for f in text_string_to_metric_families(http.get(h.url + "/metrics").text)}
    q = {s.name: s.value for s in fams["vllm:request_queue_time_seconds"].samples if "le" not in s.labels}
    mean_queue = q["vllm:request_queue_time_seconds_sum"] / q["vllm:request_queue_time_seconds_count"]
    mean_ttft = statistics.fmean(ttfts + [s.ttft_s for s in solos])
    assert q["vllm:request_queue_time_seconds_count"] == 34
    print(f"queueing: mean client TTFT {mean_ttft:.3f} s, mean server queue time {mean_queue:.3f} s")
    # The client's TTFT is the server's queue time (~0.33 s) plus the admitting step
    # (~10 ms modelled) plus client overhead (up to ~40 ms measured with 32 client threads
    # on a busy 2-core machine).
    assert 0 <= mean_ttft - mean_queue < 0.1, (mean_ttft, mean_queue)


def _wait_for_tokens(http: httpx.Client, url: str, n: int, timeout_s: float = 10.0) -> None:
    """Until the server has generated ``n`` tokens (``vllm:generation_tokens``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        fams = {f.name: f for f in text_string_to_metric_families(http.get(url + "/metrics").text)}
        if fams["vllm:generation_tokens"].samples[0].value >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"the running stream produced fewer than {n} tokens in {timeout_s} s")


def test_chunked_prefill_bounds_the_stall_of_running_streams(serve, http):
    # time_scale 2: the plain stall is ~430 ms and a chunked step ~40 ms, so the bound
    # (a quarter of the plain stall) leaves ~70 ms for late wake-ups.
    ts = 2

    def worst_itl(query: str) -> float:
        h = serve(f"time_scale={ts}&{query}")
        box = {}

        def running():
            with httpx.Client(timeout=30.0) as c:
                box["s"] = stream_openai(c, h.url, forced(words(20, "run"), 80))

        t = threading.Thread(target=running)
        t.start()
        _wait_for_tokens(http, h.url, 3)          # it is decoding: the long prompt stalls it
        stream_openai(http, h.url, forced(words(6000, "long"), 2))
        t.join(30)
        return max(box["s"].itls_s())

    plain = worst_itl("chunked_prefill=0")
    chunked = worst_itl("chunked_prefill=1&max_num_batched_tokens=512")
    print(f"chunked prefill: worst ITL {plain * 1e3:.1f} ms plain, {chunked * 1e3:.1f} ms chunked")
    assert plain > 0.8 * prefill(6000, 0.5) * ts, plain               # one long stall (~430 ms)
    assert chunked < 0.25 * plain, (chunked, plain)                    # many short steps instead


def test_kv_pool_full_makes_requests_wait(serve, http):
    # pool of 2048 tokens; each request needs 400 + 100 = 500 -> 4 run, 4 wait
    h = serve("time_scale=1&kv_pool_tokens=2048")
    (results, _), seen = _while_scraping(
        h.url, ["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"],
        lambda: _run_concurrently(h.url, 8, lambda i: [forced(words(400, f"kv{i}"), 100)]))
    print(f"kv pool: max waiting {max(w for w, _, _ in seen)}, max running {max(r for _, r, _ in seen)}, "
          f"max usage while waiting {max(u for w, _, u in seen if w > 0):.2f}")
    assert all(s.done for s in results)
    assert max(w for w, _, _ in seen) >= 3 and max(r for _, r, _ in seen) == 4
    assert max(u for w, _, u in seen if w > 0) > 0.75          # waiting while the pool is nearly full


def test_server_reported_durations_are_modelled_time_times_scale(serve, http):
    ts = 1.0                   # ~0.25 s of modelled time, against which client noise is small
    h = serve(f"efficiency=1.0&time_scale={ts}&prefix_caching=0")
    from tests.reference.refclient import stream_ollama

    s = stream_ollama(http, h.url, {"model": "llama-3.1-8b", "prompt": words(1000, "ollama"),
                                    "options": {"num_predict": 50}})
    f = s.final
    n = f["eval_count"]
    assert n == s.tokens and f["prompt_eval_count"] == 1000
    decode = sum(decode_step(c) for c in range(1000, 1000 + n - 1)) * ts
    assert abs(f["eval_duration"] / 1e9 / decode - 1) < 1e-3, (f, decode)
    assert abs(f["prompt_eval_duration"] / 1e9 / (prefill(1000, 1.0) * ts) - 1) < 1e-3, f
    assert f["total_duration"] >= f["prompt_eval_duration"] + f["eval_duration"]
    # The client's window holds the server's (sent before arrival, read after the
    # deadline) plus HTTP and scheduling overhead: 1-2 ms quiet, tens of ms on a busy machine.
    client_e2e = (s.chunks[-1][0] - s.t_send) / 1e9
    total = f["total_duration"] / 1e9
    assert -0.001 < client_e2e - total < 0.25 * total, (client_e2e, total)
