"""Files a rehearsal leaves in --out DIR: summary.json; per policy invocations-POLICY.csv,
series-POLICY.csv (GPU nodes and demand at each node sample) and predicted-series-POLICY.csv
(the planner's timeline); and two plots in the planner's style: time-to-start CDF measured vs
predicted, and GPU nodes vs demand over time (measured, with the planner's prediction beside
it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from elasticityops.planner.plots import finish_cdf
from elasticityops.planner.report import safe_name, write_json
from elasticityops.rehearse.driver import PolicyRecord
from elasticityops.rehearse.measure import series

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def write_invocations(path: Path, record: PolicyRecord) -> Path:
    """arrival_s,accepted_s,started_s,finished_s,wait_s,state (seconds since the replay began)."""

    def cell(x: float | None) -> str:
        return "" if x is None else f"{x:.3f}"

    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("arrival_s,accepted_s,started_s,finished_s,wait_s,state\n")
        for i in sorted(record.invocations, key=lambda i: i.arrival_s):
            out.write(
                f"{i.arrival_s:.3f},{cell(i.accepted_s)},{cell(i.started_s)},{cell(i.finished_s)},"
                f"{cell(i.wait_s)},{i.state}\n"
            )
    return path


def write_series(path: Path, record: PolicyRecord) -> Path:
    """t_s,gpu_nodes,gpu_nodes_ready,demand per node sample (demand: running + waiting)."""
    s = series(record.invocations, record.samples)
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("t_s,gpu_nodes,gpu_nodes_ready,demand\n")
        rows = zip(s.t_s, s.nodes, s.ready, s.demand, strict=True)
        out.writelines(f"{t:.3f},{n},{r},{d}\n" for t, n, r, d in rows)
    return path


def write_predicted_series(path: Path, record: PolicyRecord) -> Path | None:
    """The planner's timeline: t_s,demand,busy,ready,provisioning,headroom."""
    if record.prediction is None:
        return None
    tl = record.prediction.timeline
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("t_s,demand,busy,ready,provisioning,headroom\n")
        rows = zip(tl.t_s, tl.demand, tl.busy, tl.ready, tl.provisioning, tl.headroom, strict=True)
        out.writelines(f"{t:.3f},{d},{b},{r},{p},{h}\n" for t, d, b, r, p, h in rows)
    return path


def plot_wait_cdf(records: Sequence[PolicyRecord], path: Path, warmup_s: float = 0.0) -> Path:
    """The requests measured (after the warm-up), as the prediction's waits are."""
    fig = Figure(figsize=(8, 4.8))  # finish_cdf saves it; outside pyplot, nothing to close
    ax = fig.subplots()
    for k, rec in enumerate(records):
        colour = _COLOURS[k % len(_COLOURS)]
        waits = (i.wait_s for i in rec.invocations if i.arrival_s >= warmup_s)
        measured = np.sort([w for w in waits if w is not None])
        if len(measured):
            y = np.arange(1, len(measured) + 1) / len(measured)
            ax.step(measured, y, where="post", lw=1.4, color=colour, label=f"{rec.run.policy} measured")
        if rec.prediction is not None and rec.prediction.waits:
            predicted = np.sort(rec.prediction.waits)
            y = np.arange(1, len(predicted) + 1) / len(predicted)
            ax.step(
                predicted, y, where="post", lw=1.2, ls="--", color=colour, label=f"{rec.run.policy} predicted"
            )
    return finish_cdf(
        fig,
        ax,
        path,
        "time to start (s): accepted until the job's container runs",
        "Time-to-start CDF: measured (solid) vs predicted (dashed)",
    )


def plot_nodes_vs_demand(records: Sequence[PolicyRecord], path: Path, warmup_s: float = 0.0) -> Path:
    fig, axes = plt.subplots(len(records), 1, figsize=(11, 2.9 * len(records) + 0.6), squeeze=False)
    for row, rec in enumerate(records):
        ax = axes[row, 0]
        s = series(rec.invocations, rec.samples)
        t = np.asarray(s.t_s) / 60.0
        ax.plot(t, s.demand, color="#d62728", lw=1.0, label="demand (running + waiting)")
        ax.plot(t, s.nodes, color="#1f77b4", lw=1.0, label="GPU nodes")
        ax.plot(t, s.ready, color="#1f77b4", lw=0.8, ls=":", label="GPU nodes ready")
        if rec.prediction is not None:
            tl = rec.prediction.timeline
            pt = np.asarray(tl.t_s) / 60.0
            ax.plot(pt, tl.demand, color="#d62728", lw=0.8, ls="--", alpha=0.6, label="demand predicted")
            nodes = np.asarray(tl.ready) + np.asarray(tl.provisioning)
            ax.plot(pt, nodes, color="#1f77b4", lw=0.8, ls="--", alpha=0.6, label="GPU nodes predicted")
        if warmup_s > 0:
            ax.axvline(warmup_s / 60.0, color="grey", lw=0.8, ls="--", label="end of warm-up")
        m = rec.run.measured
        title = rec.run.policy
        if m is not None:
            title += (
                f": p95 wait {m.p95_wait_s:.0f} s, idle {m.idle_gpu_s:,.0f} GPU-s, peak {m.peak_nodes} nodes"
            )
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel("GPU nodes / requests")
        ax.set_xlabel("minutes since the replay began")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(
    out: Path, records: Sequence[PolicyRecord], payload: dict[str, Any], warmup_s: float = 0.0
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [write_json(out / "summary.json", payload)]
    for rec in records:
        name = safe_name(rec.run.policy)
        written.append(write_invocations(out / f"invocations-{name}.csv", rec))
        if rec.samples:
            written.append(write_series(out / f"series-{name}.csv", rec))
        predicted = write_predicted_series(out / f"predicted-series-{name}.csv", rec)
        if predicted is not None:
            written.append(predicted)
    measured = [r for r in records if r.invocations]
    if measured:
        written.append(plot_wait_cdf(measured, out / "wait_cdf.png", warmup_s))
        written.append(plot_nodes_vs_demand(measured, out / "nodes_vs_demand.png", warmup_s))
    return written
