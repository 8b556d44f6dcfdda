"""The asyncio driver of the pure ``Engine``: one coroutine runs engine steps in real time.

Step *k* ends at the absolute deadline ``t0 + sum(duration_i x time_scale, i <= k)``
(``loop.time()`` based), so the ~0.1-1 ms overshoot of each ``asyncio.sleep`` never
accumulates: a late wake-up only makes the next sleep shorter.  ``t0`` is re-anchored
to the clock when the engine goes idle, when a request arrives "after" a deadline that
is already past, and after a stall of more than ``RESYNC_S`` seconds.  With
``time_scale == 0`` no step sleeps (only ``sleep(0)`` to let the handlers run).
With ``jitter`` > 0 each step's duration is multiplied by ``physics.jitter_factor`` drawn
from one ``random.Random(jitter_seed)``: the same seed and request sequence give the same
timings, another seed an independent sample (what an A/A comparison needs).

Tokens are pushed, with their deadline time, into a per-request ``Sink`` that the HTTP
handler drains.  All server-side timings (``/metrics``, Ollama's durations) are computed
from these deadlines, i.e. modelled time x time_scale.
"""
from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from dataclasses import dataclass, field
from itertools import count

from .engine import Engine, EngineRequest, Step
from .physics import jitter_factor
from .metrics import EngineMetrics

RESYNC_S = 1.0


@dataclass(slots=True)
class TokenEvent:
    t: float            # loop.time() deadline at which the tokens were produced
    n: int              # tokens produced at t (1, or 1 + accepted drafts: one engine step's, one chunk)
    total: int          # tokens generated so far
    finished: bool = False
    reason: str | None = None


class Closed(Exception):
    """The server is stopping; the request will never finish."""


@dataclass(eq=False)
class RequestState:
    rid: int
    seq: EngineRequest
    arrival: float
    finish_reason: str
    admitted_at: float | None = None
    first_at: float | None = None
    last_at: float | None = None
    end_at: float | None = None
    cached_tokens: int = 0
    _items: deque = field(default_factory=deque)
    _waiter: asyncio.Future | None = None
    _closed: bool = False

    # -- sink ----------------------------------------------------------------------------
    def _push(self, item) -> None:
        self._items.append(item)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def next(self) -> TokenEvent:
        while not self._items:
            if self._closed:
                raise Closed("reference server is shutting down")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._items.popleft()
        if isinstance(item, Exception):
            raise item
        return item

    def next_nowait(self) -> TokenEvent | None:
        if self._items and not isinstance(self._items[0], Exception):
            return self._items.popleft()
        return None

    # -- server-side timings (seconds, modelled x time_scale) --------------------------------
    @property
    def queue_s(self) -> float:
        return max(0.0, (self.admitted_at or self.arrival) - self.arrival)

    @property
    def prefill_s(self) -> float:
        return max(0.0, (self.first_at or 0.0) - (self.admitted_at or self.arrival))

    @property
    def decode_s(self) -> float:
        return max(0.0, (self.end_at or 0.0) - (self.first_at or 0.0))

    @property
    def total_s(self) -> float:
        return max(0.0, (self.end_at or self.arrival) - self.arrival)


