"""The recommend search cut short (planner/size_search.py, planner/recommend.py): it finds what
trying every size finds, in fewer settings, in parallel or not."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from elasticityops.planner.distributions import fixed
from elasticityops.planner.parallel_runs import Setting, simulate_setting
from elasticityops.planner.recommend import recommend
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.size_search import smallest_meeting
from elasticityops.planner.synthetic import concurrency_profile
from elasticityops.planner.trace import Trace

TARGET = 10.0


def search(
    guess: int | None, hi: int, answer: int | None, curve: str = "linear"
) -> tuple[int | None, list[int]]:
    """Drive the search against a p95 that falls with size and meets the target from `answer`
    on (None: never); the sizes it tried."""

    def p95(size: int) -> float:
        if answer is None:
            return TARGET + 1 + (hi - size)
        gap = answer - size  # > 0: misses
        if curve == "steep":  # a knee: flat far below the answer, then a cliff
            return TARGET + 30.0 if gap > 3 else TARGET + gap * 0.5 if gap > 0 else TARGET - 0.1
        return TARGET + gap * 0.7 + (0.3 if gap > 0 else 0.0)

    tried: list[int] = []
    walk = smallest_meeting(TARGET, hi, guess)
    try:
        size = next(walk)
        while True:
            tried.append(size)
            size = walk.send(p95(size))
    except StopIteration as done:
        return done.value, tried


@pytest.mark.parametrize("curve", ["linear", "steep"])
@pytest.mark.parametrize("hi", [1, 2, 3, 7, 64, 350, 5000])
def test_finds_the_smallest_meeting_size_from_any_guess(hi: int, curve: str) -> None:
    answers: list[int | None] = [None, *range(1, min(hi, 40) + 1), hi // 2 or 1, hi]
    guesses = [None, -3, 0, 1, 2, 5, hi // 3, hi - 1, hi, hi + 10]
    for answer in answers:
        for guess in guesses:
            found, tried = search(guess, hi, answer, curve)
            assert found == answer, (guess, hi, answer, tried)
            assert all(1 <= t <= hi for t in tried)
            assert len(tried) == len(set(tried))
            if answer is not None and answer > 1:
                assert answer - 1 in tried  # the answer is shown tight: one less misses
            # never more than twice a bisection of [0, hi]
            assert len(tried) <= 2 * (1 + math.ceil(math.log2(hi + 1))) + 1, (guess, answer, tried)


def test_a_good_guess_costs_two_trials_and_a_near_one_a_few() -> None:
    assert search(40, 350, 40)[1] == [40, 39]
    assert len(search(37, 350, 40)[1]) <= 5
    assert len(search(45, 350, 40)[1]) <= 6
    # bisection from [0, hi] takes 1 + log2(350), 10
    assert len(search(1, 350, 3)[1]) <= 4
    assert len(search(None, 350, 259)[1]) <= 10


def small_trace() -> tuple[Trace, ClusterSettings]:
    rng = np.random.default_rng(3)
    arrivals = np.sort(rng.uniform(0, 6 * 3600, 1500))
    return Trace(arrivals, rng.exponential(300, 1500)), ClusterSettings(provision_delay=fixed(120.0))


def test_recommends_what_trying_every_setting_recommends() -> None:
    trace, settings = small_trace()
    target, windows = 5.0, (300.0, 600.0)
    _, conc = concurrency_profile(trace)
    hi = min(int(conc.max()), settings.autoscaled_cap)
    every = [
        Setting(family, size, w) for w in windows for family in ("baseline", "warm") for size in range(hi + 1)
    ] + [Setting("predictive", 0, w) for w in windows]
    summaries = [simulate_setting(trace, settings, target, s) for s in every]
    meeting = [(s, m) for s, m in zip(every, summaries, strict=True) if m.time_to_start_s.p95 <= target]
    best_setting, best = min(meeting, key=lambda sm: sm[1].cost_usd)

    rec = recommend(trace, settings, target, windows=windows, workers=1)
    assert rec.best is not None
    assert (rec.best.label, rec.best.summary) == (best.policy, best)
    assert rec.quota_gpus == math.ceil(best.peak_nodes * 1.2)
    assert len(rec.evaluated) < len(every) / 4
    assert best_setting.size > 0


def test_parallel_workers_recommend_the_same_as_one() -> None:
    trace, settings = small_trace()
    one = recommend(trace, settings, 5.0, windows=(300.0, 1200.0), workers=1)
    two = recommend(trace, settings, 5.0, windows=(300.0, 1200.0), workers=2)
    assert one.best is not None
    assert two.best is not None
    assert [c.summary for c in two.evaluated] == [c.summary for c in one.evaluated]
    assert two.best.summary == one.best.summary
    assert replace(two, evaluated=(), frontier=()) == replace(one, evaluated=(), frontier=())


def drive(
    family: str,
    table: dict[int, tuple[float, float]],
    hi: int,
    pool_cost_per_node: float = 0.0,
    guess: int = 1,
) -> list[int]:
    """Run one family's search against a table size -> (p95, cost); the sizes it asked for."""
    from elasticityops.planner.recommend import Candidate, family_search

    from .test_recommend import cand

    asked: list[int] = []
    walk = family_search(family, smallest_meeting(TARGET, hi, guess), TARGET, hi, pool_cost_per_node)
    try:
        size = next(walk)
        while True:
            asked.append(size)
            p95, cost = table[size]
            size = walk.send(Candidate(family, size, 300.0, cand(p95, cost).summary))
    except StopIteration:
        return asked


def test_the_search_goes_on_above_the_smallest_meeting_size_to_a_cheaper_one() -> None:
    # the shared GenTD26 window, scale-down 300 s: warm:1 meets, warm:3 is cheaper
    table = {0: (32.6, 3404.25), 1: (7.0, 3275.24), 2: (7.0, 3283.99), 3: (7.0, 3266.24), 4: (6.0, 3272.0)}
    table |= {k: (6.0 - k / 10, 3266.24 + 20 * (k - 4)) for k in range(5, 30)}
    asked = drive("warm", table, 29)
    assert 3 in asked  # a walk that stopped at the first size that costs more would miss it
    assert asked[-3:] == [4, 5, 6]  # three in a row no cheaper than warm:3: stop


def test_a_baseline_pool_stops_where_its_own_nodes_cost_more_than_the_cheapest() -> None:
    table = {0: (30.0, 100.0)} | {b: (max(0.0, 30.0 - b), 10.0 * b + 5.0) for b in range(1, 60)}
    # 20 meets at 205; 21 nodes alone cost 210: no need to try them
    assert drive("baseline", table, 59, pool_cost_per_node=10.0, guess=20) == [20, 19]
    assert drive("baseline", table, 59, pool_cost_per_node=0.0, guess=20) == [20, 19, 21, 22, 23]
