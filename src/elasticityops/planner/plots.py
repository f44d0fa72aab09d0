"""PNG plots of planner runs (matplotlib, Agg backend): demand vs nodes, time-to-start CDF,
cost vs p95 wait. Each function writes one file and returns its path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from elasticityops.planner.model.result import SimTimeSeries
from elasticityops.planner.summary import Summary


@dataclass(frozen=True)
class PlottedRun:
    """What the plots need from one run."""

    summary: Summary
    timeline: SimTimeSeries
    waits: np.ndarray


def _time_axis(t_s: Sequence[float]) -> tuple[np.ndarray, str]:
    t = np.asarray(t_s, dtype=np.float64)
    span = float(t[-1]) if len(t) else 0.0
    if span > 3 * 86_400:
        return t / 86_400.0, "days since trace start"
    if span > 3 * 3600:
        return t / 3600.0, "hours since trace start"
    return t / 60.0, "minutes since trace start"


def _demand_panel(ax: Any, tl: SimTimeSeries, x: np.ndarray, mask: np.ndarray) -> None:
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
    fig, axes = plt.subplots(
        len(runs), 2, figsize=(13, 2.9 * len(runs) + 0.6), squeeze=False, gridspec_kw={"width_ratios": [3, 1]}
    )
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
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_wait_cdf(runs: Sequence[PlottedRun], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for run in runs:
        w = np.sort(run.waits)
        if not len(w):
            continue
        y = np.arange(1, len(w) + 1) / len(w)
        step = max(1, len(w) // 5000)  # thin the curve; keep the last point
        idx = np.r_[np.arange(0, len(w), step), len(w) - 1]
        ax.step(w[idx], y[idx], where="post", lw=1.4, label=run.summary.policy)
    return finish_cdf(
        fig,
        ax,
        path,
        "time to start (s): arrival until a GPU node takes the request",
        "Time-to-start CDF per policy",
    )


def finish_cdf(fig: Any, ax: Any, path: Path, xlabel: str, title: str) -> Path:
    """The dressing every time-to-start CDF shares (the planner's, rehearse's): the p95 line,
    labels, grid and legend; then write it to `path`."""
    ax.axhline(0.95, color="grey", lw=0.8, ls="--")
    ax.text(ax.get_xlim()[1], 0.95, " p95", va="center", ha="left", fontsize=8, color="grey")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of requests started")
    ax.set_ylim(0, 1.01)
    ax.set_title(title, loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_cost_vs_wait(
    summaries: Sequence[Summary],
    path: Path,
    *,
    frontier: Sequence[Summary] = (),
    target_p95_s: float | None = None,
) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.8))
    xs = [s.time_to_start_s.p95 for s in summaries]
    ys = [s.cost_usd for s in summaries]
    ax.scatter(xs, ys, s=28, color="#1f77b4", alpha=0.7, label="settings evaluated", zorder=3)
    if len(summaries) <= 12:
        for s in summaries:
            ax.annotate(
                s.policy,
                (s.time_to_start_s.p95, s.cost_usd),
                fontsize=7,
                xytext=(4, 3),
                textcoords="offset points",
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
    ax.set_xlabel("p95 time to start (s)")
    ax.set_ylabel("cost over the trace (USD)")
    ax.set_title("Cost vs p95 wait", loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
