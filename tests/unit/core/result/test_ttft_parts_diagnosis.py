"""The queueing and prefill-bound rules (``core.result.diagnosis``) compare the server's *mean* queue and
prefill times with the client's *mean* TTFT: parts of a whole.  A p50 is no such whole: in a mix of 512-token
chats and 16,000-token summaries (docs/sharing-a-server.md) the median request is a chat (27 ms) while the
means carry the long prefills (the server's 94 ms queue, 122 ms prefill), and "94 ms of the 27 ms TTFT p50"
said a part was larger than its whole.  Figures from that run (reference target, chunked prefill off)."""
from __future__ import annotations

from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.result.diagnosis import Evidence, diagnose
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.result.why import evidence
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record

MIX_SERVER = {"server_queue_ms_mean": 93.8, "server_prefill_ms_mean": 121.6, "server_waiting_max": 4.0,
              "server_running_max": 20.0}


def test_the_servers_means_are_judged_as_parts_of_the_clients_mean_ttft():
    e = Evidence(ttft_p50=27.2, ttft_mean=215.0, prompt_tokens=2061, server=MIX_SERVER)
    lines = [c.line for c in diagnose(e, {"ttft"})]
    # 94 of 215 ms is under half: requests did wait (4 at most), but the queue is not the bulk of the TTFT
    assert "cause: queueing — up to 4 requests waited in the server's queue; 94 ms mean queue time (running max " \
           "20: the server's batch limit, max_num_seqs?)" in lines
    assert not any("not the model" in line for line in lines)
    assert ("cause: prefill-bound TTFT — the server's prefill took 122 ms of the 215 ms mean TTFT (2061 prompt "
            "tokens): shorter prompts, a shared prefix with prefix caching, or more compute") in lines
    assert not any(" of the 27 ms " in line for line in lines)  # never a part larger than the whole it names


def test_the_queue_as_the_bulk_of_the_mean_ttft_is_still_queueing_not_the_model():
    e = Evidence(ttft_p50=1601.0, ttft_mean=1310.0, server={"server_queue_ms_mean": 1254.2, "server_waiting_max": 24.0})
    (c,) = diagnose(e, {"ttft"})
    assert c.line == ("cause: queueing, not the model — 1254 ms of the 1310 ms mean TTFT was spent in the server's "
                      "queue (max waiting 24, max_num_seqs?)")


def test_without_a_mean_the_p50_is_the_whole_as_before():
    e = Evidence(ttft_p50=996.0, server={"server_queue_ms_mean": 757.0, "server_waiting_max": 4.0})
    assert diagnose(e, {"ttft"})[0].line == ("cause: queueing, not the model — 757 ms of the 996 ms TTFT p50 was "
                                             "spent in the server's queue (max waiting 4, max_num_seqs?)")


def test_the_evidence_carries_the_clients_mean_ttft():
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 2, "samples": 4})
    records = [record(t, send_ms=1000 * i, tokens=2) for i, t in enumerate((20.0, 30.0, 40.0, 710.0))]
    res = judge(measured(w, records, []))
    ev = evidence(res)
    assert ev.ttft_p50 == 35.0 and ev.ttft_mean == 200.0
