"""The one headroom sizing function."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from elasticityops.domain.headroom.sizing import (
    ArrivalRateHeadroom,
    HeadroomObservation,
    NoHeadroom,
    PredictiveHeadroom,
    ScheduledHeadroom,
    StaticBaseline,
    WarmBounds,
    WarmHeadroom,
    erlang_pool,
    nodes_needed,
    normal_ppf,
    poisson_quantile,
    run_time_for,
    size_headroom,
    trend_for,
    unheld_supply,
)


def obs(rate: float = 0.0, tod: float = 0.0, departures: float = 0.0) -> HeadroomObservation:
    """A long-watched cluster with 1,000 busy nodes, so that no bound of `WarmBounds` binds."""
    return HeadroomObservation(
        now_s=0.0,
        time_of_day_s=tod,
        arrival_rate_per_s=rate,
        departure_rate_per_s=departures,
        busy_nodes=1000,
        history_s=86400.0,
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


# ---- predictive (issue 15): a steady pool for the forecast load, less what is free anyway ----


def steady(
    rate: float = 0.4,
    run_s: float = 300.0,
    busy: int = 120,
    unheld: int = 0,
    held: int = 0,
    **fields: object,
) -> HeadroomObservation:
    """A cluster at a steady load: `unheld` free nodes no placeholder holds (they stay), `held`
    placeholders on nodes, a measured lead time of 300 s."""
    values: dict[str, object] = {
        "now_s": 7200.0,
        "time_of_day_s": 7200.0,
        "arrival_rate_per_s": rate,
        "busy_nodes": busy,
        "free_nodes": unheld + held,
        "placeholders_running": held,
        "arrival_rate_slow_per_s": rate,
        "busy_mean_slow": float(busy),
        "slow_window_s": 1800.0,
        "run_time_mean_s": run_s,
        "lead_time_s": 300.0,
        "history_s": 7200.0,
    }
    values.update(fields)
    return HeadroomObservation(**values)  # type: ignore[arg-type]


PREDICTIVE = PredictiveHeadroom(target_wait_s=10.0, lead_time_s=460.0)


def _erlang_c(c: int, a: float) -> float:
    """P(wait) in M/M/c from the textbook sum, independent of the recurrence under test."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize(("load", "w", "late"), [(5.0, 0.0, 0.2), (20.0, 0.05, 0.05), (60.0, 1 / 30, 0.1)])
def test_erlang_pool_is_the_smallest_pool_meeting_the_tail(load: float, w: float, late: float) -> None:
    c = erlang_pool(load, w, late)

    def tail(k: int) -> float:
        return _erlang_c(k, load) * math.exp(-(k - load) * w)

    assert c > load
    assert tail(c) <= late
    assert c - 1 <= load or tail(c - 1) > late


def test_predictive_zero_when_the_target_is_not_below_the_lead_time() -> None:
    assert size_headroom(steady(), PredictiveHeadroom(target_wait_s=300.0, lead_time_s=460.0)) == 0
    # the measured lead time wins over the configured one
    assert size_headroom(steady(lead_time_s=None), PredictiveHeadroom(300.0, 460.0)) > 0
    assert size_headroom(steady(lead_time_s=5.0), PredictiveHeadroom(10.0, 460.0)) == 0


def test_predictive_steady_load_holds_a_square_root_margin() -> None:
    # 120 erlangs: a pool of some sqrt(120) ~ 11 above the load, fewer than the old rule's ~40
    h = size_headroom(steady(), PREDICTIVE)
    assert 3 <= h <= 20
    old = size_headroom(obs(rate=0.4, departures=0.4), ArrivalRateHeadroom(10.0, 460.0))
    assert h < old


def test_predictive_is_monotone_in_the_arrival_rate() -> None:
    # 60 placeholders held already, so that the growth bound leaves room for 80 more
    sizes = [size_headroom(steady(rate=r, busy=100, held=60), PREDICTIVE) for r in (0.2, 0.3, 0.4, 0.5, 0.6)]
    assert sizes == sorted(sizes)
    assert sizes[-1] > sizes[0] + 50


def test_predictive_rises_ahead_of_a_rising_trend() -> None:
    flat = size_headroom(steady(), PREDICTIVE)
    rising = size_headroom(steady(arrival_trend_per_s2=0.1 / 3600), PREDICTIVE)
    falling = size_headroom(steady(arrival_trend_per_s2=-0.1 / 3600), PREDICTIVE)
    # +0.1/s per hour over half the slow window and the lead (1,200 s) is ~10 more erlangs
    assert rising >= flat + 8
    assert falling < flat


