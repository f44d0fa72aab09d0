"""Cost against p95 time to start, as PNGs: `cost_vs_wait.png` of `eops plan run` and
`frontier.png` of `eops plan recommend`.

- Several settings (several policies, or every setting `recommend` evaluated): one point each,
  total cost over the trace against its p95, the frontier as a line and the recommended setting
  marked and labelled with its numbers.
- One policy: one point would say nothing, so the trace is cut into hours (shorter pieces for a
  trace under 6 hours) and each is a point: what that hour's nodes cost per hour against the p95
  of the requests that arrived in it, coloured by time, with the whole trace's point (its cost per
  hour on average) marked and labelled. The spread shows which hours pay for the waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from elasticityops.planner.plots import PlottedRun, save, wait_axis
from elasticityops.planner.summary import Summary

_LABELLED_UP_TO = 12  # settings labelled one by one; past that the labels hide the points


def figure_cost_vs_wait(
    summaries: Sequence[Summary],
    *,
    frontier: Sequence[Summary] = (),
    target_p95_s: float | None = None,
    recommended: Summary | None = None,
    closest: Summary | None = None,
) -> Figure:
    """`recommended` is marked as such; without one, `closest` is marked as the setting nearest
    the target (none met it)."""
    fig = Figure(figsize=(8, 4.8))
    ax = fig.subplots()
    xs = [s.time_to_start_s.p95 for s in summaries]
    ys = [s.cost_usd for s in summaries]
    ax.scatter(xs, ys, s=28, color="#1f77b4", alpha=0.7, label="settings evaluated", zorder=3)
    if len(summaries) <= _LABELLED_UP_TO:
        for k, s in enumerate(sorted(summaries, key=lambda s: s.cost_usd)):
            ax.annotate(
                f"{s.policy}\np95 {s.time_to_start_s.p95:.1f} s, {_usd(s.cost_usd)}",
                (s.time_to_start_s.p95, s.cost_usd),
                fontsize=7,
                xytext=(4, 3 if k % 2 else -3),  # neighbours in cost: one above, one below
                textcoords="offset points",
                va="bottom" if k % 2 else "top",
            )
    if frontier:
        f = sorted(frontier, key=lambda s: s.time_to_start_s.p95)
        ax.plot(
            [s.time_to_start_s.p95 for s in f],
            [s.cost_usd for s in f],
            color="#d62728",
            marker="o",
            lw=1.2,
            label="frontier (cheapest for its wait)",
            zorder=4,
        )
    if target_p95_s is not None:
        ax.axvline(target_p95_s, color="grey", ls="--", lw=0.9, label=f"target p95 {target_p95_s:g} s")
    wait_axis(ax, max([*xs, target_p95_s or 0.0], default=0.0))
    ax.set_ylim(0, max(ys, default=1.0) * 1.2 or 1.0)
    marked, what = (recommended, "recommended") if recommended else (closest, "closest to the target")
    if marked is not None:
        _mark(ax, marked.time_to_start_s.p95, marked.cost_usd, f"{what}: {marked.policy}", _numbers(marked))
    ax.set_xlabel("p95 time to start (s)")
    ax.set_ylabel("cost over the trace (USD)")
    ax.set_title("Cost vs p95 wait", loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def plot_cost_vs_wait(
    summaries: Sequence[Summary],
    path: Path,
    *,
    frontier: Sequence[Summary] = (),
    target_p95_s: float | None = None,
    recommended: Summary | None = None,
    closest: Summary | None = None,
) -> Path:
    figure = figure_cost_vs_wait(
        summaries, frontier=frontier, target_p95_s=target_p95_s, recommended=recommended, closest=closest
    )
    return save(figure, path)


def figure_cost_by_hour(run: PlottedRun) -> Figure:
    s = run.summary
    horizon_s = s.horizon_hours * 3600.0
    piece_s = piece_seconds(horizon_s)
    edges = (
        np.r_[np.arange(0.0, horizon_s, piece_s), horizon_s] if horizon_s > 0 else np.array([0.0, piece_s])
    )
    node_s = node_seconds_per_piece(run.result.node_created_s, run.result.node_deleted_s, edges)
    cost_per_hour = node_s * s.price_per_node_hour / np.diff(edges)  # the last piece may be short
    p95, has_requests = p95_per_piece(run.arrival_s, run.waits, edges)
    fig = Figure(figsize=(8, 4.8))
    ax = fig.subplots()
    per_unit, unit = (3600.0, "hours") if piece_s >= 3600 else (60.0, "minutes")
    points = ax.scatter(
        p95[has_requests],
        cost_per_hour[has_requests],
        c=edges[:-1][has_requests] / per_unit,
        cmap="viridis",
        s=22,
        alpha=0.8,
        label=f"each {_piece_name(piece_s)} (its requests' p95, its nodes' cost)",
        zorder=3,
    )
    fig.colorbar(points, ax=ax, label=f"{unit} since trace start")
    hours = s.horizon_hours or 1.0
    wait_axis(ax, max([*p95[has_requests], s.time_to_start_s.p95]))
    ax.set_ylim(0, max([*cost_per_hour, s.cost_usd / hours, 0.0]) * 1.2 or 1.0)
    _mark(
        ax,
        s.time_to_start_s.p95,
        s.cost_usd / hours,
        f"{s.policy}, the whole trace",
        f"{_numbers(s)}\n{_usd(s.cost_usd / hours, 2)}/h on average over {hours:,.1f} h",
    )
    ax.set_xlabel("p95 time to start (s)")
    ax.set_ylabel("cost per hour (USD)")
    skipped = int(np.count_nonzero(~has_requests))
    note = f"; {skipped} without requests not shown" if skipped else ""
    ax.set_title(f"Cost vs p95 wait, {s.policy}, per {_piece_name(piece_s)}{note}", loc="left", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def plot_cost_by_hour(run: PlottedRun, path: Path) -> Path:
    return save(figure_cost_by_hour(run), path)


def piece_seconds(horizon_s: float) -> float:
    """An hour, or for a trace under 6 hours a twelfth of it in whole minutes (at least one)."""
    if horizon_s >= 6 * 3600:
        return 3600.0
    return max(60.0, round(horizon_s / 12 / 60) * 60.0)


def node_seconds_per_piece(
    created: Sequence[float], deleted: Sequence[float], edges: np.ndarray
) -> np.ndarray:
    """Node-seconds between each pair of consecutive `edges`, each node counted from its creation
    (billing starts) to its deletion (inf: alive at the end), per second (the summary's cost also
    bills each node a minimum). The integral up to T of the node
    count is sum(max(0, T - created)) - sum(max(0, T - deleted)), each sum read off a sorted
    array with its running total: O(nodes log nodes), not nodes x pieces."""
    up_to = _sum_of_time_since(np.asarray(created, dtype=np.float64), edges)
    up_to -= _sum_of_time_since(np.asarray(deleted, dtype=np.float64), edges)
    per_piece: np.ndarray = np.diff(up_to)
    return per_piece


def _sum_of_time_since(times: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """sum(max(0, T - t) for t in times), for each T in `edges`."""
    times = np.sort(times[np.isfinite(times)])
    running = np.r_[0.0, np.cumsum(times)]
    before = np.searchsorted(times, edges, side="right")
    summed: np.ndarray = before * edges - running[before]
    return summed


def p95_per_piece(
    arrival_s: np.ndarray, waits: np.ndarray, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The p95 wait of the requests arriving in each piece, and which pieces had any."""
    pieces = len(edges) - 1
    which = np.clip(np.searchsorted(edges, arrival_s, side="right") - 1, 0, pieces - 1)
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(pieces + 1))
    p95 = np.zeros(pieces)
    for k in range(pieces):
        chunk = waits[order[bounds[k] : bounds[k + 1]]]
        if len(chunk):
            p95[k] = float(np.percentile(chunk, 95))
    has: np.ndarray = np.diff(bounds) > 0
    return p95, has


