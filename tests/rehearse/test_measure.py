"""Numbers from timelines and node samples: waits, busy and idle GPU time, peaks, demand."""

from __future__ import annotations

import pytest

from elasticityops.rehearse.measure import (
    InvocationTimes,
    NodeSample,
    NodeSeen,
    busy_gpu_s,
    demand_at,
    measured_metrics,
    node_seconds,
    peak_nodes,
    run_end_s,
    series,
    wait_percentiles,
)


def inv(accepted: float | None, started: float | None, finished: float | None) -> InvocationTimes:
    return InvocationTimes(
        arrival_s=accepted or 0.0, accepted_s=accepted, started_s=started, finished_s=finished
    )


def nodes(t: float, *named: tuple[str, float]) -> NodeSample:
    return NodeSample(t, tuple(NodeSeen(n, c, True) for n, c in named))


def test_wait_is_started_less_accepted_and_none_before_start() -> None:
    assert inv(10.0, 14.5, 30.0).wait_s == pytest.approx(4.5)
    assert inv(10.0, None, None).wait_s is None


def test_percentiles_follow_numpy_and_empty_is_zero() -> None:
    waits = [float(x) for x in range(101)]
    assert wait_percentiles(waits) == pytest.approx((50.0, 95.0, 99.0))
    assert wait_percentiles([]) == (0.0, 0.0, 0.0)


def test_busy_sums_run_intervals_and_clips_the_unfinished() -> None:
    runs = [inv(0, 1, 11), inv(0, 5, None), inv(0, None, None)]
    assert busy_gpu_s(runs, end_s=20.0) == pytest.approx(10 + 15)


def test_node_seconds_from_creation_to_midpoint_of_disappearance() -> None:
    samples = [
        nodes(0.0, ("base", -100.0)),
        nodes(10.0, ("base", -100.0), ("n1", 4.0)),
        nodes(20.0, ("base", -100.0), ("n1", 4.0)),
        nodes(30.0, ("base", -100.0)),
    ]
    # base: the whole window [0, 40]; n1: from its creation at 4 to 25 (between 20 and 30).
    assert node_seconds(samples, 0.0, 40.0) == pytest.approx(40 + 21)


def test_node_seen_again_is_alive_to_the_end() -> None:
    samples = [nodes(0.0, ("a", 0.0)), nodes(10.0), nodes(20.0, ("a", 0.0))]
    assert node_seconds(samples, 0.0, 30.0) == pytest.approx(30.0)


def test_peak_and_idle() -> None:
    samples = [
        nodes(0.0),
        nodes(5.0, ("a", 1.0)),
        nodes(10.0, ("a", 1.0), ("b", 8.0)),
        nodes(15.0, ("a", 1.0)),
    ]
    runs = [inv(0.0, 3.0, 9.0)]
    m = measured_metrics(runs, samples, end_s=20.0)
    assert peak_nodes(samples) == m.peak_nodes == 2
    # a: 1..20 (19 s), b: 8..12.5 (4.5 s); busy 6 s.
    assert m.busy_gpu_s == pytest.approx(6.0)
    assert m.idle_gpu_s == pytest.approx(19 + 4.5 - 6)
    assert m.p50_wait_s == pytest.approx(3.0)


def test_idle_is_never_negative() -> None:
    assert measured_metrics([inv(0.0, 0.0, 50.0)], [], end_s=50.0).idle_gpu_s == 0.0


def test_demand_counts_running_and_waiting_and_series_agrees() -> None:
    runs = [inv(0.0, 5.0, 20.0), inv(2.0, None, None), inv(3.0, 4.0, 6.0), inv(None, None, None)]
    samples = [nodes(t) for t in (0.0, 2.5, 5.0, 10.0, 25.0)]
    s = series(runs, samples)
    assert s.demand == tuple(demand_at(runs, t) for t in s.t_s) == (1, 2, 3, 2, 1)
    assert s.nodes == (0, 0, 0, 0, 0)


def test_window_ends_at_the_last_end_or_the_deadline() -> None:
    assert run_end_s([inv(0, 1, 7), inv(0, 2, 9)], deadline_s=100.0) == 9.0
    assert run_end_s([inv(0, 1, 7), inv(0, 2, None)], deadline_s=100.0) == 100.0


def test_a_warmup_counts_only_what_follows_it() -> None:
    runs = [
        InvocationTimes(0.0, 0.0, 50.0, 80.0),  # arrived in the warm-up: its wait is not counted
        InvocationTimes(100.0, 100.0, 101.0, 111.0),
    ]
    samples = [
        nodes(0.0, ("a", -5.0), ("b", 10.0)),
        nodes(60.0, ("a", -5.0), ("b", 10.0)),
        nodes(120.0, ("a", -5.0)),
    ]
    m = measured_metrics(runs, samples, end_s=130.0, start_s=60.0)
    assert m.p50_wait_s == m.p99_wait_s == pytest.approx(1.0)
    assert m.busy_gpu_s == pytest.approx(20 + 10)  # 60..80 of the first run, all of the second
    # a: 60..130 (70 s); b: 60..90 (gone between the samples at 60 and 120).
    assert m.idle_gpu_s == pytest.approx(70 + 30 - 30)
    assert m.peak_nodes == 2
    assert measured_metrics(runs, samples, end_s=130.0, start_s=61.0).peak_nodes == 1
