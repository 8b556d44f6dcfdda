"""The engine's scheduling state machine: admission, KV pool, prefix cache, chunked prefill.

Pure: no I/O, no clock, no asyncio.  ``Engine.step()`` plans one engine step exactly
like vLLM V1's scheduler and returns what happens in it plus its modelled duration
(``physics.Physics.step``); the asyncio driver (``scheduler.py``) sleeps for that
duration x time_scale and then delivers the step's tokens.

The step policy (admission, KV reservation, token budget, prefix caching) is
described in docs/servers.md#scheduling.
"""
from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Sequence

from .physics import Physics, StepCost
from .speculation import Drafting, Speculation


def block_hashes(token_ids: Sequence[int], block_size: int = 16) -> tuple[int, ...]:
    """Chained hashes of the *full* blocks of a prompt (a partial tail block is not cached)."""
    out = []
    parent = 0x9E3779B9
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start:start + block_size])))
        out.append(parent)
    return tuple(out)


class PrefixCache:
    """LRU set of block hashes with a capacity in blocks."""

    def __init__(self, capacity_blocks: int):
        self.capacity = max(0, capacity_blocks)
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def match(self, hashes: Sequence[int]) -> int:
        """Number of leading blocks present (refreshing them in the LRU order)."""
        hits = 0
        for h in hashes:
            if h not in self._blocks:
                break
            self._blocks.move_to_end(h)
            hits += 1
        return hits

    def insert(self, hashes: Sequence[int]) -> None:
        for h in hashes:
            self._blocks[h] = None
            self._blocks.move_to_end(h)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)


@dataclass
class EngineRequest:
    """One request inside the engine.  ``target_tokens`` <= ``max_tokens`` is the length
    the model will produce (decided by the caller: EOS point, ignore_eos, faults)."""

    rid: int
    prompt_len: int
    max_tokens: int
    target_tokens: int
    hashes: tuple[int, ...] = ()
    slowdown: float = 1.0      # a constrained (structured-output) request: its decode steps x this
    computed: int = 0          # prompt tokens whose KV exists (cached ones included)
    cached: int = 0            # prompt tokens served by the prefix cache
    generated: int = 0
    reserved_blocks: int = 0
    finished: bool = False

    @property
    def prefilling(self) -> bool:
        return self.computed < self.prompt_len


@dataclass
class Step:
    """What one engine step did.  ``seconds`` is its modelled (unscaled) duration: the roofline
    ``cost.seconds`` x ``slowdown`` (the largest ``EngineRequest.slowdown`` of its decodes: the batch
    waits for the grammar masks of its constrained requests before sampling)."""

    cost: StepCost
    admitted: list[tuple[int, int]] = field(default_factory=list)   # (rid, cached tokens)
    prefill: list[tuple[int, int, int]] = field(default_factory=list)  # (rid, n, c)
    decodes: list[int] = field(default_factory=list)                # rids
    emitted: list[int] = field(default_factory=list)                # rids with new tokens
    finished: list[int] = field(default_factory=list)
    drafts: dict[int, tuple[int, int]] = field(default_factory=dict)  # rid -> (drafted, accepted)
    slowdown: float = 1.0

    @property
    def seconds(self) -> float:
        return self.cost.seconds * self.slowdown

    def tokens(self, rid: int) -> int:
        """Tokens ``rid`` emitted in this step: 1, plus its accepted drafts."""
        return 1 + self.drafts.get(rid, (0, 0))[1]


_ZERO = StepCost(tokens=0, flops=0.0, bytes=0.0, compute_s=0.0, memory_s=0.0)


class AdmissionError(ValueError):
    """A request can never run (larger than the whole KV pool)."""


