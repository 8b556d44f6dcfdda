"""The pure engine: batching, KV-pool admission, prefix cache hits, chunked prefill (no sockets, no sleeps)."""
from __future__ import annotations

import pytest

from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.targets.reference import physics as ph
from pytest_llm_latency.targets.reference.engine import (AdmissionError, Engine, EngineRequest, PrefixCache,
                                                 block_hashes)

P = ph.Physics.from_specs(catalog.hardware("h100-sxm"), catalog.model("llama-3.1-8b"),
                          decode_efficiency=1.0, prefill_efficiency=0.5)


def req(rid, prompt=100, max_tokens=10, target=None, ids=None, block=16):
    return EngineRequest(rid=rid, prompt_len=prompt, max_tokens=max_tokens,
                         target_tokens=target or max_tokens,
                         hashes=block_hashes(ids, block) if ids is not None else ())


def run(engine, limit=100_000):
    steps = []
    while engine.has_work() and len(steps) < limit:
        steps.append(engine.step())
    return steps


def test_single_request_prefill_then_one_token_per_step():
    e = Engine(P, kv_pool_tokens=100_000)
    e.add(req(1, prompt=100, max_tokens=5))
    steps = run(e)
    assert len(steps) == 5                        # prefill emits token 1, 4 decodes
    assert steps[0].prefill == [(1, 100, 0)] and steps[0].emitted == [1]
    assert steps[0].seconds == pytest.approx(P.prefill_seconds(100))
    for k, s in enumerate(steps[1:], start=1):
        assert s.decodes == [1] and s.emitted == [1]
        assert s.seconds == pytest.approx(P.decode_step_seconds([100 + k - 1]))
    assert steps[-1].finished == [1]
    assert e.reserved_blocks == 0 and not e.has_work()


def test_continuous_batching_joins_and_leaves():
    e = Engine(P, kv_pool_tokens=100_000)
    e.add(req(1, max_tokens=3))
    e.add(req(2, max_tokens=6))
    s1 = e.step()
    assert [a for a, _ in s1.admitted] == [1, 2] and sorted(s1.emitted) == [1, 2]
    e.step()
    s3 = e.step()
    assert s3.finished == [1]
    e.add(req(3, max_tokens=2))
    s4 = e.step()                                 # 2 decodes while 3 prefills, in one step
    assert s4.decodes == [2] and [r for r, _, _ in s4.prefill] == [3]
    assert s4.cost.tokens == 1 + 100


def test_batch_step_reads_weights_once():
    e = Engine(P, kv_pool_tokens=1_000_000)
    for i in range(32):
        e.add(req(i, prompt=200, max_tokens=3))
    e.step()
    s = e.step()
    assert len(s.decodes) == 32
    assert s.seconds == pytest.approx(P.decode_step_seconds([200] * 32))
    assert s.seconds < 1.1 * P.decode_step_seconds([200])


def test_max_num_seqs_limits_admission():
    e = Engine(P, kv_pool_tokens=1_000_000, max_num_seqs=8)
    for i in range(20):
        e.add(req(i, max_tokens=4))
    e.step()
    assert e.num_running == 8 and e.num_waiting == 12
    run(e)
    assert e.num_running == 0 and e.num_waiting == 0


def test_kv_pool_admission_waits_for_free_blocks():
    # pool of 20 blocks; each request needs ceil((100 + 60) / 16) = 10 blocks
    e = Engine(P, kv_pool_tokens=320, max_num_seqs=100)
    for i in range(3):
        e.add(req(i, prompt=100, max_tokens=60))
    s = e.step()
    assert [a for a, _ in s.admitted] == [0, 1] and e.num_waiting == 1
    assert e.reserved_blocks == 20
    assert 0 < e.kv_usage() <= 1
    while 2 not in [a for a, _ in s.admitted]:
        s = e.step()
        assert e.reserved_blocks <= e.total_blocks
    with pytest.raises(AdmissionError):
        e.add(req(9, prompt=300, max_tokens=100))


def test_reservation_uses_the_actual_output_length():
    e = Engine(P, kv_pool_tokens=320)
    e.add(req(1, prompt=100, max_tokens=100_000, target=60))   # fits: 160 tokens
    e.step()
    assert e.reserved_blocks == 10


