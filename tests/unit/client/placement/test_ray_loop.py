"""A closed loop on Ray nodes without a cluster (``client/placement/ray/loop.py``): two "nodes" run the load
engine's own closed loop in threads of this process, each on its ``NodeLoopState`` with a clock of its
own (offset from the driver's), all calling one ``LoopBooks`` directly where a node calls the actor;
their records, moved to the driver's timeline and merged, are settled on the books' one window.  And
``settle`` on hand-made runs."""
from __future__ import annotations

import itertools
import threading
from dataclasses import replace

import pytest

from pytest_llm_latency.client.load.engine import ClosedPlan, LoadRun, _closed_loop
from pytest_llm_latency.client.placement.ray.loop import LoopBooks, NodeLoopState, settle
from pytest_llm_latency.client.placement.ray.shards import shift_run
from pytest_llm_latency.client.placement.processes.shard import ShardRun, WorkerTarget
from pytest_llm_latency.client.placement.processes.workers import merge
from pytest_llm_latency.client.placement.processes.closed import make_closed_shards
from pytest_llm_latency.core.prompts.synthesis import Prompt
from pytest_llm_latency.core.measure.record import RequestRecord
from pytest_llm_latency.core.result.result import Failure

TARGET = WorkerTarget("http://127.0.0.1:9", "openai-completions", "m")
SECOND = 1_000_000_000


def prompts(n: int) -> list[Prompt]:
    return [Prompt(system="", user=f"p{i}", expected_tokens=8, counted_tokens=8) for i in range(n)]


def direct(books: LoopBooks):
    """``(call, cast)`` as ``ray_calls`` gives them, on the books themselves."""
    def call(method: str, *args):
        return getattr(books, method)(*args)
    return call, call