class Engine:
    def __init__(self, physics: Physics, *, kv_pool_tokens: int, max_num_seqs: int = 256,
                 block_size: int = 16, chunked_prefill: bool = False,
                 max_num_batched_tokens: int | None = None, prefix_caching: bool = False,
                 speculation: Speculation | None = None):
        if kv_pool_tokens < block_size:
            raise ValueError(f"kv_pool_tokens {kv_pool_tokens} is smaller than one block")
        if chunked_prefill and (max_num_batched_tokens or 0) < 1:
            raise ValueError("chunked prefill needs max_num_batched_tokens >= 1")
        self.physics = physics
        self.block_size = block_size
        self.total_blocks = kv_pool_tokens // block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens if chunked_prefill else None
        self.cache = PrefixCache(self.total_blocks) if prefix_caching else None
        self.waiting: deque[EngineRequest] = deque()
        self.running: list[EngineRequest] = []
        self.reserved_blocks = 0
        self.prefix_queries = 0      # tokens
        self.prefix_hits = 0         # tokens
        self.drafting = Drafting(speculation) if speculation is not None else None

    # -- bookkeeping -----------------------------------------------------------------
    def blocks_needed(self, prompt_len: int, output_tokens: int) -> int:
        return -(-(prompt_len + output_tokens) // self.block_size)

    def add(self, seq: EngineRequest) -> None:
        if not 1 <= seq.target_tokens <= seq.max_tokens:
            raise ValueError("target_tokens must be in [1, max_tokens]")
        if self.blocks_needed(seq.prompt_len, seq.target_tokens) > self.total_blocks:
            raise AdmissionError(
                f"request needs {seq.prompt_len + seq.target_tokens} tokens of KV cache but the "
                f"pool holds {self.total_blocks * self.block_size}")
        self.waiting.append(seq)

    def abort(self, rid: int) -> bool:
        for queue in (self.waiting, self.running):
            for seq in queue:
                if seq.rid == rid:
                    self._release(seq)  # a waiting one has reserved nothing
                    queue.remove(seq)
                    return True
        return False

    def _release(self, seq: EngineRequest) -> None:
        self.reserved_blocks -= seq.reserved_blocks
        seq.reserved_blocks = 0

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def kv_usage(self) -> float:
        """Fraction of KV blocks holding computed tokens (``vllm:kv_cache_usage_perc``)."""
        used = sum(-(-(s.computed + max(0, s.generated - 1)) // self.block_size)
                   for s in self.running)
        return used / self.total_blocks

    # -- one step ----------------------------------------------------------------------
    def step(self) -> Step | None:
        """Plan and apply one step; ``None`` when there is nothing to do."""
        if not self.has_work():
            return None
        budget: float = self.max_num_batched_tokens or math.inf  # tokens left in the step (inf: not chunked)
        step = Step(cost=_ZERO)
        decode_ctx: list[int] = []
        drafts: list[int] = []
        prefill_seqs: list[tuple[EngineRequest, int]] = []

        for seq in self.running:                          # 1. decodes
            if not seq.prefilling and budget > 0:
                decode_ctx.append(seq.prompt_len + seq.generated - 1)
                step.decodes.append(seq.rid)
                step.slowdown = max(step.slowdown, seq.slowdown)
                d = self.drafting.plan(seq.target_tokens - seq.generated, budget) if self.drafting else 0
                drafts.append(d)
                budget -= 1 + d
        for seq in self.running:                          # 2. unfinished prefills
            if seq.prefilling and budget > 0:
                n = self._chunk(seq, budget)
                prefill_seqs.append((seq, n))
                budget -= n
        while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:   # 3. admission
            seq = self.waiting[0]
            need = self.blocks_needed(seq.prompt_len, seq.target_tokens)
            if self.reserved_blocks + need > self.total_blocks:
                break
            self.waiting.popleft()
            self.reserved_blocks += need
            seq.reserved_blocks = need
            self._match_prefix(seq)
            self.running.append(seq)
            step.admitted.append((seq.rid, seq.cached))
            n = self._chunk(seq, budget)
            prefill_seqs.append((seq, n))
            budget -= n

        step.prefill = [(seq.rid, n, seq.computed) for seq, n in prefill_seqs]
        chunks = [(n, c) for _, n, c in step.prefill]
        step.cost = self.physics.step(decode_ctx, chunks, drafts if self.drafting else ())
        self._apply(step, prefill_seqs, drafts)
        return step

    def _chunk(self, seq: EngineRequest, budget: float) -> int:
        return int(min(seq.prompt_len - seq.computed, budget))  # budget > 0 is whole or inf

    def _match_prefix(self, seq: EngineRequest) -> None:
        if self.cache is None:
            return
        hits = self.cache.match(seq.hashes) * self.block_size
        seq.cached = min(hits, seq.prompt_len - 1)
        seq.computed = seq.cached
        self.prefix_queries += seq.prompt_len
        self.prefix_hits += seq.cached

    def _apply(self, step: Step, prefill_seqs: list[tuple[EngineRequest, int]], drafts: list[int]) -> None:
        by_rid = {s.rid: s for s in self.running}
        for rid, d in zip(step.decodes, drafts):
            seq = by_rid[rid]
            if d and self.drafting is not None:
                step.drafts[rid] = (d, self.drafting.verify(d))
            seq.generated += step.tokens(rid)
            step.emitted.append(rid)
        for seq, n in prefill_seqs:
            seq.computed += n
            if not seq.prefilling:
                seq.generated = 1
                step.emitted.append(seq.rid)
                if self.cache is not None:
                    self.cache.insert(seq.hashes)
        still = []
        for seq in self.running:
            if seq.generated >= seq.target_tokens:
                seq.finished = True
                self._release(seq)
                step.finished.append(seq.rid)
            else:
                still.append(seq)
        self.running = still