def test_prefix_cache_hits_skip_the_shared_prefix():
    ids_a = list(range(3000)) + [9001, 9002]
    ids_b = list(range(3000)) + [9003, 9004, 9005]
    e = Engine(P, kv_pool_tokens=1_000_000, prefix_caching=True)
    e.add(req(1, prompt=len(ids_a), max_tokens=2, ids=ids_a))
    first = e.step()
    assert first.admitted == [(1, 0)]
    run(e)
    e.add(req(2, prompt=len(ids_b), max_tokens=2, ids=ids_b))
    second = e.step()
    cached = (3000 // 16) * 16                        # full blocks only
    assert second.admitted == [(2, cached)]
    assert second.prefill == [(2, len(ids_b) - cached, cached)]
    assert second.seconds < first.seconds / 5
    assert e.prefix_queries == len(ids_a) + len(ids_b) and e.prefix_hits == cached


def test_identical_prompt_still_computes_one_token():
    ids = list(range(64))
    e = Engine(P, kv_pool_tokens=10_000, prefix_caching=True)
    e.add(req(1, prompt=64, max_tokens=1, ids=ids))
    run(e)
    e.add(req(2, prompt=64, max_tokens=1, ids=ids))
    s = e.step()
    assert s.admitted == [(2, 63)] and s.prefill == [(2, 1, 63)]


def test_no_prefix_cache_when_disabled():
    ids = list(range(64))
    e = Engine(P, kv_pool_tokens=10_000, prefix_caching=False)
    for rid in (1, 2):
        e.add(req(rid, prompt=64, max_tokens=1, ids=ids))
        s = e.step()
        assert s.admitted == [(rid, 0)]
    assert e.prefix_queries == 0


def test_prefix_cache_lru_capacity():
    c = PrefixCache(capacity_blocks=2)
    c.insert([1, 2])
    assert c.match([1, 2]) == 2
    c.insert([3])
    assert len(c) == 2 and c.match([1]) == 0 and c.match([2, 3]) == 2
    assert block_hashes(list(range(40)), 16) == block_hashes(list(range(32)) + [7] * 8, 16)
    assert block_hashes([5] + list(range(31)), 16)[0] != block_hashes(list(range(32)), 16)[0]


def test_chunked_prefill_splits_a_long_prompt_and_keeps_decoding():
    e = Engine(P, kv_pool_tokens=1_000_000, chunked_prefill=True, max_num_batched_tokens=512)
    e.add(req(1, prompt=50, max_tokens=50))
    e.step()                                           # request 1 decoding from here on
    e.add(req(2, prompt=2000, max_tokens=3))
    chunks = []
    while True:
        s = e.step()
        assert s.cost.tokens <= 512
        assert 1 in s.decodes                          # the decode is never paused
        chunks += [(n, c) for rid, n, c in s.prefill if rid == 2]
        if 2 in s.emitted:
            break
    assert [n for n, _ in chunks] == [511, 511, 511, 467]
    assert [c for _, c in chunks] == [0, 511, 1022, 1533]


def test_without_chunking_a_long_prompt_stalls_one_step():
    e = Engine(P, kv_pool_tokens=1_000_000)
    e.add(req(1, prompt=50, max_tokens=50))
    e.step()
    normal = e.step().seconds
    e.add(req(2, prompt=2000, max_tokens=3))
    s = e.step()
    assert s.prefill == [(2, 2000, 0)] and 1 in s.decodes
    assert s.seconds > 5 * normal


def test_abort_frees_blocks():
    e = Engine(P, kv_pool_tokens=10_000, max_num_seqs=1)
    e.add(req(1, max_tokens=100))
    e.add(req(2, max_tokens=100))
    e.step()
    assert e.abort(2) and e.num_waiting == 0
    assert e.abort(1) and e.reserved_blocks == 0 and not e.has_work()
    assert not e.abort(3)


def test_bad_configuration():
    with pytest.raises(ValueError):
        Engine(P, kv_pool_tokens=8)
    with pytest.raises(ValueError):
        Engine(P, kv_pool_tokens=1000, chunked_prefill=True)
    e = Engine(P, kv_pool_tokens=1000)
    with pytest.raises(ValueError):
        e.add(req(1, max_tokens=5, target=6))
