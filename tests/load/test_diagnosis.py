"""Each diagnosis rule on recorded inputs: ``fixtures/diagnosis-evidence.json`` holds the
evidence of runs against the reference target with known settings (re-record with
``fixtures/record_diagnosis_evidence.py``).  The network/client rule and the issue's own
example are hand-written figures (the reference target has no network in between)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llm_latency.core.result.diagnosis import Evidence, diagnose

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "diagnosis-evidence.json").read_text())


def recorded(name: str) -> Evidence:
    ev = dict(RECORDED[name]["evidence"])
    ev["ttft_by_prompt"] = tuple(tuple(p) for p in ev["ttft_by_prompt"])
    return Evidence(**ev)


def names(e: Evidence, failing) -> list[str]:
    return [c.name for c in diagnose(e, set(failing))]


# scenario -> (the failing metric, the cause that must be named, causes that must not be)
CASES = {
    "queueing": ("ttft", "queueing, not the model", {"prefill-bound TTFT", "network or client"}),
    "prefix_off": ("ttft", "prefix cache not effective", {"queueing", "queueing, not the model"}),
    "prefill_bound": ("ttft", "prefill-bound TTFT", {"queueing, not the model", "queueing"}),
    "decode_context": ("tpot", "decode slowing with context", {"batching tail"}),
    "batching_tail": ("itl", "batching tail", {"decode slowing with context"}),
    "kv_pressure": ("e2e", "KV pressure", set()),
}


@pytest.mark.parametrize("scenario", list(CASES))
def test_rule_fires_on_its_recorded_run(scenario):
    failing, cause, absent = CASES[scenario]
    got = names(recorded(scenario), {failing})
    assert cause in got, (RECORDED[scenario]["url"], got)
    assert not absent & set(got), got


def test_prefix_caching_on_is_not_blamed():
    assert "prefix cache not effective" not in names(recorded("prefix_on"), {"ttft"})


def test_queueing_message_carries_its_evidence():
    (c, *_) = diagnose(recorded("queueing"), {"ttft"})
    ev = RECORDED["queueing"]["evidence"]
    assert c.line.startswith(f"cause: queueing, not the model — {ev['server']['server_queue_ms_mean']:.0f} ms of "
                             f"the {ev['ttft_p50']:.0f} ms TTFT p50 was spent in the server's queue (max waiting 24")
    # the example, figure for figure
    e = Evidence(ttft_p50=996.0, server={"server_queue_ms_mean": 757.0, "server_waiting_max": 4.0})
    assert diagnose(e, {"ttft"})[0].line == ("cause: queueing, not the model — 757 ms of the 996 ms TTFT p50 was "
                                             "spent in the server's queue (max waiting 4, max_num_seqs?)")


def test_a_cause_is_only_given_for_a_metric_it_explains():
    assert "queueing, not the model" not in names(recorded("queueing"), {"tpot"})
    assert "batching tail" not in names(recorded("batching_tail"), {"ttft"})


def test_network_or_client_needs_an_idle_queue():
    far = Evidence(ttft_p50=400.0, server={"server_ttft_ms_p50": 40.0, "server_waiting_max": 0.0})
    assert names(far, {"ttft"}) == ["network or client"]
    assert "360 ms are spent outside the server" in diagnose(far, {"ttft"})[0].text
    queued = Evidence(ttft_p50=400.0, server={"server_ttft_ms_p50": 40.0, "server_waiting_max": 3.0})
    assert "network or client" not in names(queued, {"ttft"})
    close = Evidence(ttft_p50=60.0, server={"server_ttft_ms_p50": 40.0, "server_waiting_max": 0.0})
    assert names(close, {"ttft"}) == []


def test_client_starved_is_said_instead_of_blaming_the_network():
    e = Evidence(ttft_p50=400.0, client_fell_behind=True, client_lag_p99=48.2,
                 server={"server_ttft_ms_p50": 40.0, "server_waiting_max": 0.0})
    causes = diagnose(e, {"itl"})
    assert [c.line for c in causes] == ["cause: client starved — the client fell behind (CPU-starved: lag p99 48 ms); "
                                        "these figures are not the server's"]


def test_no_evidence_no_cause():
    assert diagnose(Evidence(), {"ttft", "tpot", "itl"}) == []
