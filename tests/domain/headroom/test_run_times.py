"""RunCohort: the mean run time with the runs still going counted by their time so far."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_the_shares_of_the_window_are_each_measured_as_a_window_of_their_own() -> None:
    runs: RunCohort[str] = RunCohort(window_s=1000, min_ended=1, shares=(0.1, 1.0))
    runs.started("old", 0)
    runs.ended("old", 500)
    runs.started("new", 950)
    runs.ended("new", 960)
    # the last 100 s hold the new run only; the whole window both
    assert runs.means(1000) == ((100.0, 10.0, 1), (1000.0, 255.0, 2))
    assert runs.mean_s(1000) == pytest.approx(255.0)
    runs.started("running", 990)  # counts for the time it has run, in both
    assert runs.means(1000) == ((100.0, 20.0, 1), (1000.0, 260.0, 2))
    # at 1,200 the old run has left both windows, the new and the running one only the short one
    assert runs.means(1200) == ((1000.0, 10.0 + 210.0, 1),)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["start", "end", "drop", "look"]), st.integers(0, 12), st.floats(0, 400)),
        max_size=120,
    )
)
def test_measured_together_the_windows_agree_with_one_cohort_each(
    steps: list[tuple[str, int, float]],
) -> None:
    shares = (0.125, 0.25, 0.5, 1.0)
    together: RunCohort[int] = RunCohort(window_s=800, min_ended=2, shares=shares)
    apart = [RunCohort[int](window_s=800 * f, min_ended=2) for f in shares]
    now = 0.0
    for op, key, step in steps:
        now += step
        for runs in (together, *apart):
            if op == "start":
                runs.started(key, now)
            elif op == "end":
                runs.ended(key, now)
            elif op == "drop":
                runs.dropped(key)
        if op == "look":
            expected = [
                (800 * f, m) for f, c in zip(shares, apart, strict=True) if (m := c.mean_s(now)) is not None
            ]
            got = [(w, m) for w, m, _ in together.means(now)]
            assert [w for w, _ in got] == [w for w, _ in expected]
            assert [m for _, m in got] == pytest.approx([m for _, m in expected], rel=1e-9, abs=1e-6)
            assert together.mean_s(now) == apart[-1].mean_s(now)


def test_shares_are_checked() -> None:
    with pytest.raises(ValueError, match="shares"):
        RunCohort(window_s=10, min_ended=1, shares=(0.5,))
    with pytest.raises(ValueError, match="shares"):
        RunCohort(window_s=10, min_ended=1, shares=(0.0, 1.0))