def test_predictive_counts_free_nodes_no_placeholder_holds() -> None:
    base = size_headroom(steady(), PREDICTIVE)
    assert size_headroom(steady(unheld=3), PREDICTIVE) == base - 3
    # held placeholders are what the answer is made of, so they do not lower it
    assert size_headroom(steady(held=3), PREDICTIVE) == base
    # nodes whose scale-down window runs out before a replacement could be ready (within the
    # 300 s lead) and that no arrival will reach first do not count: at this steady 0.4/s over
    # three free nodes each is reached every 7.5 s, so all three last; one running out now goes
    leaving = steady(unheld=3, scale_down_in_s=(20.0, 100.0, 400.0))
    assert size_headroom(leaving, PREDICTIVE) == base - 3
    assert size_headroom(steady(unheld=3, scale_down_in_s=(0.0, 100.0, 400.0)), PREDICTIVE) == base - 2
    # nodes on their way that no waiting pod will take count; those for waiting pods do not
    assert size_headroom(steady(provisioning_nodes=4, pending_requests=2), PREDICTIVE) == base - 2


def test_predictive_never_below_the_floor_and_within_max_nodes() -> None:
    floor = PREDICTIVE.bounds.floor
    assert floor == 1
    # more busy than the forecast needs, nothing free: the floor
    assert size_headroom(steady(busy=500), PREDICTIVE) == floor
    # the floor is warm capacity: free nodes that outlast the lead time are part of it
    assert size_headroom(steady(unheld=500), PREDICTIVE) == 0
    assert size_headroom(steady(busy=500, unheld=1, scale_down_in_s=(0.0,)), PREDICTIVE) == floor
    # a shape no request has reached lately holds none
    assert size_headroom(steady(busy=0, rate=0.0), PREDICTIVE) == 0
    no_floor = PredictiveHeadroom(10.0, 460.0, bounds=WarmBounds(floor=0))
    assert size_headroom(steady(busy=500), no_floor) == 0
    capped = PredictiveHeadroom(target_wait_s=10.0, lead_time_s=460.0, max_nodes=25)
    assert size_headroom(steady(rate=10.0, busy=50), capped) == 25


def _free(unheld: int, leaving_in: tuple[float, ...]) -> HeadroomObservation:
    return HeadroomObservation(
        now_s=0.0, time_of_day_s=0.0, arrival_rate_per_s=0.0, free_nodes=unheld, scale_down_in_s=leaving_in
    )


def test_free_nodes_last_the_lead_time_as_arrivals_reach_them_before_their_window_runs_out() -> None:
    # Three free nodes; two would go within the 300 s lead (in 20 and 100 s), one later.
    obs = _free(3, (20.0, 100.0, 400.0))
    assert unheld_supply(obs, 300.0, 0.0) == 1  # no arrivals: both go
    # kube-scheduler spreads arrivals over the free nodes: each one's chance to go is
    # exp(-rate x seconds left / free nodes): 0.94 + 0.72 at 0.01/s, 0.07 + 0.00 at 0.4/s
    assert unheld_supply(obs, 300.0, 0.01) == 1
    assert unheld_supply(obs, 300.0, 0.4) == 3
    # monotone in the rate, never above the free nodes, never below those that outlast the lead
    supplies = [unheld_supply(obs, 300.0, r) for r in (0.0, 0.001, 0.01, 0.03, 0.1, 1.0, 100.0)]
    assert supplies == sorted(supplies)
    assert min(supplies) >= 1
    assert max(supplies) <= 3
    # placeholders' nodes are the answer, not supply; nodes on their way count beyond demand
    held = replace(obs, free_nodes=5, placeholders_running=2)
    assert unheld_supply(held, 300.0, 0.0) == 1
    ordered = replace(obs, provisioning_nodes=4, pending_requests=1, placeholders_pending=1)
    assert unheld_supply(ordered, 300.0, 0.0) == 1 + 2


def test_predictive_follows_a_burst_but_not_a_blip() -> None:
    base = size_headroom(steady(), PREDICTIVE)
    blip = size_headroom(steady(arrival_rate_per_s=0.7), PREDICTIVE)  # < 2x the slow rate
    assert blip == base
    # A burst's forecast (10/s x 300 s = 3,000 erlangs) is far above the 120 busy: the order
    # grows by the growth bound each sizing (half the busy and held per minute), up to the busy.
    burst = steady(arrival_rate_per_s=10.0)
    assert nodes_needed(burst, PREDICTIVE, 300.0) > 2000
    assert size_headroom(burst, PREDICTIVE) == 60
    assert size_headroom(replace(burst, since_last_s=10.0), PREDICTIVE) == 10
    assert size_headroom(replace(burst, placeholders_pending=100, since_last_s=10.0), PREDICTIVE) == 119
    assert size_headroom(replace(burst, placeholders_pending=200), PREDICTIVE) == 121


