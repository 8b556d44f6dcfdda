"""The load engine against the reference target with known settings (a server process of its
own): coordinated omission, queueing, prefix caching on and off, early stop on a deterministic
4xx.  ``time_scale`` shortens the modelled durations where timing fidelity is not the point."""
from __future__ import annotations

import pytest

from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.runner import Target, make_client, measure
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.measure import metrics as m
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.targets.reference.launch import start_reference

REF = "reference://h100-sxm/llama-3.1-8b?"


def run(url: str, spec: dict, seed: int = 0):
    with start_reference(url, mode="subprocess") as h:
        client = make_client(Target(h.url, "openai-completions"), make_http_client())
        return judge(measure(client, make_workload("w", spec), seed=seed))


def test_coordinated_omission_open_loop_shows_the_stall_a_closed_loop_hides():
    # the engine stops once for 2 s, 1.5 s after the first generation request (warmup 0: the
    # first measured request, scheduled at t0).  Requests take ~25 ms otherwise.
    url = REF + "time_scale=0.2&fault=pause;at=1.5;seconds=2"
    base = {"prompt_tokens": 64, "output_tokens": 16, "warmup": 0, "samples": 100,
            "slo": {"e2e_p99": "10s"}}
    opened = run(url, {**base, "rate": 20, "arrival": "poisson"}, seed=1)
    # the closed loop sends back to back: 300 requests keep it running through the stall
    closed = run(url, {**base, "concurrency": 2, "samples": 300})
    assert opened.n == 100 and closed.n == 300
    t0 = min(r.t_scheduled_ns for r in opened.records)
    # The server starts the pause's clock at the first generation request *it* sees, which on a
    # loaded machine can precede the first scheduled send by a few hundred ms; so the stall's
    # end is read off the data (the first stalled request to finish) and checked to be where
    # the fault puts it, then every request due during the 2 s must have waited until then.
    ends = [r.t_scheduled_ns + m.e2e_ms(r) * 1e6 for r in opened.records if m.e2e_ms(r) > 1000]
    resume = min(ends)
    assert 2.9e9 <= resume - t0 <= 3.7e9, (resume - t0) / 1e6
    pause = resume - 2e9
    during = [r for r in opened.records if pause <= r.t_scheduled_ns <= resume - 0.1e9]
    assert len(during) >= 20  # ~40 due in the 2 s at 20/s
    for r in during:  # each waited out the rest of the stall, measured from when it was due
        assert m.e2e_ms(r) >= (resume - r.t_scheduled_ns) / 1e6 - 150, (r.t_scheduled_ns - t0) / 1e6
    slow_open = sum(1 for r in opened.records if m.e2e_ms(r) > 1000)
    slow_closed = sum(1 for r in closed.records if m.e2e_ms(r) > 1000)
    # the closed loop ran through the stall, but stopped sending: only the 2 requests in flight saw it
    assert slow_open >= 15 and 1 <= slow_closed <= 2
    assert opened.e2e.p90 > 1000 > closed.e2e.p90
    assert opened.client.client_fell_behind == 0 and opened.client.client_send_lag_ms_p99 is not None


def test_queueing_is_reported_and_named_in_the_ttft_failure():
    res = run(REF + "max_num_seqs=8&time_scale=0.5", {"class": "chat", "concurrency": 32, "samples": 24})
    assert res.verdict == "fail"
    assert res.server.server_waiting_max > 0 and res.server.server_running_max <= 8
    msg = res.failure_message()
    assert "TTFT p95" in msg and "cause: queueing, not the model —" in msg
    assert "was spent in the server's queue (max waiting" in msg
    # the steady state only: ramp-up and drain excluded and said so; the client kept up at 32 streams
    assert res.load.ramp_excluded == 32 and res.load.drain_excluded == 31
    assert res.client.client_fell_behind == 0
    tl = res.server.metrics_timeline
    assert max(v for _, v in tl["vllm:num_requests_waiting"]) > 0 and len(tl["vllm:num_requests_running"]) >= 3


@pytest.mark.parametrize("caching", [False, True])
def test_diagnosis_tells_prefix_caching_on_from_off(caching):
    spec = {"prompt_tokens": 2048, "output_tokens": 16, "shared_prefix_tokens": 1536, "samples": 10,
            "slo": {"ttft_p50": "1ms"}}  # fails either way, so the diagnosis runs
    res = run(REF + f"time_scale=0.5&prefix_caching={int(caching)}", spec)
    assert res.verdict == "fail"
    named = any(c.startswith("cause: prefix cache not effective") for c in res.causes)
    assert named is (not caching), res.causes
    if caching:
        assert res.server.server_prefix_hit_rate > 0.5
    else:
        assert "no prefix-cache lookups at all on a workload sharing 1536 prefix tokens" in res.failure_message()


@pytest.mark.parametrize("load", [{}, {"concurrency": 4}, {"rate": 50}, {"warmup": 2}])
def test_a_deterministic_4xx_stops_the_run(load):
    # 100 prompt tokens > max_model_len 64: every request gets the same 400 (the probe, which
    # asks for 1 token of a short prompt, does not)
    spec = {"prompt_tokens": 100, "output_tokens": 8, "samples": 20, "warmup": 0, **load}
    res = run(REF + "time_scale=0.1&max_model_len=64", spec)
    assert res.verdict == "error"
    assert 1 <= len(res.failures) <= load.get("concurrency", 1) + 1   # not the other 20
    assert {f.kind for f in res.failures} == {"context_length"}
    assert any(n.startswith("stopped") for n in res.notes), res.notes
