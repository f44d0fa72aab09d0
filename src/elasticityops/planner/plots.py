"""PNG plots of planner runs (matplotlib, Agg): demand vs nodes and the time-to-start CDF; the
cost plots are in `cost_plots`. Each `figure_*` builds a Figure (what tests inspect), each
`plot_*` writes it to a file and returns the path.

Figures are `matplotlib.figure.Figure`s made directly, not through pyplot: nothing is kept in
pyplot's registry, so nothing has to be closed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from elasticityops.planner.model.result import SimResult, SimTimeSeries
from elasticityops.planner.summary import Summary

# Waits span 0 to many minutes, and the seconds near 0 matter most: a symmetric-log axis is
# linear up to 1 s (so a wait of 0, which a plain log axis cannot show, sits at its left end) and
# logarithmic above, so 0-10 s takes about half the width when the longest wait is 1,000 s.
WAIT_LINEAR_UP_TO_S = 1.0
_WAIT_TICKS = (0, 1, 5, 10, 30, 60, 300, 1800, 3 * 3600, 86_400)


@dataclass(frozen=True)
class PlottedRun:
    """What the plots need from one run: its summary, its result and the trace's arrivals."""

    summary: Summary
    result: SimResult
    arrival_s: np.ndarray

    @property
    def timeline(self) -> SimTimeSeries:
        return self.result.timeline

    @property
    def waits(self) -> np.ndarray:
        waits: np.ndarray = np.asarray(self.result.start_s, dtype=np.float64) - self.arrival_s
        return waits


def save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    return path


def wait_axis(ax: Axes, longest_s: float) -> None:
    """The x axis of a wait in seconds: symmetric-log (see WAIT_LINEAR_UP_TO_S) from 0 to the
    first round tick past `longest_s`."""
    wanted = max(10.0, longest_s * 1.2)
    right = min((t for t in _WAIT_TICKS if t >= wanted), default=wanted)  # end on a tick
    ax.set_xscale("symlog", linthresh=WAIT_LINEAR_UP_TO_S, linscale=0.5)
    ax.set_xlim(-0.05, right)
    ax.set_xticks([t for t in _WAIT_TICKS if t <= right])
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: _seconds(value)))


def _seconds(value: float) -> str:
    if value >= 3600 and value % 3600 == 0:
        return f"{value / 3600:g} h"
    if value >= 60 and value % 60 == 0:
        return f"{value / 60:g} min"
    return f"{value:g}"


def _time_axis(t_s: Sequence[float]) -> tuple[np.ndarray, str]:
    t = np.asarray(t_s, dtype=np.float64)
    span = float(t[-1]) if len(t) else 0.0
    if span > 3 * 86_400:
        return t / 86_400.0, "days since trace start"
    if span > 3 * 3600:
        return t / 3600.0, "hours since trace start"
    return t / 60.0, "minutes since trace start"


def _demand_panel(ax: Axes, tl: SimTimeSeries, x: np.ndarray, mask: np.ndarray) -> None:
    ready = np.asarray(tl.ready)[mask]
    ax.plot(x[mask], np.asarray(tl.demand)[mask], color="#d62728", lw=0.8, label="demand (running + waiting)")
    ax.plot(x[mask], ready, color="#1f77b4", lw=0.8, label="ready nodes")
    ax.fill_between(
        x[mask],
        ready,
        ready + np.asarray(tl.provisioning)[mask],
        color="#ff7f0e",
        alpha=0.35,
        lw=0,
        label="provisioning nodes",
    )
    if any(tl.headroom):
        ax.plot(x[mask], np.asarray(tl.headroom)[mask], color="#2ca02c", lw=0.8, label="headroom asked")
    ax.grid(alpha=0.3)


def plot_demand(runs: Sequence[PlottedRun], path: Path, zoom_s: float = 5400.0) -> Path:
    """Left: the whole trace. Right: `zoom_s` around the first run's peak demand (the burst)."""
    fig = Figure(figsize=(13, 2.9 * len(runs) + 0.6))
    axes = fig.subplots(len(runs), 2, squeeze=False, gridspec_kw={"width_ratios": [3, 1]})
    first = runs[0].timeline
    t_peak = first.t_s[int(np.argmax(first.demand))] if first.t_s else 0.0
    for row, run in enumerate(runs):
        tl = run.timeline
        t = np.asarray(tl.t_s, dtype=np.float64)
        x, label = _time_axis(tl.t_s)
        whole, near = np.ones(len(t), dtype=bool), np.abs(t - t_peak) <= zoom_s / 2
        _demand_panel(axes[row, 0], tl, x, whole)
        _demand_panel(axes[row, 1], tl, (t - t_peak) / 60.0, near)
        s = run.summary
        axes[row, 0].set_title(
            f"{s.policy}: p95 wait {s.time_to_start_s.p95:.0f} s, cost ${s.cost_usd:,.0f}, "
            f"peak {s.peak_nodes:,} nodes",
            fontsize=10,
            loc="left",
        )
        axes[row, 1].set_title("around peak demand", fontsize=9, loc="left")
        axes[row, 0].set_ylabel("GPU nodes / requests")
        axes[row, 0].set_xlabel(label)
        axes[row, 1].set_xlabel("minutes from peak demand")
        axes[row, 0].legend(loc="upper right", fontsize=7, ncol=2)
    fig.tight_layout()
    return save(fig, path)


def figure_wait_cdf(runs: Sequence[PlottedRun]) -> Figure:
    fig = Figure(figsize=(8, 4.8))
    ax = fig.subplots()
    for run in runs:
        w = np.sort(run.waits)
        if not len(w):
            continue
        y = np.arange(1, len(w) + 1) / len(w)
        step = max(1, len(w) // 5000)  # thin the curve; keep the last point
        idx = np.r_[np.arange(0, len(w), step), len(w) - 1]
        ax.step(w[idx], y[idx], where="post", lw=1.4, label=run.summary.policy)
    dress_cdf(
        ax,
        "time to start (s): arrival until a GPU node takes the request",
        "Time-to-start CDF per policy",
    )
    fig.tight_layout()
    return fig


def plot_wait_cdf(runs: Sequence[PlottedRun], path: Path) -> Path:
    return save(figure_wait_cdf(runs), path)


def dress_cdf(ax: Axes, xlabel: str, title: str) -> None:
    """The dressing every time-to-start CDF shares (the planner's, rehearse's): the wait axis,
    the p95 line, labels, grid and legend."""
    wait_axis(ax, float(ax.dataLim.x1) if ax.has_data() else 0.0)
    ax.axhline(0.95, color="grey", lw=0.8, ls="--")
    ax.text(ax.get_xlim()[1], 0.95, " p95", va="center", ha="left", fontsize=8, color="grey")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of requests started")
    ax.set_ylim(0, 1.01)
    ax.set_title(title, loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def finish_cdf(fig: Figure, ax: Axes, path: Path, xlabel: str, title: str) -> Path:
    """`dress_cdf`, then write the figure to `path`."""
    dress_cdf(ax, xlabel, title)
    fig.tight_layout()
    return save(fig, path)
