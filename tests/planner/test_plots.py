"""The planner's plots, read from the matplotlib objects they draw (axis scales, the points and
their labels), not from pixels: a wait axis where 0-10 s can be read, a one-policy cost plot
with more than one point, the recommended setting marked."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from elasticityops.planner.cost_plots import (
    figure_cost_by_hour,
    figure_cost_vs_wait,
    node_seconds_per_piece,
    p95_per_piece,
    plot_cost_by_hour,
)
from elasticityops.planner.model import simulate
from elasticityops.planner.plots import PlottedRun, figure_wait_cdf, plot_wait_cdf
from elasticityops.planner.summary import Summary, WaitStats, summarize
from elasticityops.planner.trace import Trace

from .builders import settings

HOURS = 8


@pytest.fixture(scope="module")
def one_run() -> PlottedRun:
    """8 hours of one request a minute (5 min each), and a burst of 120 at once in hour 3: the
    burst waits for new nodes (120 s each), the rest mostly finds one idle."""
    steady = np.arange(0.0, HOURS * 3600.0, 60.0)
    burst = np.full(120, 3 * 3600.0 + 600.0)
    arrivals = np.sort(np.r_[steady, burst])
    trace = Trace(arrivals, np.full(len(arrivals), 300.0))
    cluster = settings()
    result = simulate(list(arrivals), list(trace.duration_s), cluster, None)
    return PlottedRun(summarize("none", trace, result, cluster), result, arrivals)


def _axes(fig: Figure) -> Axes:
    return fig.axes[0]


def _share_of_width(ax: Axes, x: float) -> float:
    """Where `x` falls across the axis, 0 (left) to 1 (right), whatever the scale."""
    return float((ax.transScale + ax.transLimits).transform((x, 0.0))[0])


def _marked(ax: Axes, starts: str) -> PathCollection:
    found = [
        c for c in ax.collections if isinstance(c, PathCollection) and str(c.get_label()).startswith(starts)
    ]
    assert len(found) == 1, [c.get_label() for c in ax.collections]
    return found[0]


def _texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_the_wait_cdf_gives_the_first_seconds_room(one_run: PlottedRun) -> None:
    long_tail = replace(one_run, arrival_s=one_run.arrival_s.copy())
    long_tail.arrival_s[-1] -= 1000.0  # one request that waited over 1,000 s
    ax = _axes(figure_wait_cdf([long_tail]))
    assert ax.get_xscale() == "symlog"
    assert ax.get_xlim()[1] >= 1000.0
    # On a linear axis to 1,000 s, 0-10 s was 1% of the width (one vertical line).
    assert _share_of_width(ax, 10.0) - _share_of_width(ax, 0.0) > 0.3
    assert 0.0 in ax.get_xticks()
    assert 1.0 in ax.get_xticks()


def test_the_wait_cdf_file_is_written(one_run: PlottedRun, tmp_path: Path) -> None:
    path = plot_wait_cdf([one_run], tmp_path / "wait_cdf.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_one_policy_cost_plot_has_a_point_per_hour_and_the_whole_trace_marked(
    one_run: PlottedRun, tmp_path: Path
) -> None:
    ax = _axes(figure_cost_by_hour(one_run))
    hours = _marked(ax, "each hour")
    points = np.asarray(hours.get_offsets())
    assert len(points) >= HOURS  # one per hour with requests, not one dot
    burst_hour = points[np.argmax(points[:, 0])]
    assert burst_hour[0] >= 100.0  # the burst's hour waited for new nodes
    s = one_run.summary
    whole = _marked(ax, "none, the whole trace")
    assert np.allclose(whole.get_offsets(), [[s.time_to_start_s.p95, s.cost_usd / s.horizon_hours]])
    (label,) = [t for t in _texts(ax) if "the whole trace" in t]
    assert f"p95 {s.time_to_start_s.p95:.1f} s" in label
    assert "/h on average" in label
    assert ax.get_xscale() == "symlog"
    assert ax.get_ylim()[0] == 0.0
    assert plot_cost_by_hour(one_run, tmp_path / "cost.png").read_bytes()[:4] == b"\x89PNG"


def test_hourly_costs_add_up_to_the_run_cost(one_run: PlottedRun) -> None:
    r = one_run.result
    horizon = r.horizon_s
    edges = np.r_[np.arange(0.0, horizon, 3600.0), horizon]
    per_hour = node_seconds_per_piece(r.node_created_s, r.node_deleted_s, edges)
    lives = [min(d, horizon) - c for c, d in zip(r.node_created_s, r.node_deleted_s, strict=True)]
    assert per_hour.sum() == pytest.approx(sum(lives))
    assert (per_hour >= 0).all()


def test_node_seconds_per_piece_against_overlaps() -> None:
    created = [0.0, 50.0, 120.0, 10.0]
    deleted = [100.0, float("inf"), 130.0, 10.0]
    edges = np.array([0.0, 60.0, 120.0, 180.0])
    expected = [
        sum(max(0.0, min(d, hi) - max(c, lo)) for c, d in zip(created, deleted, strict=True))
        for lo, hi in itertools.pairwise(edges)
    ]
    assert node_seconds_per_piece(created, deleted, edges) == pytest.approx(expected)


def test_p95_per_piece() -> None:
    arrivals = np.array([1.0, 2.0, 3.0, 70.0, 200.0])
    waits = np.array([0.0, 0.0, 100.0, 5.0, 7.0])
    p95, has = p95_per_piece(arrivals, waits, np.array([0.0, 60.0, 120.0, 180.0, 240.0]))
    assert has.tolist() == [True, True, False, True]
    assert p95[0] == pytest.approx(np.percentile([0.0, 0.0, 100.0], 95))
    assert p95[[1, 3]].tolist() == [5.0, 7.0]


def _summary(policy: str, p95: float, cost: float) -> Summary:
    stats = WaitStats(p50=p95 / 4, p95=p95, p99=p95 * 2, max=p95 * 3, mean=p95 / 2)
    no_faults = dict.fromkeys(
        ("quota_hits", "scale_up_failures", "provision_timeouts", "preemptions", "restarted_requests"), 0
    )
    return Summary(
        policy=policy,
        requests=1000,
        time_to_start_s=stats,
        waited_share=0.5,
        node_hours_billed=cost,
        busy_gpu_hours=cost / 2,
        idle_gpu_hours=cost / 2,
        provisioning_node_hours=1.0,
        cost_usd=cost,
        cost_per_1000_requests_usd=cost,
        peak_nodes=10,
        horizon_hours=24.0,
        price_per_node_hour=1.0,
        **no_faults,
    )


def _settings_evaluated() -> Sequence[Summary]:
    return [_summary(f"warm:{k}", 300.0 / (k + 1), 100.0 + 10 * k) for k in range(20)]


def test_the_frontier_plot_marks_the_recommended_setting() -> None:
    evaluated = _settings_evaluated()
    best = evaluated[18]  # p95 300/19 = 15.8 s, $280
    ax = _axes(figure_cost_vs_wait(evaluated, frontier=evaluated, target_p95_s=20.0, recommended=best))
    star = _marked(ax, "recommended: warm:18")
    assert np.allclose(star.get_offsets(), [[best.time_to_start_s.p95, best.cost_usd]])
    (label,) = [t for t in _texts(ax) if t.startswith("recommended")]
    assert "p95 15.8 s" in label
    assert r"\$280 in all" in label
    assert ax.get_xscale() == "symlog"
    assert ax.get_xlim()[1] >= 300.0
    assert ax.get_ylim()[0] == 0.0


def test_without_a_recommendation_the_closest_setting_is_marked() -> None:
    evaluated = _settings_evaluated()
    ax = _axes(figure_cost_vs_wait(evaluated, target_p95_s=1.0, closest=evaluated[-1]))
    _marked(ax, "closest to the target: warm:19")
    assert not [c for c in ax.collections if str(c.get_label()).startswith("recommended")]


def test_a_few_settings_are_each_labelled_with_their_numbers() -> None:
    few = [_summary("warm:50", 64.4, 498.0), _summary("none", 197.6, 329.0)]
    texts = _texts(_axes(figure_cost_vs_wait(few)))
    assert "warm:50\np95 64.4 s, \\$498" in texts
    assert "none\np95 197.6 s, \\$329" in texts
