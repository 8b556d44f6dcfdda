"""The reference target's seeded ``jitter``: its noise statistics (pure draws, no sleeps) and
that it reaches the served timings (time_scale 0 keeps it instant; the server's own deadlines
are read from /metrics-free state: the scheduler's step durations)."""
from __future__ import annotations

import math
import random
import statistics

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.targets.reference import physics as ph
from pytest_llm_latency.targets.reference.config import ReferenceConfig


@pytest.mark.parametrize("cv", [0.02, 0.05, 0.2])
def test_jitter_factor_has_mean_one_and_the_requested_cv(cv):
    rng = random.Random(1234)
    xs = [ph.jitter_factor(rng, cv) for _ in range(40_000)]
    mean = statistics.fmean(xs)
    sd = statistics.pstdev(xs)
    # standard error of the mean is cv/200; of the sd about cv/280 for a near-normal draw
    assert mean == pytest.approx(1.0, abs=5 * cv / 200)
    assert sd / mean == pytest.approx(cv, rel=0.05)
    assert min(xs) > 0


def test_jitter_factor_is_lognormal_log_mean_and_sigma():
    cv = 0.1
    rng = random.Random(7)
    logs = [math.log(ph.jitter_factor(rng, cv)) for _ in range(40_000)]
    sigma = math.sqrt(math.log1p(cv * cv))
    assert statistics.fmean(logs) == pytest.approx(-sigma * sigma / 2, abs=5 * sigma / 200)
    assert statistics.pstdev(logs) == pytest.approx(sigma, rel=0.03)
    # symmetric in log space: skewness of the logs near 0 (a gamma would be skewed)
    m = statistics.fmean(logs)
    skew = statistics.fmean([(x - m) ** 3 for x in logs]) / statistics.pstdev(logs) ** 3
    assert abs(skew) < 0.05


def test_jitter_off_draws_nothing_and_is_exactly_one():
    rng = random.Random(5)
    state = rng.getstate()
    assert ph.jitter_factor(rng, 0.0) == 1.0
    assert rng.getstate() == state


def test_same_seed_same_sequence_other_seed_different():
    a = [ph.jitter_factor(random.Random(3), 0.05) for _ in range(3)]
    r1, r2, r3 = random.Random(3), random.Random(3), random.Random(4)
    s1 = [ph.jitter_factor(r1, 0.05) for _ in range(50)]
    s2 = [ph.jitter_factor(r2, 0.05) for _ in range(50)]
    s3 = [ph.jitter_factor(r3, 0.05) for _ in range(50)]
    assert s1 == s2 and s1 != s3 and a[0] == s1[0]


def test_jitter_config_from_url_keys_and_validation():
    cfg = ReferenceConfig.from_strings({"jitter": "0.05", "jitter_seed": "9"}).validate()
    assert (cfg.jitter, cfg.jitter_seed) == (0.05, 9)
    assert "--jitter" in cfg.to_cli_args() and "--jitter-seed" in cfg.to_cli_args()
    assert ReferenceConfig().jitter == 0.0
    for bad in ("-0.1", "1.5", "nan"):
        with pytest.raises(ConfigError, match="jitter must be in"):
            ReferenceConfig.from_strings({"jitter": bad}).validate()


def _served_timings(jitter: float, seed: int, n_requests: int = 6) -> list[tuple[float, float]]:
    """(prefill_s, decode_s) of sequential requests through the real Scheduler.  These are the
    scheduler's own deadlines (sums of modelled step durations x time_scale x noise), not
    wall-clock readings, so they are exact whatever the machine's load."""
    import asyncio

    from pytest_llm_latency.targets.reference.engine import Engine
    from pytest_llm_latency.targets.reference.scheduler import Scheduler

    cfg = ReferenceConfig(jitter=jitter, jitter_seed=seed)

    async def run():
        sched = Scheduler(Engine(cfg.physics(), kv_pool_tokens=100_000), time_scale=1e-3,
                          jitter=jitter, jitter_seed=seed)
        sched.start()
        out = []
        try:
            for _ in range(n_requests):
                st = sched.submit(prompt_len=200, max_tokens=20, target_tokens=20, finish_reason="length")
                while not (await asyncio.wait_for(st.next(), 10)).finished:
                    pass
                out.append((st.prefill_s, st.decode_s))
        finally:
            await sched.stop()
        return out

    return asyncio.run(run())


def test_jitter_reaches_the_served_timings_reproducibly():
    exact = _served_timings(0.0, 0)
    cfg = ReferenceConfig()
    p = cfg.physics()
    assert exact[0][0] == pytest.approx(p.prefill_seconds(200) * 1e-3, rel=1e-6)
    assert len({round(d, 12) for _, d in exact}) == 1          # off: every request identical
    flat = lambda ts: [x for pair in ts for x in pair]  # noqa: E731
    a, b, c = (flat(_served_timings(0.05, s)) for s in (1, 1, 2))
    assert a == pytest.approx(b, rel=1e-9, abs=1e-12)          # same seed: same timings
    assert a != pytest.approx(c, rel=1e-6)                     # other seed: another sample
    prefills = a[0::2]
    assert len(set(prefills)) == len(prefills)                 # each prefill step drew its own factor
    # the TTFT noise is one step's factor: within 5 sigma of the exact value
    for x, (x0, _) in zip(prefills, exact):
        assert abs(math.log(x / x0)) < 5 * 0.05
