"""Arrival schedules (core.spec.schedule): the statistics of each kind, seeded and reproducible."""
from __future__ import annotations

import statistics

import pytest

from pytest_llm_latency.core.spec.schedule import Arrival, gaps, offsets, planned_requests


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_poisson_mean_inter_arrival_within_5_percent_of_one_over_rate_over_1000_draws(seed):
    rate = 8.0
    g = gaps(Arrival(rate, "poisson"), 1000, seed)
    assert abs(statistics.fmean(g) - 1 / rate) <= 0.05 / rate
    # exponential: the standard deviation equals the mean (coefficient of variation 1)
    assert 0.85 < statistics.stdev(g) / statistics.fmean(g) < 1.15


def test_same_seed_same_schedule_other_seed_other_schedule():
    a = Arrival(5.0, "poisson")
    assert offsets(a, seed=3, n=200) == offsets(a, seed=3, n=200)
    assert offsets(a, seed=3, n=200) != offsets(a, seed=4, n=200)
    # a duration bound cuts the same sequence: its schedule is a prefix of the longer one
    by_time = offsets(a, seed=3, duration_s=10.0)
    assert by_time == offsets(a, seed=3, n=len(by_time))
    assert all(t < 10.0 for t in by_time) and by_time[0] == 0.0


def test_gamma_burstiness_shapes_the_variance_at_the_same_mean():
    rate = 4.0
    bursty = gaps(Arrival(rate, "gamma", 0.25), 4000, 1)
    smooth = gaps(Arrival(rate, "gamma", 4.0), 4000, 1)
    for g in (bursty, smooth):
        assert abs(statistics.fmean(g) - 1 / rate) <= 0.05 / rate
    # gamma with shape k: coefficient of variation 1/sqrt(k): 2.0 bursty, 0.5 smooth
    assert 1.8 < statistics.stdev(bursty) / statistics.fmean(bursty) < 2.2
    assert 0.45 < statistics.stdev(smooth) / statistics.fmean(smooth) < 0.55


def test_constant_arrivals_are_exactly_one_over_rate_apart():
    assert offsets(Arrival(4.0, "constant"), seed=0, n=5) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_bounds_and_planning():
    a = Arrival(10.0, "poisson")
    both = offsets(a, seed=0, n=5, duration_s=100.0)
    assert len(both) == 5                      # the request bound ends first
    assert len(offsets(a, seed=0, duration_s=30.0)) <= planned_requests(a, n=None, duration_s=30.0)
    with pytest.raises(ValueError, match="needs a bound"):
        offsets(a, seed=0)


@pytest.mark.parametrize("kw, msg", [({"rate": 0}, "rate"), ({"rate": 1, "kind": "uniform"}, "arrival"),
                                     ({"rate": 1, "kind": "gamma", "burstiness": -1}, "burstiness")])
def test_bad_arrivals_are_refused(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Arrival(**kw)
