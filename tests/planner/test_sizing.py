"""The one headroom sizing function."""

from __future__ import annotations

import math

import pytest

from elasticityops.elasticity.sizing import (
    ArrivalRateHeadroom,
    HeadroomObservation,
    NoHeadroom,
    ScheduledHeadroom,
    StaticBaseline,
    WarmHeadroom,
    normal_ppf,
    poisson_quantile,
    size_headroom,
)


def obs(rate: float = 0.0, tod: float = 0.0, departures: float = 0.0) -> HeadroomObservation:
    return HeadroomObservation(
        now_s=0.0, time_of_day_s=tod, arrival_rate_per_s=rate, departure_rate_per_s=departures
    )


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param(NoHeadroom(), 0, id="none"),
        pytest.param(StaticBaseline(40), 0, id="static-is-a-pool-not-placeholders"),
        pytest.param(WarmHeadroom(7), 7, id="warm"),
    ],
)
def test_simple_policies(policy: object, expected: int) -> None:
    assert size_headroom(obs(rate=5.0), policy) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tod_h", "expected"),
    [(0.0, 5), (7.99, 5), (8.0, 50), (12.0, 50), (20.0, 5), (23.9, 5)],
)
def test_scheduled_wraps_round_midnight(tod_h: float, expected: int) -> None:
    policy = ScheduledHeadroom(((8 * 3600, 50), (20 * 3600, 5)))
    assert size_headroom(obs(tod=tod_h * 3600), policy) == expected


@pytest.mark.parametrize("table", [(), ((100, 1), (50, 2)), ((0, -1),), ((90_000, 1),)])
def test_scheduled_rejects_bad_tables(table: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ValueError, match="schedule"):
        ScheduledHeadroom(table)


def _poisson_cdf(k: int, mean: float) -> float:
    return sum(math.exp(-mean) * mean**j / math.factorial(j) for j in range(k + 1))


@pytest.mark.parametrize("mean", [0.05, 1.0, 3.7, 20.0, 120.0])
@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_poisson_quantile_is_smallest_h_meeting_the_tail(mean: float, q: float) -> None:
    h = poisson_quantile(mean, q)
    assert _poisson_cdf(h - 1, mean) >= q  # P(X >= h) <= 1 - q
    assert h == 0 or _poisson_cdf(h - 2, mean) < q if h >= 2 else True


def test_poisson_quantile_normal_branch_is_close() -> None:
    mean = 2000.0
    exact = mean + normal_ppf(0.95) * math.sqrt(mean)
    assert abs(poisson_quantile(mean, 0.95) - exact) <= 2


def test_normal_ppf() -> None:
    assert normal_ppf(0.5) == pytest.approx(0.0, abs=1e-9)
    assert normal_ppf(0.95) == pytest.approx(1.6448536, abs=1e-6)
    assert normal_ppf(0.01) == pytest.approx(-2.3263479, abs=1e-6)


def test_old_rate_rule_grows_with_rate_and_is_zero_when_target_exceeds_lead() -> None:
    policy = ArrivalRateHeadroom(target_wait_s=10.0, lead_time_s=460.0)
    sizes = [size_headroom(obs(rate=r), policy) for r in (0.0, 0.01, 0.1, 1.0)]
    assert sizes[0] == 0
    assert sizes == sorted(sizes)
    assert sizes[-1] > sizes[1]
    assert size_headroom(obs(rate=1.0), ArrivalRateHeadroom(target_wait_s=500.0, lead_time_s=460.0)) == 0
    assert size_headroom(obs(rate=100.0), ArrivalRateHeadroom(10.0, 460.0, max_nodes=30)) == 30


def test_old_rate_rule_counts_departures_as_freed_nodes() -> None:
    policy = ArrivalRateHeadroom(target_wait_s=10.0, lead_time_s=400.0)
    no_departures = size_headroom(obs(rate=0.5), policy)
    steady = size_headroom(obs(rate=0.5, departures=0.5), policy)
    assert steady < no_departures
    # steady state: only the fluctuation of arrivals minus departures, sqrt(2 * 200) * 1.645 ~ 33
    assert steady == pytest.approx(1.645 * math.sqrt(400.0), abs=2)