def test_predictive_tightens_when_too_many_start_late_and_loosens_when_few_do() -> None:
    on_goal = size_headroom(steady(late_share=0.045), PREDICTIVE)
    assert size_headroom(steady(late_share=0.10), PREDICTIVE) > on_goal
    assert size_headroom(steady(late_share=0.01), PREDICTIVE) < on_goal
    # without a measure it sizes as if on the goal
    assert size_headroom(steady(), PREDICTIVE) == on_goal


def test_predictive_without_a_run_time_assumes_nothing_ends_within_the_lead() -> None:
    obs = steady(run_time_mean_s=None, busy_mean_slow=None, busy=10)
    assert nodes_needed(obs, PREDICTIVE, 300.0) == 10 + poisson_quantile(0.4 * 300.0, 0.95)
    # ... which the bounds do not trust beyond the floor plus the busy
    assert size_headroom(replace(obs, placeholders_pending=50), PREDICTIVE) == 1 + 10


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"surge_ratio": 0.5}, "surge_ratio"),
        ({"slack": 0.0}, "slack"),
        ({"slack": 30.0}, "slack"),
        ({"margin": 0.0}, "margin"),
        ({"gain": -1.0}, "gain"),
    ],
)
def test_predictive_rejects_bad_parameters(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PredictiveHeadroom(10.0, 460.0, **kwargs)  # type: ignore[arg-type]


def test_predictive_lets_go_on_a_fall_but_not_on_a_dip() -> None:
    # 10/s of 30 s runs, 250 busy: the slow rate is the peak's of a quarter of an hour ago
    peak = steady(rate=10.0, run_s=30.0, busy=250, held=60)
    dip = size_headroom(replace(peak, arrival_rate_per_s=9.5), PREDICTIVE)  # 1.2 sd of a 60 s count
    fall = size_headroom(replace(peak, arrival_rate_per_s=7.0), PREDICTIVE)  # 7 sd
    assert dip == size_headroom(peak, PREDICTIVE)
    assert fall < dip - 20


def test_predictive_takes_the_trend_of_the_shortest_window_it_can_trust() -> None:
    trends = ((1800.0, 0.002), (3600.0, 0.001), (7200.0, 0.0005))
    # 30 s runs: the half-hour trend's noise is small beside the load's spread
    assert trend_for(steady(arrival_trends=trends), 1360.0, 30.0, 0.25) == 0.002
    # 300 s runs: it is not, the hour's is
    assert trend_for(steady(arrival_trends=trends), 1360.0, 300.0, 0.25) == 0.001
    # nothing trusted: the long one the observation names
    assert (
        trend_for(steady(arrival_trends=trends, arrival_trend_per_s2=0.0004), 1360.0, 50000.0, 0.25) == 0.0004
    )
    # a ramp of short runs is led by the short window's trend
    ramp = steady(rate=4.0, run_s=25.0, busy=100, held=30, arrival_trends=((1800.0, 0.002), (7200.0, 0.0)))
    flat = replace(ramp, arrival_trends=((1800.0, 0.0), (7200.0, 0.0)))
    assert size_headroom(ramp, PREDICTIVE) > size_headroom(flat, PREDICTIVE) + 20


def test_predictive_takes_the_run_time_of_the_shortest_window_it_can_trust() -> None:
    # 11 requests a second of ~30 s: a load of ~330, trusted from 330 / 0.25^2 = 5,280 ended runs
    means = ((900.0, 28.5, 9_000), (1800.0, 30.0, 18_000), (7200.0, 34.0, 70_000))
    assert run_time_for(steady(run_time_means=means), 11.0, 0.25) == 28.5
    # the same load with a tenth of the runs measured: only the 2 hours hold enough
    few = ((900.0, 28.5, 900), (1800.0, 30.0, 1_800), (7200.0, 34.0, 7_000))
    assert run_time_for(steady(run_time_means=few), 11.0, 0.25) == 34.0
    # at a tenth of the rate the quarter-hour's 900 runs are enough (a load of ~31 needs 502)
    assert run_time_for(steady(run_time_means=few), 1.1, 0.25) == 28.5
    # none trusted, or none measured: the observation's own run time, then Little's law
    assert run_time_for(steady(run_time_means=few, run_s=40.0), 30.0, 0.25) == 40.0
    assert run_time_for(steady(run_s=40.0), 11.0, 0.25) == 40.0
    little = steady(rate=2.0, busy=60, run_time_mean_s=None)
    assert run_time_for(little, 2.0, 0.25) == pytest.approx(30.0)
    # on a plateau of short runs whose mix got shorter, the pool follows the recent run time
    plateau = steady(rate=11.0, run_s=34.0, busy=330, held=30)
    recent = replace(plateau, run_time_means=means)
    assert size_headroom(recent, PREDICTIVE) < size_headroom(plateau, PREDICTIVE) - 20
