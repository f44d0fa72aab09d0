"""A trace that starts at a peak: the predictive rule's windows hold a minute of data when 700
requests have come, and before its bounds it asked for the whole quota at t = 60 s (issue 42).
In the planner, on a synthetic start at a peak, on the real one (GenTD26, read from
../shared/traces when it is there), and over arbitrary small traces (Hypothesis)."""

from __future__ import annotations

import csv
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticityops.domain.headroom.sizing import PredictiveHeadroom, WaitTargetHeadroom, WarmBounds
from elasticityops.planner.distributions import parse_distribution
from elasticityops.planner.model import SimResult, simulate
from elasticityops.planner.policies import parse_policy
from elasticityops.planner.settings import ClusterSettings
from helpers.shared_traces import SCALED_GENTD26, shared_trace

PEAK_AT_S = 41_341.0  # 692 arrivals in the minute from here (2024-12-02 23:29 on the trace's clock)
FLOOR = WarmBounds().floor


def _synthetic_peak(seed: int = 0) -> tuple[list[float], list[float]]:
    """692 arrivals in the first minute, then 5.5 a second for half an hour; runs of ~30 s."""
    rng = random.Random(seed)
    arrivals = sorted(rng.uniform(0.0, 60.0) for _ in range(692))
    t = 60.0
    while t < 1800.0:
        t += rng.expovariate(5.5)
        arrivals.append(t)
    return arrivals, [rng.lognormvariate(3.2, 0.6) for _ in arrivals]


def _real_peak(span_s: float = 3600.0) -> tuple[list[float], list[float]]:
    arrivals: list[float] = []
    durations: list[float] = []
    with shared_trace(SCALED_GENTD26).open(newline="") as f:
        for row in csv.DictReader(f):
            a = float(row["arrival_s"])
            if PEAK_AT_S <= a < PEAK_AT_S + span_s:
                arrivals.append(a - PEAK_AT_S)
                durations.append(float(row["duration_s"]))
    order = sorted(range(len(arrivals)), key=arrivals.__getitem__)
    return [arrivals[k] for k in order], [durations[k] for k in order]


def _run(trace: tuple[list[float], list[float]], spec: str) -> SimResult:
    cluster = ClusterSettings(timeline_step_s=10.0)  # a sample at every sizing
    return simulate(*trace, cluster, parse_policy(spec, cluster).sizing)


def _assert_bounded(result: SimResult) -> None:
    """Each sizing: the floor at most for the first 600 s, then at most the floor plus the most busy
    nodes seen so far (the slow window's mean busy is no more than that)."""
    tl = result.timeline
    most_busy = 0
    for t, busy, headroom in zip(tl.t_s, tl.busy, tl.headroom, strict=True):
        most_busy = max(most_busy, busy)
        if t < 600.0:
            assert headroom <= FLOOR, (t, headroom)
        assert headroom <= FLOOR + most_busy, (t, headroom, most_busy)


def _mean(values: list[int]) -> float:
    return sum(values) / len(values)


@pytest.mark.parametrize("source", ["synthetic", "real"])
def test_a_trace_starting_at_a_peak_orders_in_proportion(source: str) -> None:
    trace = _synthetic_peak() if source == "synthetic" else _real_peak()
    assert sum(1 for a in trace[0] if a < 60.0) >= 690
    rule = _run(trace, "predictive:10")
    none = _run(trace, "none")
    _assert_bounded(rule)
    # Before the bounds: 5,000 warm (the quota) from t = 60 s, 3,509 ready nodes on average in
    # the first hour for 312 busy. Now about what no headroom gives: the backlog of the first
    # minutes is what orders the nodes, not the rule.
    assert max(rule.timeline.headroom) < 200
    assert _mean(rule.timeline.ready) <= 1.15 * _mean(none.timeline.ready)
    assert rule.peak_nodes <= 1.15 * none.peak_nodes


@st.composite
def _streams(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    n = draw(st.integers(1, 300))
    first_minute = draw(st.integers(0, n))
    gaps = draw(st.lists(st.floats(0.0, 120.0, allow_nan=False), min_size=n, max_size=n))
    arrivals: list[float] = []
    t = 0.0
    for k, g in enumerate(gaps):
        t += g / 1000.0 if k < first_minute else g  # a crowd in the first seconds, then anything
        arrivals.append(round(t, 3))
    durations = draw(st.lists(st.floats(1.0, 3000.0, allow_nan=False), min_size=n, max_size=n))
    return arrivals, durations


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace=_streams(),
    rule=st.sampled_from(["predictive:10", "predictive:0", "predictive-rate:10"]),
    delay=st.sampled_from(["fixed:120", "lognormal:median=240,p95=420"]),
)
def test_the_planner_never_orders_beyond_the_bounds(
    trace: tuple[list[float], list[float]], rule: str, delay: str
) -> None:
    cluster = ClusterSettings(timeline_step_s=10.0, provision_delay=parse_distribution(delay))
    policy = parse_policy(rule, cluster).sizing
    result = simulate(*trace, cluster, policy)
    assert isinstance(policy, WaitTargetHeadroom)
    assert isinstance(policy, PredictiveHeadroom) or policy.bounds.floor == 0
    floor = policy.bounds.floor
    most_busy = 0
    for t, busy, headroom in zip(
        result.timeline.t_s, result.timeline.busy, result.timeline.headroom, strict=True
    ):
        most_busy = max(most_busy, busy)
        assert headroom <= floor + (most_busy if t >= 600.0 else 0), (t, headroom, most_busy)
