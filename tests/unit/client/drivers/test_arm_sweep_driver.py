"""The server-sweep driver (``client/drivers/arm_sweep.py``) and the N-arm block loop it shares with A/B
(``arm_blocks.measure_in_blocks``), with fake clients and a fake block driver: a block of each arm in turn,
fresh salts per block, the last block shorter, one server at a time with ``stop``, each arm judged on the
workload's budgets, and the measurement returned being the recommended arm's (else the one with the most
headroom).  No server, no clock: the records carry explicit times."""
from __future__ import annotations

from dataclasses import dataclass, field

from pytest_llm_latency.client.drivers.arm_blocks import measure_in_blocks
from pytest_llm_latency.client.drivers.arm_sweep import ArmSweep
from pytest_llm_latency.client.drivers.base import Run, SweepArms
from pytest_llm_latency.client.drivers.registry import driver_for
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.measure.kv_transfer import DisaggTarget
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.records import record

SPEC = {"class": "custom", "prompt_tokens": 64, "output_tokens": 5, "samples": 5, "warmup": 1,
        "slo": {"tpot_p50": "10ms"},
        "server_sweep": {"urls": {"fast": "http://fast", "mid": "http://mid", "slow": "http://slow"},
                         "block_size": 2}}
W = make_workload("w", SPEC)


@dataclass
class FakeClient:
    """An arm's server: every request decodes at ``tpot_ms``."""
    name: str
    tpot_ms: float


@dataclass
class Log:
    blocks: list = field(default_factory=list)    # (arm, salt context, samples, warmup) per block sent
    events: list = field(default_factory=list)    # start/stop of one-at-a-time servers


class FakeBlock:
    """The driver of one block: records at the client's TPOT, and what it was asked logged."""

    def __init__(self, log: Log):
        self.log = log

    def measure(self, client, workload, run):
        self.log.blocks.append((client.name, run.salt_context, workload.samples, workload.warmup))
        assert run.sweep is None and run.ab is None  # a block is one target's plain loop
        assert run.disagg is None  # and scrapes no pool: a block's histograms are not merged (disagg_floor.in_blocks)
        return measured(workload, [record(20, gap_ms=client.tpot_ms, tokens=5) for _ in range(workload.samples)], [])


def clients(*tpots):
    return tuple(FakeClient(a.name, t) for a, t in zip(W.server_sweep.arms, tpots))


def run_sweep(tpots, stop=None, starters=None):
    log = Log()
    arms = SweepArms(W.server_sweep.arms, starters or clients(*tpots), 2, stop)
    res = ArmSweep(lambda w: FakeBlock(log)).measure(None, W, Run(salt_context="t", judge=judge, sweep=arms,
                                                                  disagg=DisaggTarget(None, "http://fast/metrics")))
    return res, log


def test_the_registry_picks_the_sweep():
    assert driver_for(W).name == "arm_sweep"


def test_a_block_of_each_arm_in_turn_with_fresh_salts_and_a_shorter_last_block():
    res, log = run_sweep((5, 8, 30))
    assert [(arm, salt, n) for arm, salt, n, _ in log.blocks] == [
        ("fast", "t#arm0:fast", 2), ("mid", "t#arm0:mid", 2), ("slow", "t#arm0:slow", 2),
        ("fast", "t#arm1:fast", 2), ("mid", "t#arm1:mid", 2), ("slow", "t#arm1:slow", 2),
        ("fast", "t#arm2:fast", 1), ("mid", "t#arm2:mid", 1), ("slow", "t#arm2:slow", 1)]
    assert [w for *_, w in log.blocks] == [1, 1, 1] + [0] * 6  # running servers: warmed once, in block 1
    assert len({salt for _, salt, _, _ in log.blocks}) == 9


def test_each_arm_is_judged_and_the_measurement_is_the_recommended_arms():
    res, _ = run_sweep((5, 8, 30))
    assert res.findings is None, "a driver measures; the checks judge (the arms were judged inside)"
    run = res.facts.server_sweep
    assert [a.name for a, _ in run.arms] == ["fast", "mid", "slow"]
    assert [r.verdict for _, r in run.arms] == ["pass", "pass", "fail"]
    assert [r.n for _, r in run.arms] == [5, 5, 5] and run.blocks == 3 and run.block_size == 2
    assert run.reported == "fast" and res.tpot.p50 == 5.0
    judged = judge(res)
    assert judged.verdict == "pass"
    assert judged.arms.meeting == ["fast", "mid"] and judged.arms.recommended == "fast"
    assert judged.arms.recommendation.startswith("2 of 3 arms meet every budget; recommended fast: most headroom "
                                                 "(2.00x on its tightest budget, TPOT p50 5.0 ms vs 10 ms)")
    # the arms keep their own judgement: judging the reported copy did not touch them
    assert run.arms[0][1].arms.arms == [] and run.arms[2][1].verdict == "fail"


def test_when_no_arm_meets_the_figures_are_the_arm_with_the_most_headroom():
    res, _ = run_sweep((40, 12, 30))
    assert res.facts.server_sweep.reported == "mid" and res.tpot.p50 == 12.0
    judged = judge(res)
    assert judged.verdict == "fail" and judged.arms.recommended is None
    assert any(t.startswith("server_sweep: no arm meets every budget") for t in judged.failed_checks)


def test_one_server_at_a_time_each_block_starts_its_arm_and_stops_it_after():
    log_events: list[str] = []
    cs = clients(5, 8, 30)

    def starter(c):
        def start():
            log_events.append(f"start {c.name}")
            return c
        return start
    res, log = run_sweep((), stop=lambda name: log_events.append(f"stop {name}"),
                         starters=tuple(starter(c) for c in cs))
    assert log_events == [f"{what} {n}" for _ in range(3) for n in ("fast", "mid", "slow")
                          for what in ("start", "stop")]
    assert [w for *_, w in log.blocks] == [1] * 9  # a restarted server is warmed again every block


def test_the_two_arm_case_is_the_ab_loop():
    log = Log()
    parts, blocks = measure_in_blocks(lambda w: FakeBlock(log), W, Run(salt_context="t"),
                                      (("a", FakeClient("a", 5)), ("b", FakeClient("b", 6))), 3,
                                      salt=lambda k, arm: f"ab{k}{arm}")
    assert blocks == 2 and [len(parts["a"]), len(parts["b"])] == [2, 2]
    assert [salt for _, salt, _, _ in log.blocks] == ["t#ab0a", "t#ab0b", "t#ab1a", "t#ab1b"]
    assert [n for _, _, n, _ in log.blocks] == [3, 3, 2, 2]
