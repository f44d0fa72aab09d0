"""RunCohort: the mean run time with the runs still going counted by their time so far."""

from __future__ import annotations

import random

import pytest

from elasticityops.domain.headroom.run_times import RunCohort


def test_with_every_run_ended_it_is_the_plain_mean() -> None:
    runs: RunCohort[str] = RunCohort(window_s=1000, min_ended=1)
    for key, start, end in (("a", 0, 10), ("b", 5, 35), ("c", 10, 30)):
        runs.started(key, start)
        runs.ended(key, end)
    assert runs.mean_s(40) == pytest.approx((10 + 30 + 20) / 3)


def test_running_ones_add_their_time_so_far_over_the_ended_count() -> None:
    runs: RunCohort[str] = RunCohort(window_s=1000, min_ended=1)
    runs.started("short", 0)
    runs.ended("short", 10)
    runs.started("long", 0)
    # at 100: 10 s ended plus 100 s so far, over one ended run
    assert runs.mean_s(100) == pytest.approx(110)
    assert runs.mean_s(200) == pytest.approx(210)  # it grows while the long run goes on


def test_too_few_ended_runs_answer_none() -> None:
    runs: RunCohort[int] = RunCohort(window_s=1000, min_ended=3)
    for k in range(5):
        runs.started(k, 0)
    runs.ended(0, 5)
    runs.ended(1, 6)
    assert runs.mean_s(10) is None
    runs.ended(2, 7)
    assert runs.mean_s(10) == pytest.approx((5 + 6 + 7 + 10 + 10) / 3)


def test_a_dropped_run_counts_for_nothing_and_a_restart_replaces_the_open_run() -> None:
    runs: RunCohort[str] = RunCohort(window_s=1000, min_ended=1)
    runs.started("done", 0)
    runs.ended("done", 50)
    runs.started("preempted", 0)
    runs.dropped("preempted")
    assert runs.mean_s(100) == pytest.approx(50)
    runs.started("again", 0)
    runs.started("again", 80)  # restarted: only the second run is open
    assert runs.mean_s(100) == pytest.approx(50 + 20)
    runs.ended("again", 90)
    assert runs.mean_s(100) == pytest.approx((50 + 10) / 2)
    runs.ended("preempted", 99)  # no longer open: ignored
    assert runs.mean_s(100) == pytest.approx(30)


def test_runs_that_started_before_the_window_are_forgotten_ended_or_not() -> None:
    runs: RunCohort[str] = RunCohort(window_s=100, min_ended=1)
    runs.started("old-ended", 0)
    runs.ended("old-ended", 1000)  # a long run, ended
    runs.started("old-running", 10)
    runs.started("new", 150)
    runs.ended("new", 160)
    assert runs.mean_s(200) == pytest.approx(10)
    runs.ended("old-running", 210)  # forgotten already: ignored
    assert runs.mean_s(220) == pytest.approx(10)
    assert runs.mean_s(10_000) is None  # everything expired


@pytest.mark.parametrize("shape", ["exponential", "lognormal"])
def test_a_young_cluster_sees_the_true_mean_where_the_ended_ones_are_short(shape: str) -> None:
    # Poisson arrivals at 0.5/s with a 300 s mean run, watched at 1,200 s (4 mean runs old):
    # the ended runs' mean is well below 300, the cohort's close to it.
    rng = random.Random(7)
    runs: RunCohort[int] = RunCohort(window_s=7200, min_ended=100)
    now, t, k = 1200.0, 0.0, 0
    ended_times: list[float] = []
    while True:
        t += rng.expovariate(0.5)
        if t > now:
            break
        d = rng.expovariate(1 / 300) if shape == "exponential" else rng.lognormvariate(5.2, 0.9)
        runs.started(k, t)
        if t + d <= now:
            runs.ended(k, t + d)
            ended_times.append(d)
        k += 1
    true_mean = 300.0 if shape == "exponential" else 2.718281828 ** (5.2 + 0.9**2 / 2)
    ended_mean = sum(ended_times) / len(ended_times)
    estimate = runs.mean_s(now)
    assert estimate is not None
    assert ended_mean < 0.8 * true_mean
    assert abs(estimate - true_mean) < abs(ended_mean - true_mean) / 2


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="window_s"):
        RunCohort(window_s=0, min_ended=1)
    with pytest.raises(ValueError, match="window_s"):
        RunCohort(window_s=10, min_ended=0)
