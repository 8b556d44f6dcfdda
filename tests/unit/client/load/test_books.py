"""A closed loop's books, kept three ways (this process's threads, shared memory across worker
processes, a Ray node's view of the books actor), are one ``Books``: the loop reads and writes the
same names on each."""
from __future__ import annotations

import multiprocessing

from pytest_llm_latency.client.load.engine import Books, ClosedPlan, LoopState
from pytest_llm_latency.client.placement.processes.closed import SharedLoopState
from pytest_llm_latency.client.placement.ray.loop import LoopBooks, NodeLoopState


def _node_state(books: LoopBooks) -> NodeLoopState:
    def call(method: str, *args):
        return getattr(books, method)(*args)

    return NodeLoopState(call, lambda method, *args: getattr(books, method)(*args), ClosedPlan(2, 4),
                         prompts=8, nodes=1, shift_ns=0, clock=lambda: 100)


def test_every_placement_keeps_books_the_loop_can_use():
    books = LoopBooks(concurrency=2, samples=4, prompts=8, nodes=1)
    for state in (LoopState(2), SharedLoopState(multiprocessing.get_context("spawn"), 2), _node_state(books)):
        assert isinstance(state, Books), type(state).__name__
        with state.lock:
            assert (state.next, state.started, state.counted, state.ramp_end, state.t_stop, state.stop) == \
                (0, 0, 0, None, None, False)
            state.next += 1
            state.t_stop = 50
            assert state.next == 1 and state.stop and state.t_stop == 50


def test_something_else_is_not_books():
    class Half:
        lock = barrier = all_started = None
        next = started = counted = 0

    assert not isinstance(Half(), Books)