def run_nodes(c: int, samples: int, shifts: list[int]):
    """Each node's ``_closed_loop`` on its streams and books; the books, the merged settled run, the prompts sent."""
    driver = itertools.count(10 * SECOND, 1_000)        # the driver's timeline: each reading 1 us on
    lock = threading.Lock()

    def driver_now() -> int:
        with lock:
            return next(driver)
    n = len(shifts)
    plan = ClosedPlan(c, samples, 0.0, None)
    ps = prompts(samples + 2 * c)
    shards = make_closed_shards(plan, ps, [], n, TARGET, warmup=0, output_tokens=8, extra=None)
    books = LoopBooks(c, samples, len(ps), n)
    sent: dict[int, int] = {}  # id(record) -> its prompt's index
    results: dict[int, ShardRun] = {}
    t0_driver = driver_now() + 10_000  # a few readings ahead

    def node(k: int) -> None:
        shift = shifts[k]  # this node's clock + shift = the driver's timeline
        clock = lambda: driver_now() - shift  # noqa: E731

        def send(p: Prompt, t_due):
            t = clock()
            r = RequestRecord(t_send_ns=t, t_end_ns=t + 1)
            with lock:
                sent[id(r)] = int(p.user[1:])
            return r
        call, cast = direct(books)
        with NodeLoopState(call, cast, shards[k].plan, prompts=len(ps), nodes=n, shift_ns=shift,
                           clock=clock) as state:
            run = _closed_loop(send, ps, shards[k].plan, clock, lambda s: None, None, state=state,
                               t0=t0_driver - shift)
        out = ShardRun(k, 100 + k, f"node{k}", window_ns=run.window_ns, prompts_short=run.prompts_short)
        out.outcomes, out.ramp, out.drain = ([(sent[id(o)], o) for o in group]
                                             for group in (run.outcomes, run.ramp, run.drain))
        results[k] = shift_run(out, shift)
    threads = [threading.Thread(target=node, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    return books, settle(merge(shards, results, {}), books.books(), samples), sorted(sent.values())


@pytest.mark.parametrize("shifts", [[0, 0], [0, -3 * SECOND], [7 * SECOND, -2 * SECOND, 0]],
                         ids=["same-clock", "offset", "three-nodes"])
def test_nodes_on_the_books_count_the_samples_across_all_in_one_window(shifts):
    c, samples = 4 if len(shifts) == 2 else 6, 200
    books, run, sent = run_nodes(c, samples, shifts)
    b = books.books()
    assert len(run.outcomes) == samples and b["why"] == "samples"     # counted across the nodes, stopped at samples
    assert len(run.ramp) == c                                          # each stream's first request only
    assert len(sent) == len(set(sent)) == len(run.outcomes) + len(run.ramp) + len(run.drain)  # each prompt once
    assert b["started"] == c and b["ramp_end"] is not None
    # on the driver's timeline, every measured request inside the one window [ramp_end, t_stop]
    assert all(b["ramp_end"] <= o.t_send_ns and o.t_end_ns <= b["t_stop"] for o in run.outcomes)
    assert run.window_ns == max(o.t_end_ns for o in run.outcomes) - b["ramp_end"] > 0
    assert not run.prompts_short and run.stopped is None
    assert {w.index for w in run.workers} == set(range(len(shifts)))
    # rare calls: far fewer than the requests (leases of a share of what is left, counts in batches)
    assert b["calls"] < len(sent) // 2, (b["calls"], len(sent))


def test_the_last_prompts_run_out_on_a_node_and_the_books_say_short():
    books = LoopBooks(concurrency=2, samples=100, prompts=5, nodes=2)
    call, cast = direct(books)
    plan = ClosedPlan(2, 100, 0.0, None, (0,))
    a = NodeLoopState(call, cast, plan, prompts=5, nodes=2, shift_ns=0, clock=lambda: 5)
    b = NodeLoopState(call, cast, plan, prompts=5, nodes=2, shift_ns=0, clock=lambda: 5)
    assert (a.next, b.next) == (0, 1)                  # the first leases, one prompt a stream each
    a.started, b.started = 1, 1                        # both streams' first draws: full concurrency
    assert books.ramp_end == 5
    seen = []
    for _ in range(3):                                 # a node's later leases: what is left
        a.next = a.next + 1
        seen.append(a.next)
    assert seen == [2, 3, 4]
    a.next = a.next + 1
    assert a.next == 5                                 # none left: the loop's len(prompts)
    a.t_stop = 9
    assert books.books()["why"] == "short" and books.t_stop == 9


def test_a_node_counts_in_batches_and_learns_the_stop_from_its_report():
    books = LoopBooks(concurrency=2, samples=40, prompts=100, nodes=2)
    call, cast = direct(books)
    plan = ClosedPlan(2, 40, 0.0, None, (0,))
    st = NodeLoopState(call, cast, plan, prompts=100, nodes=2, shift_ns=1_000, clock=lambda: 50)
    calls = books.calls
    for _ in range(9):                                 # a batch: (40 - 0) // (2 x 2) = 10
        st.counted = st.counted + 1
    assert books.calls == calls and books.counted == 0 and st.counted == 9
    st.counted = st.counted + 1
    assert books.counted == 10 and books.latest == 1_050   # reported, its stamp on the driver's timeline
    assert st.counted == 10                               # the books' count, as the report answered it
    books.count(29, 2_000)                                 # the other node's: 39 of 40
    while not st.stop:                                     # this one reports its next batch: past 40, stopped
        st.counted = st.counted + 1
    assert books.counted >= 40 and books.why == "samples" and books.t_stop == 2_000  # the latest stamp
    assert st.t_stop == books.t_stop - 1_000               # on this node's clock


def test_the_watcher_tells_the_streams_of_full_concurrency_and_the_stop():
    books = LoopBooks(concurrency=2, samples=40, prompts=100, nodes=2)
    call, cast = direct(books)
    plan = ClosedPlan(2, 40, 0.0, None, (0,))
    with NodeLoopState(call, cast, plan, prompts=100, nodes=2, shift_ns=-500, clock=lambda: 0) as st:
        books.start(700)
        books.start(900)                                    # the other node's streams
        assert st.all_started.wait(10)
        assert st.ramp_end == 1_400                          # 900 on the driver's timeline, on this node's clock
        books.stop(3_000, "stop")
    assert st.stop and st.t_stop == 3_500


def test_lost_books_are_an_error_of_the_node():
    def call(method, *args):
        if method == "watch":
            raise ConnectionError("actor died")
        return (0, 1)
    plan = ClosedPlan(2, 40, 0.0, None, (0,))
    with pytest.raises(RuntimeError, match="books were lost: ConnectionError: actor died"):
        with NodeLoopState(call, call, plan, prompts=10, nodes=2, shift_ns=0, clock=lambda: 0) as st:
            assert st.all_started.wait(10)                   # a stream waiting on them is let go


def rec(t_send: int, t_end: int) -> RequestRecord:
    return RequestRecord(t_send_ns=t_send, t_end_ns=t_end)


def test_settle_moves_what_a_node_counted_late_or_beyond_the_samples_to_the_drain():
    run = LoadRun("closed")
    late = rec(150, 260)                                        # ended after t_stop: its node heard late
    run.outcomes = [rec(100, 120), rec(110, 200), late, rec(130, 140), rec(140, 190)]
    run.drain = [rec(195, 300)]
    out = settle(run, {"ramp_end": 90, "t_stop": 200, "why": "samples"}, samples=3)
    assert [(o.t_send_ns, o.t_end_ns) for o in out.outcomes] == [(100, 120), (130, 140), (140, 190)]
    assert [(o.t_send_ns, o.t_end_ns) for o in out.drain] == [(195, 300), (110, 200), (150, 260)]
    assert out.window_ns == 190 - 90 and not out.prompts_short   # to the last measured end


def test_settle_after_a_duration_keeps_the_window_to_t_stop_and_says_short_from_the_books():
    run = LoadRun("closed")
    run.outcomes = [rec(100, 120), Failure("timeout", "x")]      # a failure never stamped: inside
    out = settle(run, {"ramp_end": 90, "t_stop": 500, "why": "short"}, samples=10)
    assert len(out.outcomes) == 2 and out.window_ns == 410 and out.prompts_short


def test_settle_leaves_a_stopped_run_as_merged():
    run = LoadRun("closed", stopped="http_400")
    run.outcomes = [rec(100, 900)]
    assert settle(run, {"ramp_end": 90, "t_stop": 200, "why": "stop"}, samples=1).outcomes == run.outcomes


def test_settle_puts_a_failure_never_stamped_at_its_send_not_first_in_line_and_recounts_each_node():
    """An unstamped failure is not taken as the first to end (that would push out a record that ended
    inside the window, and lift the error rate); each node's request count is what settled."""
    from pytest_llm_latency.client.placement.processes.workers import WorkerInfo

    run = LoadRun("closed")

    def on(o, worker):
        if isinstance(o, Failure):
            return replace(o, worker=worker)
        o.worker = worker
        return o
    early = on(rec(100, 120), "1@a")
    unsent = on(Failure("timeout", "x"), "2@b")                 # no stamp at all: in line at the stop
    late_send = on(Failure("reset", "y", t_send_ns=195), "2@b")  # no end stamp: at its send
    run.outcomes = [early, unsent, on(rec(110, 150), "1@a"), late_send, on(rec(120, 190), "2@b")]
    run.workers = [WorkerInfo(0, "1@a", 2, None, None), WorkerInfo(1, "2@b", 3, None, None)]
    out = settle(run, {"ramp_end": 90, "t_stop": 200, "why": "samples"}, samples=3)
    assert out.outcomes[0] is early and len(out.outcomes) == 3
    assert unsent not in out.outcomes and late_send not in out.outcomes   # the three that ended first
    assert [(i.name, i.requests) for i in out.workers] == [("1@a", 2), ("2@b", 1)]
