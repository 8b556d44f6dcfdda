"""A prefill/decode pair behind one port (``pd_link=``): the reference target as a disaggregated deployment.

A request is prefilled by the prefill engine (as vLLM's P/D proxy sends it: ``max_tokens`` 1, its one
token not streamed), its prompt's KV cache (``physics.Physics.kv_bytes``) then crosses the simulated link
to the decode engine -- one transfer at a time, first come first served, each taking
``physics.Physics.kv_transfer_seconds`` x ``time_scale`` once the link is free -- and the decode engine,
holding the shipped KV of all but the last prompt token (as vLLM recomputes it), runs its first step
(the first token) and decodes the rest.  The client's TTFT is prefill queue + prefill + transfer (with
any wait for the link) + decode queue + the first decode step.

Each pool serves its own ``/metrics`` in vLLM's names: ``/prefill/metrics`` and ``/decode/metrics`` on the
server's port; the decode pool's include the NIXL connector's ``vllm:nixl_xfer_time_seconds`` (post to
completion: a wait for the link counts, as a transfer posted on a busy NIC takes longer) and
``vllm:nixl_bytes_transferred``, observed where vLLM observes them (the pool that reads the KV).
``/metrics`` answers 404, as a P/D proxy has none.  ``ReferenceServer`` uses a ``DisaggPair`` where it
would use a ``Scheduler``: the handlers see the same ``submit`` / ``abort`` and request states.
"""
from __future__ import annotations

import asyncio
import contextlib

from .config import POOL_PATHS  # noqa: F401 - where the pools' /metrics are served
from .scheduler import Closed, RequestState, Scheduler


class DisaggPair:
    """Two engines and the link between them, driven like one ``Scheduler``."""

    def __init__(self, config, model_name: str):
        self.link = config.link()
        self.time_scale = config.time_scale
        self.physics = config.physics()
        self.prefill = Scheduler.from_config(config, model_name)
        self.decode = Scheduler.from_config(config, model_name, kv_connector=True, prefix_caching=False)
        self.metrics = {"prefill": self.prefill.metrics, "decode": self.decode.metrics}
        self._link_free_at = 0.0   # loop time the link finishes the transfers it already has
        self._tasks: dict[int, asyncio.Task] = {}
        self._fronts: dict[int, RequestState] = {}
        self._pools: dict[int, list[RequestState]] = {}
        self.transfers = 0

    # -- what the server calls on a scheduler ---------------------------------------------------
    @property
    def pause(self):
        return self.decode.pause

    @pause.setter
    def pause(self, value) -> None:  # an engine fault: the decode pool stalls the streams
        self.decode.pause = value

    def start(self) -> None:
        self.prefill.start()
        self.decode.start()

    async def stop(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await self.prefill.stop()
        await self.decode.stop()
        for front in list(self._fronts.values()):
            _close(front, "reference server is shutting down")
        self._fronts.clear()

    def submit(self, prompt_len: int, max_tokens: int, target_tokens: int, finish_reason: str,
               hashes: tuple[int, ...] = (), slowdown: float = 1.0) -> RequestState:
        """Queue on the prefill pool (``engine.AdmissionError`` if it can never fit) and return the
        state the handler streams from; the rest runs in a task."""
        p = self.prefill.submit(prompt_len, 1, 1, "length", hashes)
        front = RequestState(rid=p.rid, seq=p.seq, arrival=p.arrival, finish_reason=finish_reason)
        self._fronts[p.rid] = front
        self._pools[p.rid] = [p]
        self._tasks[p.rid] = asyncio.get_running_loop().create_task(
            self._run(front, p, prompt_len, max_tokens, target_tokens, finish_reason, slowdown),
            name=f"reference-pd-{p.rid}")
        return front

    def abort(self, st: RequestState) -> None:
        """The client went away: free its slots on both pools and stop its task."""
        for pool_state, sched in zip(self._pools.pop(st.rid, []), (self.prefill, self.decode)):
            sched.abort(pool_state)
        task = self._tasks.pop(st.rid, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._fronts.pop(st.rid, None)
        _close(st, "request aborted")

    # -- one request's way through the pair -----------------------------------------------------
    async def _run(self, front: RequestState, p: RequestState, prompt_len: int, max_tokens: int, target: int,
                   reason: str, slowdown: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            done = await p.next()                     # the prefill's one token: its KV is computed
            front.admitted_at, front.cached_tokens = p.admitted_at, p.cached_tokens
            start = max(done.t, self._link_free_at)   # FIFO: after the transfers ahead of it
            end = start + self.physics.kv_transfer_seconds(prompt_len, self.link.gb_s) * self.time_scale
            self._link_free_at = end
            await asyncio.sleep(max(0.0, end - loop.time()))
            self.transfers += 1
            assert self.decode.metrics is not None  # from_config: every pool has its /metrics
            self.decode.metrics.transferred(end - done.t, self.physics.kv_bytes(prompt_len))
            d = self.decode.submit(prompt_len, max_tokens, target, reason, slowdown=slowdown,
                                   computed=prompt_len - 1)
            self._pools.setdefault(front.rid, [p]).append(d)
            while True:
                ev = d.next_nowait() or await d.next()
                front.first_at = front.first_at if front.first_at is not None else ev.t
                front.last_at = ev.t
                if ev.finished:
                    front.end_at = ev.t
                front._push(ev)
                if ev.finished:
                    break
        except Closed as e:
            _close(front, str(e))
        except ValueError as e:  # the decode pool refused it (engine.AdmissionError): never after a fit prefill
            _close(front, f"decode pool refused the request: {e}")
        finally:
            self._tasks.pop(front.rid, None)
            self._pools.pop(front.rid, None)
            self._fronts.pop(front.rid, None)


def _close(st: RequestState, message: str) -> None:
    if not st._closed:
        st._closed = True
        with contextlib.suppress(Exception):
            st._push(Closed(message))
