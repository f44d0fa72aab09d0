"""The bounds on what a predictive rule orders (`WarmBounds`), over arbitrary arrival streams fed
through the controller's own traffic bookkeeping (`TrafficLog`), whatever the cluster shows."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticityops.domain.headroom.sizing import (
    UNBOUNDED_POOL,
    ArrivalRateHeadroom,
    HeadroomObservation,
    PredictiveHeadroom,
    WarmBounds,
    demand_rate,
    erlang_pool,
    mean_run_time,
    size_headroom,
    unheld_supply,
)
from elasticityops.domain.headroom.traffic import ClusterPicture, TrafficLog, TrafficWindows

# (seconds after the previous event, new arrivals, of those waiting: how many start, of those
# running: how many end, and the cluster at the sizing that follows)
Step = tuple[float, int, int, int, ClusterPicture]

pictures = st.builds(
    ClusterPicture,
    free_nodes=st.integers(0, 400),
    provisioning_nodes=st.integers(0, 400),
    placeholders_running=st.integers(0, 400),
    placeholders_pending=st.integers(0, 400),
    lead_time_s=st.one_of(st.none(), st.floats(0.0, 2000.0)),
)
steps = st.lists(
    st.tuples(
        st.floats(0.0, 900.0, allow_nan=False),
        st.integers(0, 800),
        st.integers(0, 800),
        st.integers(0, 800),
        pictures,
    ),
    min_size=1,
    max_size=25,
)
bounds = st.builds(
    WarmBounds,
    floor=st.integers(0, 5),
    busy_ratio=st.sampled_from([0.5, 1.0, 2.0]),
    young_s=st.sampled_from([0.0, 120.0, 600.0]),
    young_ratio=st.sampled_from([0.0, 0.25, 0.5]),
    growth_per_min=st.sampled_from([0.1, 0.5, 2.0]),
)


def _policy(kind: str, b: WarmBounds, target_s: float) -> PredictiveHeadroom | ArrivalRateHeadroom:
    if kind == "predictive":
        return PredictiveHeadroom(target_wait_s=target_s, lead_time_s=460.0, bounds=b)
    return ArrivalRateHeadroom(target_wait_s=target_s, lead_time_s=460.0, bounds=b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=steps,
    b=bounds,
    kind=st.sampled_from(["predictive", "predictive-rate"]),
    target_s=st.sampled_from([0.0, 10.0, 60.0]),
)
def test_what_is_ordered_stays_within_what_was_observed(
    stream: list[Step], b: WarmBounds, kind: str, target_s: float
) -> None:
    policy = _policy(kind, b, target_s)
    t0 = 1_000_000.0
    log = TrafficLog(TrafficWindows(), late_after_s=target_s, started_at=t0)
    now = t0
    waiting: list[str] = []
    running: list[str] = []
    most_busy = 0  # the most busy GPUs at any sizing so far: the windows' means are no more
    previous = None
    n = 0
    for gap, arrive, start, end, picture in stream:
        now += gap
        for _ in range(arrive):
            n += 1
            log.admitted(f"r{n}", now)
            waiting.append(f"r{n}")
        for inv in waiting[: min(start, len(waiting))]:
            log.started(inv, now, now)
            running.append(inv)
        del waiting[: min(start, len(waiting))]
        for inv in running[: min(end, len(running))]:
            log.ended(inv, now)
        del running[: min(end, len(running))]
        obs = log.observe(now, 0.0, picture)
        most_busy = max(most_busy, obs.busy_nodes)
        wanted = size_headroom(obs, policy)
        held = picture.placeholders_running + picture.placeholders_pending
        assert 0 <= wanted <= policy.max_nodes
        young = now - t0 < b.young_s
        ratio = b.young_ratio if young else b.busy_ratio
        assert wanted <= b.floor + math.floor(ratio * most_busy), (wanted, most_busy, young)
        since = 60.0 if previous is None else min(60.0, now - previous)
        grown = math.ceil(b.growth_per_min * (obs.busy_nodes + held) * since / 60.0)
        assert wanted <= held + max(b.floor, grown)
        in_use = obs.busy_nodes or obs.pending_requests or obs.arrival_rate_slow_per_s
        lead = obs.lead_time_s if obs.lead_time_s is not None else policy.lead_time_s
        # free capacity that outlasts the lead time, as sized
        spare = (
            unheld_supply(obs, lead, demand_rate(obs, policy.surge_ratio, policy.fall_z))
            if isinstance(policy, PredictiveHeadroom)
            else 0
        )
        if in_use and target_s < lead and spare <= 0 and isinstance(policy, PredictiveHeadroom):
            assert wanted >= min(b.floor, policy.max_nodes)
        if not in_use:
            assert wanted == 0
        previous = now


@given(
    busy=st.integers(0, 5000),
    held=st.integers(0, 5000),
    rate=st.floats(0.0, 1000.0),
    history=st.one_of(st.none(), st.floats(0.0, 1e6)),
    run_s=st.one_of(st.none(), st.floats(0.001, 1e5)),
    trend=st.floats(-1.0, 1.0),
)
def test_any_observation_orders_at_most_the_floor_plus_the_busy(
    busy: int, held: int, rate: float, history: float | None, run_s: float | None, trend: float
) -> None:
    """Whatever the estimates say (rates, a trend, a run time of any size), the order is capped."""
    obs = HeadroomObservation(
        now_s=0.0,
        time_of_day_s=0.0,
        arrival_rate_per_s=rate,
        arrival_rate_slow_per_s=rate / 3.0,
        busy_nodes=busy,
        busy_mean_slow=float(busy),
        slow_window_s=1800.0,
        arrival_trend_per_s2=trend,
        run_time_mean_s=run_s,
        placeholders_pending=held,
        history_s=history,
    )
    policy = PredictiveHeadroom(target_wait_s=10.0, lead_time_s=460.0)
    young = history is None or history < policy.bounds.young_s
    assert size_headroom(obs, policy) <= 1 + (0 if young else busy)


def test_a_rate_too_small_to_divide_by_orders_within_bounds_at_once() -> None:
    """Found by the property above from a fresh database: a subnormal slow rate made the
    Little's-law run time infinite, the load NaN, and the Erlang pool's loop never ended (on
    the live controller, the event loop). Now it answers at once, within the bounds."""
    obs = HeadroomObservation(
        now_s=0.0,
        time_of_day_s=0.0,
        arrival_rate_per_s=2.2250738585072014e-308,
        arrival_rate_slow_per_s=7.4e-309,
        busy_nodes=295,
        busy_mean_slow=295.0,
        slow_window_s=1800.0,
        arrival_trend_per_s2=-0.93,
        run_time_mean_s=None,
        placeholders_pending=2383,
        history_s=None,
    )
    assert mean_run_time(obs) is None
    assert 0 <= size_headroom(obs, PredictiveHeadroom(target_wait_s=10.0, lead_time_s=460.0)) <= 1
    assert erlang_pool(math.nan, 0.0, 0.125) == 0
    assert erlang_pool(math.inf, 0.0, 0.125) == UNBOUNDED_POOL