class Scheduler:
    def __init__(self, engine: Engine, *, time_scale: float, metrics: EngineMetrics | None = None,
                 jitter: float = 0.0, jitter_seed: int = 0):
        self.engine = engine
        self.time_scale = time_scale
        self.jitter = jitter                          # physics.jitter_factor: CV of each step's noise
        self._rng = random.Random(jitter_seed)
        self.metrics = metrics
        self.requests: dict[int, RequestState] = {}
        self._ids = count(1)
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self.pause: tuple[float, float] | None = None   # (at, seconds): the ``pause`` fault, once
        self._first_arrival: float | None = None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="reference-engine")

    async def stop(self) -> None:
        self._stopping = True
        if self._wake:
            self._wake.set()
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._close_all("reference server is shutting down")

    @classmethod
    def from_config(cls, config, model_name: str, *, kv_connector: bool = False,
                    prefix_caching: bool | None = None) -> "Scheduler":
        """An engine of ``config`` (a ``config.ReferenceConfig``), its ``/metrics`` (``kv_connector``: with the
        NIXL transfer histograms, a P/D pair's decode pool) and this driver; ``prefix_caching``: None, the config's."""
        engine = Engine(config.physics(), kv_pool_tokens=config.pool_tokens(), max_num_seqs=config.max_num_seqs,
                        block_size=config.block_size, chunked_prefill=config.chunked_prefill,
                        max_num_batched_tokens=config.batched_tokens(),
                        prefix_caching=config.prefix_caching if prefix_caching is None else prefix_caching,
                        speculation=config.speculation())
        metrics = EngineMetrics(model_name, running=lambda: engine.num_running, waiting=lambda: engine.num_waiting,
                                kv_usage=engine.kv_usage, prefix_queries=lambda: engine.prefix_queries,
                                prefix_hits=lambda: engine.prefix_hits, spec_tokens=config.spec_tokens,
                                kv_connector=kv_connector)
        return cls(engine, time_scale=config.time_scale, metrics=metrics, jitter=config.jitter,
                   jitter_seed=config.jitter_seed)

    def submit(self, prompt_len: int, max_tokens: int, target_tokens: int, finish_reason: str,
               hashes: tuple[int, ...] = (), slowdown: float = 1.0, computed: int = 0) -> RequestState:
        """Queue a request; raises ``engine.AdmissionError`` if it can never fit.  ``slowdown``: a
        constrained request's decode steps take that many times as long (``Step.seconds``); ``computed``:
        prompt tokens whose KV is already here (a P/D pair's decode pool: the shipped KV)."""
        rid = next(self._ids)
        seq = EngineRequest(rid=rid, prompt_len=prompt_len, max_tokens=max_tokens,
                            target_tokens=target_tokens, hashes=hashes, slowdown=slowdown, computed=computed)
        self.engine.add(seq)
        st = RequestState(rid=rid, seq=seq, arrival=asyncio.get_running_loop().time(),
                          finish_reason=finish_reason)
        self.requests[rid] = st
        if self._first_arrival is None:
            self._first_arrival = st.arrival
        assert self._wake is not None, "submit() after start()"
        self._wake.set()
        return st

    def abort(self, st: RequestState) -> None:
        """The client went away: free its slot and KV blocks, wake its handler."""
        if self.requests.pop(st.rid, None) is not None:
            self.engine.abort(st.rid)
        st._closed = True
        st._push(Closed("request aborted"))

    # -- the engine loop ---------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except BaseException as e:   # a bug: fail every request instead of hanging them
            self._close_all(f"reference engine loop failed: {e!r}")
            raise

    def _close_all(self, message: str) -> None:
        for st in list(self.requests.values()):
            st._closed = True
            st._push(Closed(message))
        self.requests.clear()

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        t: float | None = None
        while not self._stopping:
            if not self.engine.has_work():
                assert self._wake is not None
                self._wake.clear()
                await self._wake.wait()
                t = None
                continue
            now = loop.time()
            if self.pause is not None and self._first_arrival is not None \
                    and now >= self._first_arrival + self.pause[0]:
                seconds, self.pause = self.pause[1], None   # the engine stops once: every stream stalls
                await asyncio.sleep(seconds)
                t = None
                continue
            if t is None or self.time_scale == 0 or now - t > RESYNC_S:
                t = now
            step = self.engine.step()
            if step is None:
                continue
            # nothing is admitted before it arrived
            start = max([t] + [st.arrival for rid, _ in step.admitted if (st := self.requests.get(rid))])
            end = start + step.seconds * self.time_scale * jitter_factor(self._rng, self.jitter)
            self._on_admit(step, start)
            await asyncio.sleep(end - loop.time())  # a past deadline: sleep(0), a yield
            t = end
            self._deliver(step, end)

    def _on_admit(self, step: Step, start: float) -> None:
        for rid, cached in step.admitted:
            st = self.requests.get(rid)
            if st is None:
                continue
            st.admitted_at = start
            st.cached_tokens = cached
            if self.metrics:
                self.metrics.queue.observe(st.queue_s)
                self.metrics.prompt_tokens.inc(st.seq.prompt_len)

    def _deliver(self, step: Step, end: float) -> None:
        m = self.metrics
        finished = set(step.finished)
        if m and step.emitted:
            m.generation_tokens.inc(sum(step.tokens(rid) for rid in step.emitted))
            for drafted, accepted in step.drafts.values():
                m.spec_decode(drafted, accepted)
        for rid in step.emitted:
            st = self.requests.get(rid)
            if st is None:
                continue
            done = rid in finished
            if st.first_at is None:
                st.first_at = end
                if m:
                    m.ttft.observe(end - st.arrival)
            elif m and st.last_at is not None:
                m.itl.observe(end - st.last_at)
            st.last_at = end
            if done:
                st.end_at = end
                self.requests.pop(rid, None)
                if m:
                    m.e2e.observe(st.total_s)
                    m.prefill.observe(st.prefill_s)
                    m.decode.observe(st.decode_s)
                    m.finished(st.finish_reason)
            st._push(TokenEvent(end, step.tokens(rid), st.seq.generated, done, st.finish_reason if done else None))