def _piece_name(piece_s: float) -> str:
    return "hour" if piece_s == 3600 else f"{piece_s / 60:g} minutes"


def _numbers(s: Summary) -> str:
    t = s.time_to_start_s
    return f"p50 {t.p50:.1f} s, p95 {t.p95:.1f} s, p99 {t.p99:.1f} s, {_usd(s.cost_usd)} in all"


def _usd(amount: float, decimals: int = 0) -> str:
    # A bare `$` pair would start matplotlib's math text.
    return f"\\${amount:,.{decimals}f}"


def _mark(ax: Axes, x: float, y: float, label: str, numbers: str) -> None:
    ax.scatter(
        [x],
        [y],
        label=label,
        marker="*",
        s=260,
        color="#ffbf00",
        edgecolors="black",
        linewidths=0.8,
        zorder=6,
    )
    # Called once the limits are set: the label goes on the side of the point with more room.
    fx, fy = (ax.transScale + ax.transLimits).transform((x, y))
    right, up = fx < 0.5, fy < 0.5
    ax.annotate(
        f"{label}\n{numbers}",
        (x, y),
        fontsize=8,
        xytext=(14 if right else -14, 14 if up else -14),
        textcoords="offset points",
        ha="left" if right else "right",
        va="bottom" if up else "top",
        bbox={"boxstyle": "round", "fc": "white", "ec": "#999999", "alpha": 0.9},
        arrowprops={"arrowstyle": "-", "color": "#777777", "lw": 0.8},
        zorder=7,
    )
