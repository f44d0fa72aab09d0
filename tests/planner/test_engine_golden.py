"""The engine"s exact output for fixed small traces, pinned: a change to `simulate` that is meant to
keep its behaviour (a refactor, a speed-up) must leave every number here as it is, to the last
bit. The scenarios between them take every branch: waits, baseline and warm nodes, placeholders
grown and dropped, predictive sizing, quota hits, stockouts, provisioning time-outs, spot
preemptions of busy, warm and empty nodes, deletions in flight, events on a scan"s instant and
the compaction of a long queue of waiting requests.
If a change is meant to alter behaviour, rerun and re-pin, saying why in the commit."""

from __future__ import annotations

import dataclasses
import hashlib
import random

import pytest

from elasticityops.domain.headroom.sizing import (
    ArrivalRateHeadroom,
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
        ArrivalRateHeadroom(target_wait_s=10.0, lead_time_s=300.0),
    ),
    "predictive-load": (
        _trace(seed=3),
        ClusterSettings(
            baseline=1,
            max_nodes=60,
            provision_delay=parse_distribution("exponential:mean=200"),
            scale_down_after_s=300.0,
            slow_window_s=600.0,
            trend_window_s=900.0,
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
    "spread-without-soft-taints": (
        _trace(seed=5),
        ClusterSettings(
            provision_delay=parse_distribution("fixed:90"),
            scale_down_after_s=120.0,
            scale_down_delay_after_add_s=0.0,
            soft_taint_count=0,
            seed=5,
        ),
        WarmHeadroom(3),
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
        "26ae420d58b658ae54b5773483ecdfd42b68690fe0287a5acdf0d49b83164591",
        3150000.0,
        3615000.0,
        3000,
        3000,
        55103,
        0,
        0,
        0,
        0,
        40704190.0,
    ),
    "predictive": (
        "80f7e950a417b12bd5a5632da363dac9e032e1b6e9fc762ce73e99329a75a9a5",
        184583.68299999984,
        280223.563,
        92,
        60,
        137,
        0,
        3,
        0,
        0,
        29776.57087787006,
    ),
    "predictive-load": (
        "6b7e42c02d36214bc1f2d052126d767c34c88abc512a64ba324cb628063c7d22",
        184583.68299999984,
        273223.1270000002,
        112,
        60,
        240,
        0,
        3,
        0,
        0,
        34777.48060444804,
    ),
    "scheduled-grow-and-drop": (
        "3e80fd4562b93978fb79a8a58b25f85d27c4dab2349f53019a26428c00d45f59",
        207209.06645469097,
        260377.02236430932,
        210,
        90,
        0,
        0,
        0,
        41,
        39,
        20744.93629570451,
    ),
    "spot-stockouts-timeouts-quota": (
        "1592d8adced3dc43066b40176c05c48078ec9af88b67eee1c4c89206fac84a64",
        243048.46132150092,
        296916.9913524236,
        198,
        40,
        328,
        2,
        14,
        163,
        160,
        765962.8045884327,
    ),
    "spread-without-soft-taints": (
        "8e04775f08cbe98504c9fc033bc73cd0ef5d1f65da8cad1a7d98c17dfa2e086b",
        190181.53700000013,
        252792.07400000002,
        188,
        84,
        0,
        0,
        0,
        0,
        0,
        18133.868999999984,
    ),
    "warm-spot": (
        "ddd09b84544a90833a473e319083b0e438a87beab19068b3ba1e5ef153072db5",
        205780.03184469987,
        278053.6031946661,
        204,
        96,
        0,
        0,
        0,
        62,
        57,
        31012.98088218274,
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
