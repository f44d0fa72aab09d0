"""The engine's exact output for fixed small traces, pinned: a change to `simulate` that is meant to
keep its behaviour (a refactor, a speed-up) must leave every number here as it is, to the last
bit. The scenarios between them take every branch: waits, baseline and warm nodes, placeholders
grown and dropped, predictive sizing, quota hits, stockouts, provisioning time-outs, spot
preemptions of busy, warm and empty nodes, deletions in flight, events on a scan's instant and
the compaction of a long queue of waiting requests.
If a change is meant to alter behaviour, rerun and re-pin, saying why in the commit."""

from __future__ import annotations

import dataclasses
import hashlib
import random

import pytest

from elasticityops.elasticity.sizing import (
    HeadroomPolicy,
    NoHeadroom,
    PredictiveHeadroom,
    ScheduledHeadroom,
    WarmHeadroom,
)
from elasticityops.planner.distributions import parse_distribution
from elasticityops.planner.model import SimResult, simulate
from elasticityops.planner.settings import ClusterSettings

Trace = tuple[list[float], list[float]]


def _trace(seed: int, n: int = 400) -> Trace:
    """Sparse arrivals with a burst of 60 in every 150; millisecond times, so some fall on scans."""
    rng = random.Random(seed)
    t = 0.0
    arrivals: list[float] = []
    durations: list[float] = []
    for k in range(n):
        t += rng.random() * (1.0 if k % 150 < 60 else 40.0)
        arrivals.append(round(t, 3))
        durations.append(round(30.0 + rng.random() * 900.0, 3))
    return arrivals, durations


def _backlog() -> Trace:
    """70,000 requests in 140 s against a 3,000-node quota: over 65,536 wait at once, so the
    engine compacts its queue of waiting requests."""
    n = 70_000
    return [round(k * 0.002, 3) for k in range(n)], [30.0 + (k % 7) * 5.0 for k in range(n)]


SCENARIOS: dict[str, tuple[Trace, ClusterSettings, HeadroomPolicy]] = {
    "spot-stockouts-timeouts-quota": (
        _trace(seed=1),
        ClusterSettings(
            baseline=2,
            max_nodes=40,
            provision_delay=parse_distribution("lognormal:median=240,p95=420"),
            max_provision_time_s=400.0,
            stockout_probability=0.15,
            preemption_rate_per_hour=2.0,
            node_delete_time_s=30.0,
            scale_down_after_s=120.0,
            scale_down_delay_after_add_s=0.0,
            seed=3,
        ),
        NoHeadroom(),
    ),
    "warm-spot": (
        _trace(seed=2),
        ClusterSettings(
            baseline=3,
            provision_delay=parse_distribution("uniform:60,300"),
            preemption_rate_per_hour=1.0,
            scale_down_after_s=60.0,
            scale_down_delay_after_add_s=0.0,
            seed=5,
        ),
        WarmHeadroom(5),
    ),
    "predictive": (
        _trace(seed=3),
        ClusterSettings(
            baseline=1,
            max_nodes=60,
            provision_delay=parse_distribution("exponential:mean=200"),
            scale_down_after_s=300.0,
            seed=11,
        ),
        PredictiveHeadroom(target_wait_s=10.0, lead_time_s=300.0),
    ),
    "scheduled-grow-and-drop": (
        _trace(seed=4),
        ClusterSettings(
            provision_delay=parse_distribution("fixed:90"),
            preemption_rate_per_hour=0.5,
            scale_down_after_s=60.0,
            scale_down_delay_after_add_s=0.0,
            seed=2,
        ),
        ScheduledHeadroom(((0, 6), (1200, 0), (2400, 10), (3600, 1))),
    ),
    "backlog": (
        _backlog(),
        ClusterSettings(
            max_nodes=3000,
            provision_delay=parse_distribution("fixed:120"),
            scale_down_after_s=60.0,
            scale_down_delay_after_add_s=0.0,
        ),
        WarmHeadroom(20),
    ),
}

# name: (digest of every field, busy node-s, billed node-s at 60 s minimum, nodes created, peak
# nodes, quota hits, scale-up failures, provision time-outs, preemptions, restarts, sum of waits)
Figures = tuple[str, float, float, int, int, int, int, int, int, int, float]
PINNED: dict[str, Figures] = {
    "backlog": (
        "11ad500640a650333256c6ec12a08c4995d50d188ab18edde8df2689c96d97a8",
        3150000.0,
        3615000.0,
        3000,
        3000,
        115,
        0,
        0,
        0,
        0,
        40704190.0,
    ),
    "predictive": (
        "8fd3ff00562d52d53f52a3b3605db70857d8463c2f283b48939e992dfe909361",
        184583.68299999984,
        278701.05700000003,
        90,
        60,
        117,
        0,
        2,
        0,
        0,
        28999.990490107884,
    ),
    "scheduled-grow-and-drop": (
        "4f24b5eceecc54abf569d5b22bb569b246aaf3f2d8cd2fe6b7bc7ba60c9a8566",
        205816.95905272377,
        256493.45328675557,
        205,
        88,
        0,
        0,
        0,
        38,
        33,
        19700.751863188638,
    ),
    "spot-stockouts-timeouts-quota": (
        "63a72a7b180bb3a33a933d6352d321295eb57011dc96c7d5d98c824157bd7c8b",
        248496.66447253193,
        303992.38299677597,
        201,
        40,
        206,
        2,
        16,
        168,
        167,
        775262.7655963888,
    ),
    "warm-spot": (
        "bfeaf22690fa1d2250f01cd8124fd058139f016c03ded2c53d720b46d4606bf0",
        209674.3334225047,
        283015.02142509515,
        218,
        100,
        0,
        0,
        0,
        68,
        62,
        32744.22894220024,
    ),
}


def _digest(r: SimResult) -> str:
    # repr of a float round-trips exactly, so equal digests mean bit-equal results
    return hashlib.sha256(repr(dataclasses.astuple(r)).encode()).hexdigest()


def _figures(r: SimResult, arrivals: list[float]) -> Figures:
    return (
        _digest(r),
        r.busy_node_s,
        r.billed_node_s(60.0),
        len(r.node_created_s),
        r.peak_nodes,
        r.quota_hits,
        r.scale_up_failures,
        r.provision_timeouts,
        r.preemptions,
        sum(r.restarts),
        sum(s - a for s, a in zip(r.start_s, arrivals, strict=True)),
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_simulate_output_is_pinned(name: str) -> None:
    (arrivals, durations), cluster, policy = SCENARIOS[name]
    result = simulate(arrivals, durations, cluster, policy)
    assert _figures(result, arrivals) == PINNED[name]
