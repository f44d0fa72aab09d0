"""Invariants over random traces and settings (Hypothesis)."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticityops.domain.headroom.sizing import NoHeadroom, ScheduledHeadroom, WarmHeadroom
from elasticityops.planner.distributions import fixed, parse_distribution
from elasticityops.planner.model import simulate
from elasticityops.planner.settings import ClusterSettings


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[float], list[float], ClusterSettings, object]:
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.floats(0, 400, allow_nan=False), min_size=n, max_size=n))
    arrivals = []
    t = 0.0
    for g in gaps:
        t += g
        arrivals.append(round(t, 3))
    durations = draw(st.lists(st.floats(0, 2000, allow_nan=False), min_size=n, max_size=n))
    baseline = draw(st.integers(0, 3))
    max_nodes = baseline + draw(st.integers(0 if baseline else 1, 6))
    cluster = ClusterSettings(
        baseline=baseline,
        max_nodes=max_nodes,
        node_pools=draw(st.integers(1, 3)),
        pool_size_limit=draw(st.integers(1, 4)),
        provision_delay=draw(
            st.sampled_from(
                [
                    fixed(0.0),
                    fixed(120.0),
                    parse_distribution("uniform:60,600"),
                    parse_distribution("lognormal:median=240,p95=420"),
                ]
            )
        ),
        scale_down_after_s=draw(st.sampled_from([0.0, 60.0, 600.0])),
        scale_down_delay_after_add_s=draw(st.sampled_from([0.0, 600.0])),
        node_delete_time_s=draw(st.sampled_from([0.0, 45.0])),
        stockout_probability=draw(st.sampled_from([0.0, 0.3])),
        preemption_rate_per_hour=draw(st.sampled_from([0.0, 2.0])),
        seed=draw(st.integers(0, 1000)),
    )
    if cluster.autoscaled_cap <= 0 and baseline == 0:
        cluster = ClusterSettings(max_nodes=1)
    policy = draw(
        st.sampled_from(
            [NoHeadroom(), WarmHeadroom(1), WarmHeadroom(3), ScheduledHeadroom(((0, 0), (3600, 2)))]
        )
    )
    return arrivals, durations, cluster, policy


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants(scenario: tuple[list[float], list[float], ClusterSettings, object]) -> None:
    arrivals, durations, cluster, policy = scenario
    r = simulate(arrivals, durations, cluster, policy)  # type: ignore[arg-type]
    for k, (a, d) in enumerate(zip(arrivals, durations, strict=True)):
        start, end, node = r.start_s[k], r.end_s[k], r.node[k]
        assert start >= a, "no request starts before it arrives"
        assert end >= start + d - 1e-6, "every request ends, after running its full duration"
        assert 0 <= node < len(r.node_created_s)
        assert r.node_ready_s[node] <= end - d + 1e-6, "the final run starts on a ready node"
        assert r.node_deleted_s[node] >= end - 1e-6, "a node outlives the request that ends on it"
        if r.restarts[k] == 0:
            assert abs(end - (start + d)) < 1e-6
    # never more nodes alive than the quota (the baseline included)
    events = sorted(
        [(c, 1) for c in r.node_created_s] + [(x, -1) for x in r.node_deleted_s if x != float("inf")],
        key=lambda e: (e[0], e[1]),
    )
    alive = peak = 0
    for _, step in events:
        alive += step
        peak = max(peak, alive)
    assert peak <= cluster.max_nodes
    assert r.peak_nodes <= cluster.max_nodes
    assert r.peak_nodes - cluster.baseline <= cluster.node_pools * cluster.pool_size_limit


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_requests_on_one_node_never_overlap(
    scenario: tuple[list[float], list[float], ClusterSettings, object],
) -> None:
    arrivals, durations, cluster, policy = scenario
    cluster = ClusterSettings(**{**cluster.__dict__, "preemption_rate_per_hour": 0.0})
    r = simulate(arrivals, durations, cluster, policy)  # type: ignore[arg-type]
    by_node: dict[int, list[tuple[float, float]]] = {}
    for start, end, node in zip(r.start_s, r.end_s, r.node, strict=True):
        by_node.setdefault(node, []).append((start, end))
    for runs in by_node.values():
        runs.sort()
        for (_, e1), (s2, _) in itertools.pairwise(runs):
            assert s2 >= e1 - 1e-6
